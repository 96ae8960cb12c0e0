// binary16 (fp16.hpp): every half value round-trips; float32 values round to nearest even at
// the normal, subnormal, overflow and underflow edges; the scalar functions give F16C's bits on
// random floats over the whole range; the finiteness checks find one infinity or NaN anywhere.
//   kernels_tests --gtest_filter='Fp16*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/fp16.hpp"

namespace {

using namespace concurdl::kernels;

TEST(Fp16Convert, EveryHalfRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = from_fp16(static_cast<fp16>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(from_fp16(to_fp16(f)))) << h;
      continue;
    }
    ASSERT_EQ(to_fp16(f), h) << "bits " << h << " value " << f;
  }
}

TEST(Fp16Convert, RoundsToNearestEvenAtTheEdges) {
  EXPECT_EQ(to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // a tie, to the even 1.0
  EXPECT_EQ(to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // a tie, up to the even
  EXPECT_EQ(to_fp16(65504.0f), 0x7bff);                          // the largest finite
  EXPECT_EQ(to_fp16(65519.0f), 0x7bff);                          // below the tie: down
  EXPECT_EQ(to_fp16(65520.0f), 0x7c00);                          // the tie: to infinity
  EXPECT_EQ(to_fp16(1e9f), 0x7c00);
  EXPECT_EQ(to_fp16(-1e9f), 0xfc00);
  EXPECT_EQ(to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // half of it: a tie, to the even 0
  EXPECT_EQ(to_fp16(std::ldexp(1.5f, -25)), 0x0001);  // past the tie: up
  EXPECT_EQ(to_fp16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);  // up to normal
  EXPECT_EQ(to_fp16(1e-8f), 0x0000);  // a gradient FP16 cannot hold: why loss scaling
  EXPECT_EQ(to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(from_fp16(to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  std::uint32_t low_nan = 0x7f800001u;  // a payload only in the low bits stays a NaN
  float f = 0;
  std::memcpy(&f, &low_nan, sizeof f);
  EXPECT_TRUE(std::isnan(from_fp16(to_fp16(f))));
}

TEST(Fp16Convert, TheBulkConversionsGiveTheScalarBits) {
  std::vector<float> in;
  std::uint64_t state = 777;
  for (int i = 0; i < 200003; ++i) {  // not a multiple of 8: the tail too
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto bits = static_cast<std::uint32_t>(state >> 32);
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    if (std::isnan(f)) f = 1.0f;
    in.push_back(f);
  }
  std::vector<fp16> bulk(in.size());
  to_fp16(in, bulk);
  for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(bulk[i], to_fp16(in[i])) << in[i];
  std::vector<float> back(in.size());
  from_fp16(bulk, back);
  for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(back[i], from_fp16(bulk[i])) << bulk[i];
  EXPECT_THROW(to_fp16(in, std::span<fp16>(bulk).first(3)), std::invalid_argument);
  if (!have_f16c()) GTEST_SKIP() << "no F16C on this CPU: only the scalar path ran";
}

TEST(Fp16Finite, OneInfinityOrNanAnywhereIsFound) {
  std::vector<fp16> h(1001, to_fp16(1.5f));
  std::vector<std::uint16_t> b(1001, to_bf16(1.5f));
  EXPECT_TRUE(all_finite_fp16(h));
  EXPECT_TRUE(all_finite_bf16(b));
  for (const std::size_t at : {std::size_t{0}, std::size_t{517}, std::size_t{1000}}) {
    h[at] = 0x7c00;
    b[at] = 0xff80;
    EXPECT_FALSE(all_finite_fp16(h)) << at;
    EXPECT_FALSE(all_finite_bf16(b)) << at;
    h[at] = 0x7e00;  // NaN
    b[at] = 0x7fc0;
    EXPECT_FALSE(all_finite_fp16(h)) << at;
    EXPECT_FALSE(all_finite_bf16(b)) << at;
    h[at] = to_fp16(1.5f);
    b[at] = to_bf16(1.5f);
  }
  EXPECT_TRUE(all_finite_fp16({}));
}

}  // namespace
