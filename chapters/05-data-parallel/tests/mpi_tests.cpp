// The communicator across processes: the checks of collective_checks.hpp on the mpi backend
// (every all-reduce of the table, the ring's pieces, the trees, the native collectives, 1000
// collectives back to back), all-to-all (all_to_all_checks.hpp), point to point, and the nccl
// backend where a GPU is. Every rank runs every test; a check counts wrong elements and never
// returns early, so one rank's failure cannot leave the others waiting. The exit status is the same
// on every rank.
//   mpirun --allow-run-as-root --oversubscribe -np 4 build/bin/ch05_mpi_tests
// (ctest runs it at 2 and 4 ranks: ch05.mpi.np2, ch05.mpi.np4; the NCCL tests: ch05.nccl.np1.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "all_to_all_checks.hpp"
#include "collective_checks.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/mpi_backend.hpp"
#include "concurdl/dp/nccl_backend.hpp"

namespace {

using namespace concurdl::dp;
using namespace concurdl::dp::testing;

// The communicator every test uses, over MPI_COMM_WORLD.
Communicator& world() {
  static MpiCommunicator comm(MPI_COMM_WORLD);
  return comm;
}

class MpiAllReduce : public ::testing::TestWithParam<const AllReduceVariant*> {};

TEST_P(MpiAllReduce, EqualsTheSerialSum) {
  const AllReduceVariant* row = GetParam();
  for (std::size_t count : kSizes)
    for (bool in_place : {true, false}) {
      SCOPED_TRACE(std::to_string(count) + " floats, " + (in_place ? "in place" : "out of place"));
      EXPECT_EQ(wrong_all_reduce(world(), row->run, count, in_place), 0u);
    }
}

std::vector<const AllReduceVariant*> all_rows() {
  std::vector<const AllReduceVariant*> rows;
  for (const AllReduceVariant& r : kAllReduceVariants) rows.push_back(&r);
  return rows;
}
INSTANTIATE_TEST_SUITE_P(Table, MpiAllReduce, ::testing::ValuesIn(all_rows()),
                         [](const auto& info) { return std::string(info.param->name); });

TEST(MpiCollectives, RingPiecesAndSegments) {
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(std::to_string(count) + " floats");
    EXPECT_EQ(wrong_reduce_scatter_ring(world(), count), 0u);
    EXPECT_EQ(wrong_all_gather_ring(world(), count), 0u);
  }
  for (std::size_t seg : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    AlgoOptions opts;
    opts.segment_floats = seg;
    EXPECT_EQ(wrong_all_reduce(world(), &allreduce_ring, 1000, false, opts), 0u) << seg;
  }
}

TEST(MpiCollectives, TreesFromEveryRoot) {
  for (int root = 0; root < world().size(); ++root) {
    EXPECT_EQ(wrong_broadcast_tree(world(), 1000, root), 0u) << "root " << root;
    EXPECT_EQ(wrong_reduce_tree(world(), 1000, root), 0u) << "root " << root;
  }
}

TEST(MpiCollectives, Native) {
  const int n = world().size();
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(std::to_string(count) + " floats");
    EXPECT_EQ(wrong_native_broadcast(world(), count, n - 1), 0u);
    EXPECT_EQ(wrong_native_reduce_scatter(world(), count / static_cast<std::size_t>(n)), 0u);
    EXPECT_EQ(wrong_native_all_gather(world(), count / static_cast<std::size_t>(n)), 0u);
  }
}

TEST(MpiCollectives, ThousandBackToBack) { EXPECT_EQ(wrong_back_to_back(world(), 1000), 0u); }

// All-to-all across processes: every row (MPI_Alltoallv as native), equal and variable blocks.
TEST(MpiCollectives, AllToAllEveryRowAndVariableBlocks) {
  for (const AllToAllVariant& row : kAllToAllRows)
    for (std::size_t block : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}})
      EXPECT_EQ(wrong_all_to_all(world(), row.run, block), 0u) << row.name << ", block " << block;
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(wrong_all_to_all_v(world(), true, round), 0u) << "MPI_Alltoallv, round " << round;
    EXPECT_EQ(wrong_all_to_all_v(world(), false, round), 0u) << "pairwise, round " << round;
  }
}

// The communicator of a harness configuration (ranks::Group, as `concurdl run --ranks` runs
// one) works as MPI_COMM_WORLD's does.
TEST(MpiCollectives, OnTheHarnessConfigurationComm) {
  concurdl::ranks::Group group(concurdl::ranks::world_size());
  ASSERT_TRUE(group.participating());
  MpiCommunicator comm(concurdl::ranks::comm());
  EXPECT_EQ(comm.size(), concurdl::ranks::world_size());
  EXPECT_EQ(wrong_all_reduce(comm, &allreduce_ring, 1000, true), 0u);
}

TEST(MpiCollectives, SplitGroupsMembersOrderAndIndependentTraffic) {
  EXPECT_EQ(wrong_split(world()), 0u);
}

TEST(MpiCollectives, HierarchicalAllReduceOverEveryHostCut) {
  EXPECT_EQ(wrong_hierarchical(world()), 0u);
}

TEST(MpiP2p, RingOfSendRecvAndAnySource) {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<float> out = input(r, 100), in(100, kPoison);
  c.sendrecv((r + 1) % n, out, (r - 1 + n) % n, in, 4);
  EXPECT_EQ(in, input((r - 1 + n) % n, 100));
  // Everyone sends its rank to 0, which takes them in whatever order they come.
  if (r != 0) {
    const float v = static_cast<float>(r);
    c.send(0, {&v, 1}, 5);
  } else {
    std::set<int> seen;
    for (int i = 1; i < n; ++i) {
      float v = -1;
      Request req = c.irecv(kAnySource, {&v, 1}, 5);
      req.wait();
      EXPECT_EQ(v, static_cast<float>(req.source()));
      seen.insert(req.source());
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(n - 1));
  }
  c.barrier();
}

// A message longer or shorter than its receive is an error on both backends. MPI reports a
// longer one itself (truncation); a shorter one the backend checks.
TEST(MpiP2p, ShortMessageIsAnError) {
  Communicator& c = world();
  if (c.rank() == 0) {
    c.send(1, std::vector<float>(3), 6);
  } else if (c.rank() == 1) {
    std::vector<float> got(4);
    EXPECT_THROW(c.recv(0, got, 6), std::length_error);
  }
  c.barrier();
}

#if CONCURDL_HAVE_NCCL

// Device buffers in and out of a std::vector.
struct DeviceFloats {
  float* p = nullptr;
  std::size_t n = 0;
  explicit DeviceFloats(const std::vector<float>& host) : n(host.size()) {
    CDL_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(1, n) * sizeof(float)));
    if (n) CDL_CUDA_CHECK(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceFloats() { cudaFree(p); }
  std::vector<float> host() const {
    std::vector<float> v(n);
    if (n) CDL_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }
  std::span<float> span() { return {p, n}; }
};

// Skips on every rank alike when any rank has no GPU.
bool gpu_everywhere(std::string& why) {
  why = nccl_unavailable();
  int mine = why.empty() ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (why.empty() && !all) why = "another rank has no CUDA device";
  return all != 0;
}

TEST(NcclBackend, NativeCollectivesEqualTheSerialSum) {
  std::string why;
  if (!gpu_everywhere(why)) GTEST_SKIP() << why;
  NcclCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size(), r = comm.rank();
  EXPECT_EQ(comm.memory(), MemorySpace::device);
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(std::to_string(count) + " floats");
    for (bool in_place : {true, false}) {
      DeviceFloats in(input(r, count));
      DeviceFloats out(std::vector<float>(count, kPoison));
      if (in_place)
        comm.all_reduce(in.span());
      else
        comm.all_reduce(in.span(), out.span());
      const std::vector<float> got = in_place ? in.host() : out.host();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i) wrong += got[i] != sum_over_ranks(n, i);
      EXPECT_EQ(wrong, 0u) << (in_place ? "in place" : "out of place");
    }
    DeviceFloats b(r == 0 ? input(0, count) : std::vector<float>(count, kPoison));
    comm.broadcast(b.span(), 0);
    EXPECT_EQ(b.host(), input(0, count));
    const std::size_t c = count / static_cast<std::size_t>(n);
    DeviceFloats rs_in(input(r, c * static_cast<std::size_t>(n)));
    DeviceFloats rs_out(std::vector<float>(c, kPoison));
    comm.reduce_scatter(rs_in.span(), rs_out.span());
    const std::vector<float> rs = rs_out.host();
    for (std::size_t i = 0; i < c; ++i)
      EXPECT_EQ(rs[i], sum_over_ranks(n, static_cast<std::size_t>(r) * c + i));
    DeviceFloats ag_in(input(r, c));
    DeviceFloats ag_out(std::vector<float>(c * static_cast<std::size_t>(n), kPoison));
    comm.all_gather(ag_in.span(), ag_out.span());
    const std::vector<float> ag = ag_out.host();
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < c; ++i)
        EXPECT_EQ(ag[static_cast<std::size_t>(q) * c + i], value(q, i));
  }
  // The hand-written ones need host memory, and say so.
  DeviceFloats d(input(r, 8));
  EXPECT_THROW(allreduce_ring(comm, d.span(), d.span(), {}), std::invalid_argument);
}

TEST(NcclBackend, SendRecvRing) {
  std::string why;
  if (!gpu_everywhere(why)) GTEST_SKIP() << why;
  NcclCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size(), r = comm.rank();
  DeviceFloats out(input(r, 1000));
  DeviceFloats in(std::vector<float>(1000, kPoison));
  comm.sendrecv((r + 1) % n, out.span(), (r - 1 + n) % n, in.span(), 0);
  EXPECT_EQ(in.host(), input((r - 1 + n) % n, 1000));
}

#endif  // CONCURDL_HAVE_NCCL

// Output from rank 0 only, except failures, which every rank prints with its rank.
class RankFailures : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailures(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  concurdl::ranks::init();
  const int rank = concurdl::ranks::world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailures(rank));
  }
  const int mine = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  world().barrier();
  return worst;
}
