// The kernels' variant tables (kernel_tables.hpp), on the CPU: every row named once, with one
// line of what it changes, a launch in a CUDA build (none without), and an occupancy query
// unless its kernels are a library's (the peers). ch04_gpu_tests runs the rows on a GPU.
//   ch04_tests --gtest_filter='KernelTables*'
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "concurdl/gpu/kernel_tables.hpp"
#include "concurdl/harness/experiment.hpp"

namespace {

using namespace concurdl::gpu;

bool is_peer(std::string_view name) {
  return name == "cub" || name == "cublas" || name == "cublas_fp16" || name == "cublas_bf16";
}

template <class Table>
void check_rows(const Table& table) {
  ASSERT_GT(table.size(), 0u);
  std::set<std::string_view> names;
  for (const auto& row : table) {
    SCOPED_TRACE(std::string(row.name));
    EXPECT_TRUE(names.insert(row.name).second) << "named twice";
    EXPECT_FALSE(row.what.empty());
    EXPECT_EQ(row.what.find('\n'), std::string_view::npos) << "one line";
    EXPECT_TRUE(row.needs.empty()) << "the experiment says when there is no GPU, not the row";
    EXPECT_EQ(row.launch != nullptr, CONCURDL_HAVE_CUDA == 1);
    EXPECT_EQ(row.occupancy != nullptr, CONCURDL_HAVE_CUDA == 1 && !is_peer(row.name));
  }
}

TEST(KernelTables, EveryKernelHasANameAWhatALaunchAndAnOccupancyQuery) {
  check_rows(reduce_kernels());
  check_rows(memory_kernels());
  check_rows(transpose_kernels());
  check_rows(gemm_kernels());
  check_rows(gemm_mixed_kernels());
}

TEST(KernelTables, MemoryRowsHaveAReferenceAndTheirTraffic) {
  for (const MemoryKernel& k : memory_kernels()) {
    SCOPED_TRACE(std::string(k.name));
    EXPECT_NE(k.reference, nullptr);
    EXPECT_GE(k.floats_moved, 2) << "at least one read and one write an element";
  }
}

TEST(KernelTables, TransferSchedulesHaveARoundTripAndOnlyTheChunkedOnePinnedAndChunked) {
  for (const TransferSchedule& s : transfers()) {
    SCOPED_TRACE(std::string(s.name));
    EXPECT_FALSE(s.what.empty());
    EXPECT_EQ(s.round_trip != nullptr, CONCURDL_HAVE_CUDA == 1);
    if (s.chunked) {
      EXPECT_TRUE(s.pinned) << "streams overlap copies only from pinned memory";
    }
  }
}

// The tables are the experiments' variant axes, in table order.
TEST(KernelTables, TheExperimentsTakeTheirAxesFromTheTables) {
  const auto names = [](const auto& table) {
    std::vector<std::string> out;
    for (const auto& row : table) out.emplace_back(row.name);
    return out;
  };
  for (const auto& [id, want] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"ch04/reduction", names(reduce_kernels())},
           {"ch04/memory", names(memory_kernels())},
           {"ch04/transpose", names(transpose_kernels())},
           {"ch04/gemm", names(gemm_kernels())},
           {"ch04/gemm_mixed", names(gemm_mixed_kernels())},
           {"ch04/streams", names(transfers())}}) {
    SCOPED_TRACE(id);
    const concurdl::Experiment* e = concurdl::find_experiment(id);
    ASSERT_NE(e, nullptr);
    ASSERT_FALSE(e->axes.empty());
    EXPECT_EQ(e->axes[0].name, "variant");
    EXPECT_EQ(e->axes[0].values, want);
  }
}

}  // namespace
