// Every collective of the chapter on the threads backend against the serial sum: each row of
// kAllReduceVariants, the ring's reduce-scatter and all-gather alone, the binomial trees from
// every root, and the native collectives; at 1, 2, 3, 4 and 8 ranks (8 threads on 2 cores finds
// other interleavings), sizes 0, 1, 7, 1000 and 2^16+3 (which do and do not divide by the rank
// count), in place and out of place. Then 1000 collectives back to back. The MPI tests
// (mpi_tests.cpp) run the same checks across processes.
//   ch05_tests --gtest_filter='Threads*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "collective_checks.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"

namespace {

using namespace concurdl::dp;
using namespace concurdl::dp::testing;
using concurdl::testing::within_seconds;

constexpr int kRankCounts[] = {1, 2, 3, 4, 8};
constexpr int kDeadline = 60;  // seconds; a scenario takes well under one, tsan ~10x more

// Runs body on `ranks` threads and returns the wrong elements summed over the ranks.
template <class F>
std::size_t wrong_on_threads(int ranks, F body) {
  std::atomic<std::size_t> wrong{0};
  within_seconds(kDeadline,
                 [&] { run_threads(ranks, [&](Communicator& comm) { wrong += body(comm); }); });
  return wrong.load();
}

// --- every all-reduce of the table ---

class ThreadsAllReduce : public ::testing::TestWithParam<std::tuple<const AllReduceVariant*, int>> {
};

TEST_P(ThreadsAllReduce, EqualsTheSerialSum) {
  // Not a structured binding: clang 14 (the tsan preset) cannot capture one in a lambda.
  const AllReduceVariant* row = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  for (std::size_t count : kSizes)
    for (bool in_place : {true, false}) {
      SCOPED_TRACE(std::to_string(count) + " floats, " + (in_place ? "in place" : "out of place"));
      EXPECT_EQ(wrong_on_threads(ranks,
                                 [&](Communicator& c) {
                                   return wrong_all_reduce(c, row->run, count, in_place);
                                 }),
                0u);
    }
}

std::vector<const AllReduceVariant*> all_rows() {
  std::vector<const AllReduceVariant*> rows;
  for (const AllReduceVariant& r : kAllReduceVariants) rows.push_back(&r);
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Table, ThreadsAllReduce,
                         ::testing::Combine(::testing::ValuesIn(all_rows()),
                                            ::testing::ValuesIn(kRankCounts)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)->name) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// --- the pieces on their own ---

class ThreadsPieces : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsPieces, RingReduceScatterAndAllGather) {
  const int ranks = GetParam();
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(std::to_string(count) + " floats");
    EXPECT_EQ(wrong_on_threads(
                  ranks, [&](Communicator& c) { return wrong_reduce_scatter_ring(c, count); }),
              0u);
    EXPECT_EQ(
        wrong_on_threads(ranks, [&](Communicator& c) { return wrong_all_gather_ring(c, count); }),
        0u);
  }
}

// Segments of 1 and 3 floats (many messages in flight per block), and 0 (one per block).
TEST_P(ThreadsPieces, RingWithAnySegmentSize) {
  const int ranks = GetParam();
  for (std::size_t seg : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
    SCOPED_TRACE("segments of " + std::to_string(seg));
    AlgoOptions opts;
    opts.segment_floats = seg;
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}})
      EXPECT_EQ(wrong_on_threads(ranks,
                                 [&](Communicator& c) {
                                   return wrong_all_reduce(c, &allreduce_ring, count, false, opts);
                                 }),
                0u);
  }
}

TEST_P(ThreadsPieces, TreesFromEveryRoot) {
  const int ranks = GetParam();
  for (int root = 0; root < ranks; ++root)
    for (std::size_t count : {std::size_t{1}, std::size_t{1000}}) {
      SCOPED_TRACE("root " + std::to_string(root) + ", " + std::to_string(count) + " floats");
      EXPECT_EQ(wrong_on_threads(
                    ranks, [&](Communicator& c) { return wrong_broadcast_tree(c, count, root); }),
                0u);
      EXPECT_EQ(wrong_on_threads(
                    ranks, [&](Communicator& c) { return wrong_reduce_tree(c, count, root); }),
                0u);
    }
}

TEST_P(ThreadsPieces, NativeCollectives) {
  const int ranks = GetParam();
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(std::to_string(count) + " floats");
    EXPECT_EQ(
        wrong_on_threads(
            ranks, [&](Communicator& c) { return wrong_native_broadcast(c, count, ranks - 1); }),
        0u);
    EXPECT_EQ(
        wrong_on_threads(
            ranks, [&](Communicator& c) { return wrong_native_reduce_scatter(c, count / ranks); }),
        0u);
    EXPECT_EQ(
        wrong_on_threads(
            ranks, [&](Communicator& c) { return wrong_native_all_gather(c, count / ranks); }),
        0u);
  }
}

// Floats that are not small integers: the native all-reduce sums in rank order for every
// element, so all ranks end with the same bits (data-parallel replicas must not drift apart).
TEST_P(ThreadsPieces, NativeAllReduceIsTheSameOnEveryRank) {
  const int ranks = GetParam();
  constexpr std::size_t kCount = 10007;
  std::vector<std::vector<float>> results(static_cast<std::size_t>(ranks));
  within_seconds(kDeadline, [&] {
    run_threads(ranks, [&](Communicator& comm) {
      std::vector<float> v(kCount);
      for (std::size_t i = 0; i < kCount; ++i)
        v[i] = 1.0f / static_cast<float>(i + 1 + comm.rank());
      comm.all_reduce(v);
      results[static_cast<std::size_t>(comm.rank())] = std::move(v);
    });
  });
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(results[static_cast<std::size_t>(r)], results[0]);
}

TEST_P(ThreadsPieces, ThousandCollectivesBackToBack) {
  const int ranks = GetParam();
  EXPECT_EQ(wrong_on_threads(ranks, [](Communicator& c) { return wrong_back_to_back(c, 1000); }),
            0u);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadsPieces, ::testing::ValuesIn(kRankCounts),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Hierarchical all-reduce: every cut of 1 to 8 ranks into equal hosts gives the sum.
TEST_P(ThreadsPieces, HierarchicalAllReduceOverEveryHostCut) {
  const int n = GetParam();
  within_seconds(kDeadline, [&] {
    std::atomic<std::size_t> wrong{0};
    run_threads(n, [&](Communicator& comm) { wrong += wrong_hierarchical(comm); });
    EXPECT_EQ(wrong.load(), 0u);
  });
}

// Hosts of different sizes are refused on every rank.
TEST(ThreadsCollectives, UnequalHostsAreRefused) {
  EXPECT_THROW(
      run_threads(3, [](Communicator& comm) { (void)host_groups(comm, comm.rank() == 0 ? 0 : 1); }),
      std::invalid_argument);
}

TEST(ThreadsCollectives, MismatchedCountsFailOnEveryRank) {
  within_seconds(kDeadline, [] {
    EXPECT_THROW(run_threads(3,
                             [](Communicator& comm) {
                               std::vector<float> v(comm.rank() == 1 ? 5 : 4, 1.0f);
                               comm.all_reduce(v);
                             }),
                 std::invalid_argument);
  });
}

TEST(AllReduceTable, NamesAreUniqueAndHandWrittenFirst) {
  std::vector<std::string> names;
  bool seen_native = false;
  for (const AllReduceVariant& r : kAllReduceVariants) {
    names.emplace_back(r.name);
    if (!r.hand_written) seen_native = true;
    EXPECT_FALSE(seen_native && r.hand_written) << r.name << " comes after a native row";
    EXPECT_FALSE(r.what.empty());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

TEST(AllReduceTable, BlocksCoverTheVectorOnce) {
  for (std::size_t count : kSizes)
    for (int parts : {1, 2, 3, 4, 8}) {
      std::size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Block b = block_of(count, parts, i);
        EXPECT_EQ(b.offset, next);
        EXPECT_LE(b.count, count / parts + 1);
        next = b.offset + b.count;
      }
      EXPECT_EQ(next, count);
    }
}

}  // namespace
