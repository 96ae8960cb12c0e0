// All-to-all on the threads backend: every row of kAllToAllVariants at 1, 2, 3, 4, 5 and 8 ranks
// (8 threads on 2 cores finds other interleavings; 3 and 5 are not powers of two, where Bruck's
// last step sends fewer blocks), blocks of 0, 1, 7 and 1000 floats; variable blocks with the
// counts exchanged first, native and pairwise; 500 rounds back to back; and the traffic model's
// counts against the bytes the communicator saw leave. The MPI tests run the same checks across
// processes.
//   ch05_tests --gtest_filter='AllToAll*'
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "all_to_all_checks.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/all_to_all.hpp"
#include "concurdl/dp/threads_backend.hpp"

namespace {

using namespace concurdl::dp;
using namespace concurdl::dp::testing;
using concurdl::testing::within_seconds;

constexpr int kRankCounts[] = {1, 2, 3, 4, 5, 8};
constexpr std::size_t kBlocks[] = {0, 1, 7, 1000};
constexpr int kDeadline = 60;

template <class F>
std::size_t wrong_on_threads(int ranks, F body) {
  std::atomic<std::size_t> wrong{0};
  within_seconds(kDeadline,
                 [&] { run_threads(ranks, [&](Communicator& comm) { wrong += body(comm); }); });
  return wrong.load();
}

class AllToAllRows : public ::testing::TestWithParam<std::tuple<const AllToAllVariant*, int>> {};

TEST_P(AllToAllRows, EveryBlockReachesItsRankInPlace) {
  // Not a structured binding: clang before 16 cannot capture one in a lambda.
  const AllToAllVariant* row = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  for (std::size_t block : kBlocks)
    EXPECT_EQ(wrong_on_threads(
                  ranks, [&](Communicator& c) { return wrong_all_to_all(c, row->run, block); }),
              0u)
        << row->name << ", " << ranks << " ranks, blocks of " << block;
}

std::vector<const AllToAllVariant*> rows() {
  std::vector<const AllToAllVariant*> out;
  for (const AllToAllVariant& r : kAllToAllRows) out.push_back(&r);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Table, AllToAllRows,
                         ::testing::Combine(::testing::ValuesIn(rows()),
                                            ::testing::ValuesIn(kRankCounts)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)->name) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

class AllToAllRanks : public ::testing::TestWithParam<int> {};

TEST_P(AllToAllRanks, VariableBlocksAfterTheCountsAreExchanged) {
  const int ranks = GetParam();
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(wrong_on_threads(ranks,
                               [&](Communicator& c) { return wrong_all_to_all_v(c, true, round); }),
              0u)
        << "native, round " << round;
    EXPECT_EQ(wrong_on_threads(
                  ranks, [&](Communicator& c) { return wrong_all_to_all_v(c, false, round); }),
              0u)
        << "pairwise, round " << round;
  }
}

// Many small all-to-alls in a row, every algorithm in turn, with no barrier between them: a
// message of one round taken by another would show as a wrong element.
TEST_P(AllToAllRanks, FiveHundredRoundsBackToBack) {
  const int ranks = GetParam();
  EXPECT_EQ(wrong_on_threads(ranks,
                             [&](Communicator& c) {
                               std::size_t wrong = 0;
                               for (int i = 0; i < 500; ++i)
                                 wrong +=
                                     wrong_all_to_all(c, kAllToAllRows[i % 3].run, 3) +
                                     (i % 50 == 0 ? wrong_all_to_all_v(c, i % 100 == 0, i) : 0);
                               return wrong;
                             }),
            0u);
}

// The bytes each rank's hand-written all-to-all hands to send, counted by the communicator,
// against the traffic model: pairwise (n - 1)/n of the data, Bruck the blocks whose rotated
// index has each bit set. A Bruck that sent every block at every step, or a pairwise that sent
// its own block, would be counted here.
TEST_P(AllToAllRanks, BytesSentAreTheModelsTraffic) {
  const int ranks = GetParam();
  constexpr std::size_t kBlock = 64;
  const double floats = static_cast<double>(kBlock) * ranks;
  for (const auto& row : {std::pair{&all_to_all_pairwise, pairwise_traffic(ranks, floats)},
                          std::pair{&all_to_all_bruck, bruck_traffic(ranks, floats)}}) {
    const auto fn = row.first;
    const AllToAllTraffic model = row.second;
    std::vector<std::uint64_t> sent(static_cast<std::size_t>(ranks));
    within_seconds(kDeadline, [&] {
      run_threads(ranks, [&](Communicator& comm) {
        std::vector<float> send(static_cast<std::size_t>(floats), 1.0f), recv(send.size());
        const std::uint64_t before = comm.bytes_sent();
        fn(comm, send, recv, {});
        sent[static_cast<std::size_t>(comm.rank())] = comm.bytes_sent() - before;
      });
    });
    for (std::uint64_t s : sent) EXPECT_EQ(static_cast<double>(s), model.floats * sizeof(float));
  }
  if (ranks == 4) {  // the models themselves: 3 messages of 3/4 N; 2 of N/2 each
    EXPECT_EQ(pairwise_traffic(4, 400).messages, 3);
    EXPECT_EQ(pairwise_traffic(4, 400).floats, 300);
    EXPECT_EQ(bruck_traffic(4, 400).messages, 2);
    EXPECT_EQ(bruck_traffic(4, 400).floats, 400);
  }
}

TEST(AllToAll, MismatchedCountsAreRefusedOnEveryRank) {
  std::atomic<int> refused{0};
  within_seconds(kDeadline, [&] {
    run_threads(2, [&](Communicator& comm) {
      const std::vector<std::size_t> send_counts = {1, 2};
      // Rank 1 expects 3 floats from rank 0, which sends it 2.
      const std::vector<std::size_t> recv_counts =
          comm.rank() == 0 ? std::vector<std::size_t>{1, 1} : std::vector<std::size_t>{3, 2};
      std::vector<float> send(3), recv(recv_counts[0] + recv_counts[1]);
      try {
        comm.all_to_all_v(send, send_counts, recv, recv_counts);
      } catch (const std::invalid_argument&) {
        ++refused;
      }
    });
  });
  EXPECT_GE(refused.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllRanks, ::testing::ValuesIn(kRankCounts),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
