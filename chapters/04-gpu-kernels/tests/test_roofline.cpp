// Occupancy and the GPU's peaks as arithmetic (roofline.hpp), on the CPU: the cases of the CUDA
// occupancy calculator (each resource the limit in turn), blocks that cannot run at all, and
// the peaks of devices whose data sheets are known. ch04_gpu_tests holds the occupancy to what
// the runtime says for every kernel of the chapter.
//   ch04_tests --gtest_filter='Occupancy*:GpuPeaks*'
#include <gtest/gtest.h>

#include <stdexcept>

#include "concurdl/gpu/roofline.hpp"

namespace {

using namespace concurdl::gpu;

Occupancy on_a100(int threads, int registers, int shared) {
  return occupancy(sm_limits(8, 0), {threads, registers, shared});
}

TEST(Occupancy, ThreadsLimitAFullSm) {
  const Occupancy o = on_a100(256, 32, 0);
  EXPECT_EQ(o.blocks, 8);
  EXPECT_EQ(o.warps, 64);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  EXPECT_EQ(o.limited_by, "threads");
  EXPECT_EQ(o.describe(), "100% (8 blocks of 256 threads: 64 of 64 warps; limited by threads)");
}

TEST(Occupancy, RegistersAreGivenToWarpsInUnits) {
  // 64 registers x 32 lanes = 2048 a warp: 32 warps of 65536 registers, 4 blocks of 8 warps.
  const Occupancy o = on_a100(256, 64, 0);
  EXPECT_EQ(o.blocks, 4);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.limited_by, "registers");
  // 255 registers round up to 8192 a warp: 8 warps, one block of 8.
  EXPECT_EQ(on_a100(256, 255, 0).blocks, 1);
  // 33 registers: 1056 a warp, rounded to 1280: 51 warps, 6 blocks of 8 (not 7).
  EXPECT_EQ(on_a100(256, 33, 0).blocks, 6);
  // sm_86 holds 48 warps: 64 registers still allow 32 warps, 4 blocks, 2/3 of the SM.
  const Occupancy ga102 = occupancy(sm_limits(8, 6), {256, 64, 0});
  EXPECT_EQ(ga102.blocks, 4);
  EXPECT_NEAR(ga102.fraction, 2.0 / 3.0, 1e-12);
}

TEST(Occupancy, SharedMemoryCountsTheRuntimesReservedKilobyte) {
  // 48 KB + the 1 KB reserved per block since sm_80: 3 blocks of 4 warps in 164 KB.
  const Occupancy o = on_a100(128, 32, 48 * 1024);
  EXPECT_EQ(o.blocks, 3);
  EXPECT_EQ(o.limited_by, "shared memory");
  EXPECT_DOUBLE_EQ(o.fraction, 12.0 / 64.0);
  // The GEMM's 32 x 32 tiles (8 KB) at 1024 threads: threads allow 2 blocks, shared memory 18.
  EXPECT_EQ(on_a100(1024, 32, 8192).limited_by, "threads");
  EXPECT_EQ(on_a100(1024, 32, 8192).blocks, 2);
}

TEST(Occupancy, OneWarpBlocksMeetTheBlockLimit) {
  // WMMA's one warp a block: 32 blocks are the most an SM holds, half its warps.
  const Occupancy o = on_a100(32, 40, 0);
  EXPECT_EQ(o.blocks, 32);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.limited_by, "blocks");
  // sm_75 holds 16 blocks and 32 warps.
  EXPECT_DOUBLE_EQ(occupancy(sm_limits(7, 5), {32, 40, 0}).fraction, 0.5);
  EXPECT_DOUBLE_EQ(occupancy(sm_limits(7, 5), {1024, 32, 0}).fraction, 1.0);
}

TEST(Occupancy, ABlockThatCannotRunIsAnError) {
  EXPECT_THROW(on_a100(4096, 32, 0), std::invalid_argument);          // more threads than an SM
  EXPECT_THROW(on_a100(0, 32, 0), std::invalid_argument);             // no threads
  EXPECT_THROW(on_a100(1024, 255, 0), std::invalid_argument);         // 262144 registers
  EXPECT_THROW(on_a100(256, 32, 200 * 1024), std::invalid_argument);  // 200 KB of shared
  EXPECT_THROW(sm_limits(6, 1), std::invalid_argument);               // no table row
}

TEST(GpuPeaks, TheDataSheetsFollowFromSmsLanesAndClock) {
  // V100 SXM2: 80 SMs at 1.53 GHz, 15.7 TFLOP/s FP32, 125 FP16 tensor.
  const GpuRoofline v100 = make_roofline("V100", 7, 0, 80, 1.53e9, 6e6, 900e9, 800e9);
  EXPECT_NEAR(v100.fp32_flops_per_s / 1e12, 15.7, 0.05);
  EXPECT_NEAR(v100.tensor_flops_per_s / 1e12, 125.3, 0.1);
  // A100 SXM4: 108 SMs at 1.41 GHz, 19.5 and 312.
  const GpuRoofline a100 = make_roofline("A100", 8, 0, 108, 1.41e9, 40e6, 1555e9, 1300e9);
  EXPECT_NEAR(a100.fp32_flops_per_s / 1e12, 19.5, 0.05);
  EXPECT_NEAR(a100.tensor_flops_per_s / 1e12, 311.9, 0.1);
  // H100 SXM5 at 1.83 GHz, the clock NVIDIA's dense FP16 tensor figure (989.4) implies: 61.8
  // and 989. (Its sheet's FP32 figure, 66.9, is at the 1.98 GHz boost clock: one clock gives
  // one of the two, and a measured clock, as the calibration reads it, decides.)
  const GpuRoofline h100 = make_roofline("H100", 9, 0, 132, 1.83e9, 50e6, 3350e9, 3000e9);
  EXPECT_NEAR(h100.fp32_flops_per_s / 1e12, 61.8, 0.1);
  EXPECT_NEAR(h100.tensor_flops_per_s / 1e12, 989.5, 0.5);
  EXPECT_EQ(h100.describe(),
            "H100 (sm_90, 132 SMs at 1.83 GHz): copy 3 TB/s measured (theoretical 3.35 TB/s), "
            "FP32 61.8 TFLOP/s, FP16 tensor 989 TFLOP/s");
  // An architecture with no row: no peak is made up.
  const GpuRoofline p100 = make_roofline("P100", 6, 0, 56, 1.48e9, 4e6, 732e9, 500e9);
  EXPECT_EQ(p100.fp32_flops_per_s, 0);
  EXPECT_EQ(p100.tensor_flops_per_s, 0);
  EXPECT_NE(p100.describe().find("FP32 peak unknown"), std::string::npos);
}

}  // namespace
