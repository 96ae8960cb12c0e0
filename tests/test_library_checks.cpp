// CDL_CUDA_CHECK, CDL_NCCL_CHECK and CDL_MPI_CHECK against the real libraries: each failing call
// throws a LibraryError naming the call, the file and line, and the library's message. The CUDA
// events timer times device work where there is a device and says why not where there is none.
#include <gtest/gtest.h>

#include <string>

#include "concurdl/core/errors.hpp"

#if CONCURDL_HAVE_CUDA
#include <cuda_runtime.h>

#include "concurdl/harness/cuda_timer.hpp"
#endif
#if CONCURDL_HAVE_NCCL
#include <nccl.h>
#endif
#if CONCURDL_HAVE_MPI
#include "concurdl/core/ranks_mpi.hpp"
#endif

using concurdl::LibraryError;

namespace {

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const LibraryError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(LibraryChecks, MessageNamesTheCallFileLineAndLibrary) {
  const std::string m = message_of([] {
    concurdl::detail::throw_library_error("CUDA", "cudaMalloc(&p, n)", "k.cu", 42, 2,
                                          "out of memory");
  });
  EXPECT_EQ(m, "k.cu:42: cudaMalloc(&p, n) failed: out of memory (CUDA error 2)");
}

#if CONCURDL_HAVE_CUDA
TEST(LibraryChecks, CudaCallThatFailsThrowsWithTheRuntimesMessage) {
  std::string why;
  if (concurdl::cuda_device_available(&why)) {
    // On a GPU machine: a bad device ordinal fails the same way everywhere.
    const std::string m = message_of([] { CDL_CUDA_CHECK(cudaSetDevice(1 << 20)); });
    EXPECT_NE(m.find("cudaSetDevice(1 << 20) failed"), std::string::npos) << m;
    EXPECT_NE(m.find("test_library_checks.cpp:"), std::string::npos) << m;
    return;
  }
  // No GPU here: the runtime's own error (35 without a driver) comes back by name.
  EXPECT_NE(why.find("no CUDA device"), std::string::npos) << why;
  int n = 0;
  const std::string m = message_of([&] { CDL_CUDA_CHECK(cudaGetDeviceCount(&n)); });
  EXPECT_NE(m.find("cudaGetDeviceCount(&n) failed"), std::string::npos) << m;
  EXPECT_NE(m.find("(CUDA error "), std::string::npos) << m;
}

TEST(CudaTimer, TimesDeviceWorkOrSaysWhyNot) {
  std::string why;
  if (!concurdl::cuda_device_available(&why)) {
    EXPECT_THROW(concurdl::cuda_event_timer(), LibraryError);
    GTEST_SKIP() << why;
  }
  auto timer = concurdl::cuda_event_timer();
  EXPECT_EQ(timer->name(), "cuda_events");
  void* p = nullptr;
  CDL_CUDA_CHECK(cudaMalloc(&p, 64 << 20));
  const double t = timer->time([&] { CDL_CUDA_CHECK(cudaMemsetAsync(p, 1, 64 << 20)); });
  CDL_CUDA_CHECK(cudaFree(p));
  EXPECT_GT(t, 0);
  EXPECT_LT(t, 1.0);
}
#endif

#if CONCURDL_HAVE_NCCL
TEST(LibraryChecks, NcclCallThatFailsThrowsWithNcclsMessage) {
  int version = 0;
  CDL_NCCL_CHECK(ncclGetVersion(&version));  // works without a GPU
  EXPECT_GT(version, 0);
  ncclComm_t comm = nullptr;
  int dev = 1 << 20;  // no such device anywhere
  const std::string m = message_of([&] { CDL_NCCL_CHECK(ncclCommInitAll(&comm, 1, &dev)); });
  EXPECT_NE(m.find("ncclCommInitAll(&comm, 1, &dev) failed"), std::string::npos) << m;
  EXPECT_NE(m.find("(NCCL error "), std::string::npos) << m;
}
#endif

#if CONCURDL_HAVE_MPI
TEST(LibraryChecks, MpiCallThatFailsThrowsWithMpisMessage) {
  // A singleton MPI process (no mpirun): one rank, errors returned rather than fatal.
  concurdl::ranks::init();
  int x = 0;
  const std::string m =
      message_of([&] { CDL_MPI_CHECK(MPI_Send(&x, 1, MPI_INT, 7, 0, MPI_COMM_WORLD)); });
  EXPECT_NE(m.find("MPI_Send(&x, 1, MPI_INT, 7, 0, MPI_COMM_WORLD) failed"), std::string::npos)
      << m;
  EXPECT_NE(m.find("(MPI error "), std::string::npos) << m;
}
#endif
