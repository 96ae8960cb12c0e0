// Chapter 04's kernels on the GPU against their CPU references (label gpu). Without a usable
// device every test skips and says why (no driver, no device, or built without CUDA).
//   ch04_gpu_tests
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../gpu_trials.hpp"
#include "concurdl/gpu/device.hpp"
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernel_tables.hpp"
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
    CDL_CUDA_CHECK(
        cudaMemcpy(d.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

TEST_F(Gpu, EveryReductionVersionSumsLikeTheCpu) {
  for (const std::size_t n : {1ul, 255ul, 256ul, 257ul, 100'003ul, std::size_t{1} << 22}) {
    const auto x = small_integers(n, 5);
    const DeviceBuffer<float> d = to_device(x);
    DeviceBuffer<float> out(1);
    const std::size_t scratch_bytes = reduce_scratch_bytes(n);
    DeviceBuffer<char> scratch(scratch_bytes);
    for (const ReduceKernel& k : reduce_kernels()) {
      k.launch(d.get(), n, out.get(), scratch.get(), scratch_bytes, nullptr);
      CDL_CUDA_CHECK(cudaDeviceSynchronize());
      const float got = to_host(out)[0];
      EXPECT_EQ(static_cast<double>(got), sum_ref(x))
          << k.name << ", n " << n << " (small integers: exact in any order)";
    }
  }
}

TEST_F(Gpu, VectorAddAndBothCopiesEqualTheirReferences) {
  for (const std::size_t n : {1ul, 33ul, 100'001ul, (std::size_t{1} << 22) + 1}) {
    const auto a = test_values(n, 1), b = test_values(n, 2);
    const DeviceBuffer<float> da = to_device(a), db = to_device(b);
    DeviceBuffer<float> dc(n);
    std::vector<float> want(n);
    for (const MemoryKernel& k : memory_kernels()) {
      k.launch(da.get(), db.get(), dc.get(), n, nullptr);
      k.reference(a, b, want);
      EXPECT_EQ(to_host(dc), want) << k.name << ", n " << n;
    }
  }
}

TEST_F(Gpu, EveryGemmVersionGivesTheCpusProduct) {
  // Small integers: every product and sum exact, so each version must equal the CPU's.
  // Shapes like those of test_gemm_tiles.cpp's v6 and v7 on the CPU: N and K multiples of 4 (their
  // 128-bit loads) and not, partial 128 x 128 tiles, K of one and of many steps.
  for (const auto [m, n, k] : {std::array<int, 3>{1, 1, 1},
                               {33, 65, 31},
                               {64, 64, 8},
                               {130, 70, 257},
                               {256, 256, 256},
                               {200, 132, 36},
                               {384, 512, 272}}) {
    const auto a = small_integers(static_cast<std::size_t>(m) * k, 1);
    const auto b = small_integers(static_cast<std::size_t>(k) * n, 2);
    const std::vector<float> want = gemm_ref(a, b, m, n, k);
    const DeviceBuffer<float> da = to_device(a), db = to_device(b);
    DeviceBuffer<float> dc(want.size());
    for (const GemmKernel& v : gemm_kernels()) {
      CDL_CUDA_CHECK(cudaMemset(dc.get(), 0xff, want.size() * sizeof(float)));
      v.launch(da.get(), db.get(), dc.get(), m, n, k, nullptr);
      CDL_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(to_host(dc), want) << v.name << " " << m << " x " << n << " x " << k;
    }
  }
}

TEST_F(Gpu, EveryTransposeGivesTheTranspose) {
  for (const auto [rows, cols] :
       {std::array<int, 2>{1, 1}, {32, 32}, {33, 70}, {1000, 3}, {1024, 2048}}) {
    std::vector<float> in(static_cast<std::size_t>(rows) * cols);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
    std::vector<float> want(in.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) want[c * rows + r] = in[r * cols + c];
    const DeviceBuffer<float> d = to_device(in);
    DeviceBuffer<float> out(in.size());
    for (const TransposeKernel& v : transpose_kernels()) {
      CDL_CUDA_CHECK(cudaMemset(out.get(), 0xff, in.size() * sizeof(float)));
      v.launch(d.get(), out.get(), rows, cols, nullptr);
      CDL_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(to_host(out), want) << v.name << " " << rows << " x " << cols;
    }
  }
}

// FP16 and BF16 hold small integers exactly and the accumulation is FP32: exact here too. The
// shapes include partial tiles of v6's 128 x 128 x 32 and K of one and of many steps.
TEST_F(Gpu, MixedPrecisionGemmsGiveTheProductOfSmallIntegers) {
  for (const auto [m, n, k] : {std::array<int, 3>{16, 16, 16},
                               {32, 48, 64},
                               {256, 128, 512},
                               {144, 272, 48},
                               {384, 256, 1024}}) {
    const auto a = small_integers(static_cast<std::size_t>(m) * k, 3);
    const auto b = small_integers(static_cast<std::size_t>(k) * n, 4);
    const std::vector<float> want = gemm_ref(a, b, m, n, k);
    const DeviceBuffer<float> da = to_device(a), db = to_device(b);
    DeviceBuffer<char> ha(a.size() * 2), hb(b.size() * 2), ba(a.size() * 2), bb(b.size() * 2);
    to_half(da.get(), ha.get(), a.size(), nullptr);
    to_half(db.get(), hb.get(), b.size(), nullptr);
    to_bfloat16(da.get(), ba.get(), a.size(), nullptr);
    to_bfloat16(db.get(), bb.get(), b.size(), nullptr);
    DeviceBuffer<float> dc(want.size());
    for (const GemmMixedKernel& v : gemm_mixed_kernels()) {
      CDL_CUDA_CHECK(cudaMemset(dc.get(), 0xff, want.size() * sizeof(float)));
      v.launch(v.bf16 ? ba.get() : ha.get(), v.bf16 ? bb.get() : hb.get(), dc.get(), m, n, k,
               nullptr);
      CDL_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(to_host(dc), want) << v.name << " " << m << " x " << n << " x " << k;
    }
  }
  for (const GemmMixedKernel& v : gemm_mixed_kernels())
    EXPECT_THROW(v.launch(nullptr, nullptr, nullptr, 15, 16, 16, nullptr), std::invalid_argument)
        << v.name;
}

TEST_F(Gpu, EveryTransferScheduleComputesTheSameResult) {
  for (const std::size_t n : {1ul, 1000ul, (std::size_t{1} << 20) + 7}) {
    const auto x = test_values(n, 6);
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = 2.0f * x[i] + 1.0f;
    PinnedBuffer pin_in(n), pin_out(n);
    std::copy(x.begin(), x.end(), pin_in.get());
    DeviceBuffer<float> d_in(n), d_out(n);
    std::vector<float> out(n);
    for (const TransferSchedule& s : transfers())
      for (const int chunks : s.chunked ? std::vector<int>{1, 3, 4} : std::vector<int>{1}) {
        float* host_out = s.pinned ? pin_out.get() : out.data();
        std::fill(host_out, host_out + n, -1.0f);
        s.round_trip(s.pinned ? pin_in.get() : x.data(), host_out, d_in.get(), d_out.get(), n,
                     chunks);
        EXPECT_EQ(std::vector<float>(host_out, host_out + n), want)
            << s.name << ", " << chunks << " chunks, n " << n;
      }
  }
}

}  // namespace

namespace {

// What occupancy() computes from a kernel's resources is what the runtime answers, for every
// kernel of the chapter with an occupancy query (a wrong allocation unit or a forgotten reserved
// kilobyte shows here).
template <class Table>
void add_queries(const Table& table, std::vector<std::pair<std::string, KernelOccupancy>>& out) {
  for (const auto& row : table)
    if (row.occupancy != nullptr) out.emplace_back(std::string(row.name), row.occupancy());
}

TEST_F(Gpu, TheOccupancyArithmeticAgreesWithTheRuntime) {
  const SmLimits sm = device_sm_limits();
  std::vector<std::pair<std::string, KernelOccupancy>> kernels;
  add_queries(reduce_kernels(), kernels);
  add_queries(gemm_kernels(), kernels);
  add_queries(gemm_mixed_kernels(), kernels);
  add_queries(transpose_kernels(), kernels);
  add_queries(memory_kernels(), kernels);
  for (const auto& [name, k] : kernels) {
    const Occupancy o = occupancy(sm, k.resources);
    EXPECT_EQ(o.blocks, k.runtime_blocks)
        << name << ": " << o.describe() << " with " << k.resources.registers
        << " registers a thread and " << k.resources.shared_bytes << " bytes of shared memory";
  }
}

// The device's roofline: a copy at most its theoretical bandwidth, peaks where it is known.
TEST_F(Gpu, TheDeviceRooflineIsMeasuredAndPlausible) {
  const GpuRoofline& r = device_roofline();
  EXPECT_GT(r.copy_bytes_per_s, 0) << r.describe();
  if (r.theoretical_bytes_per_s > 0) {
    EXPECT_LE(r.copy_bytes_per_s, 1.05 * r.theoretical_bytes_per_s) << r.describe();
  }
  EXPECT_GT(r.sms, 0);
  EXPECT_GT(r.l2_bytes, 0);
  if (fp32_lanes_per_sm(r.major, r.minor) > 0) {
    EXPECT_GT(r.fp32_flops_per_s, 1e12) << r.describe();
  }
}

}  // namespace
