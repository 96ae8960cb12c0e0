// Chapter 04's kernels on the GPU against their CPU references (label gpu). Without a usable
// device every test skips and says why (no driver, no device, or built without CUDA).
//   ch04_gpu_tests
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "concurdl/gpu/device.hpp"
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernels.hpp"
#include "concurdl/gpu/reference.hpp"

namespace {

using namespace concurdl::gpu;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = gpu_unavailable(); !why.empty()) GTEST_SKIP() << why;
  }
};

DeviceBuffer<float> to_device(const std::vector<float>& host) {
  DeviceBuffer<float> d(host.size());
  if (!host.empty())
    CDL_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
  return d;
}

std::vector<float> to_host(const DeviceBuffer<float>& d) {
  std::vector<float> host(d.size());
  if (!host.empty())
    CDL_CUDA_CHECK(cudaMemcpy(host.data(), d.get(), host.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
  return host;
}

TEST_F(Gpu, EveryReductionVersionSumsLikeTheCpu) {
  for (const std::size_t n : {1ul, 255ul, 256ul, 257ul, 100'003ul, std::size_t{1} << 22}) {
    const auto x = small_integers(n, 5);
    const DeviceBuffer<float> d = to_device(x);
    DeviceBuffer<float> out(1);
    const std::size_t scratch_bytes = reduce_scratch_bytes(n);
    DeviceBuffer<char> scratch(scratch_bytes);
    for (int v = 0; v <= static_cast<int>(Reduce::cub); ++v) {
      const auto version = static_cast<Reduce>(v);
      reduce_sum(version, d.get(), n, out.get(), scratch.get(), scratch_bytes, nullptr);
      CDL_CUDA_CHECK(cudaDeviceSynchronize());
      const float got = to_host(out)[0];
      EXPECT_EQ(static_cast<double>(got), sum_ref(x))
          << reduce_name(version) << ", n " << n << " (small integers: exact in any order)";
    }
  }
}

TEST_F(Gpu, VectorAddAndBothCopiesEqualTheirReferences) {
  for (const std::size_t n : {1ul, 33ul, 100'001ul, (std::size_t{1} << 22) + 1}) {
    const auto a = test_values(n, 1), b = test_values(n, 2);
    const DeviceBuffer<float> da = to_device(a), db = to_device(b);
    DeviceBuffer<float> dc(n);
    std::vector<float> want(n);
    vector_add(da.get(), db.get(), dc.get(), n, nullptr);
    vector_add_ref(a, b, want);
    EXPECT_EQ(to_host(dc), want) << "vector_add, n " << n;
    copy_coalesced(da.get(), dc.get(), n, nullptr);
    EXPECT_EQ(to_host(dc), a) << "copy_coalesced, n " << n;
    copy_strided(da.get(), dc.get(), n, 32, nullptr);
    copy_strided_ref(a, want, 32);
    EXPECT_EQ(to_host(dc), want) << "copy_strided, n " << n;
  }
}

}  // namespace
