// RankTeam (rank_team.hpp): a job runs once on every rank, at 1, 2, 4 and 8 ranks, over many
// jobs (a count per rank conserved); the ranks' communicator works inside a job; and a rank that
// throws kills the team: that call and every later one rethrow, and destroying it never hangs.
//   ch05_tests --gtest_filter='*RankTeam*'
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/rank_team.hpp"

namespace {

using namespace concurdl::dp;

class RankTeamRanks : public ::testing::TestWithParam<int> {};

TEST_P(RankTeamRanks, EveryJobRunsOnceOnEveryRank) {
  const int ranks = GetParam();
  RankTeam team(ranks);
  EXPECT_EQ(team.ranks(), ranks);
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(ranks));
  constexpr int kJobs = 500;
  for (int j = 0; j < kJobs; ++j)
    team.run([&](Communicator& comm) { runs[static_cast<std::size_t>(comm.rank())]++; });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(runs[static_cast<std::size_t>(r)].load(), kJobs);
}

TEST_P(RankTeamRanks, TheRanksCommunicateInsideAJob) {
  const int ranks = GetParam();
  RankTeam team(ranks);
  std::vector<std::vector<float>> data(static_cast<std::size_t>(ranks), std::vector<float>(33));
  for (int round = 0; round < 20; ++round) {
    team.run([&](Communicator& comm) {
      std::vector<float>& mine = data[static_cast<std::size_t>(comm.rank())];
      for (float& x : mine) x = static_cast<float>(comm.rank() + round);
      allreduce_ring(comm, mine, mine, {});
    });
    const float want = static_cast<float>(ranks * (ranks - 1) / 2 + ranks * round);
    for (const auto& d : data)
      for (float x : d) ASSERT_EQ(x, want) << "round " << round;
  }
}

TEST_P(RankTeamRanks, ARankThatThrowsKillsTheTeamAndEveryLaterCallRethrows) {
  const int ranks = GetParam();
  RankTeam team(ranks);
  team.run([](Communicator&) {});
  EXPECT_THROW(team.run([](Communicator& comm) {
    if (comm.rank() == comm.size() - 1) throw std::runtime_error("rank failed");
  }),
               std::runtime_error);
  EXPECT_THROW(team.run([](Communicator&) {}), std::runtime_error);
  // Destroyed here: must not hang.
}

INSTANTIATE_TEST_SUITE_P(Ranks, RankTeamRanks, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
