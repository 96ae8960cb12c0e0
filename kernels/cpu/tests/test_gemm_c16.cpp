// The epilogue that rounds C into 16 bits (GemmEpilogue::c16): for every version, and GEMM v4 on
// 16-bit operands, c16 holds the bits of the float32 product (after its bias and ReLU, if any)
// rounded by to_fp16 / to_bf16, through v4's whole, half-width and scratch edge tiles, short last
// row panels, a K longer than one cache block (the last block rounds), the transposed shortcut
// (rounded after the copy back) and k = 0, at 1-3 threads; c16's padding is never written. Bad
// uses are refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/fp16.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/threads.hpp"
#include "gemm_test_util.hpp"

namespace concurdl::kernels {
namespace {

using gemm_test::Case;
using gemm_test::make_operands;
using gemm_test::Operands;
using gemm_test::ThreadsGuard;

constexpr std::uint16_t kPad16 = 0xabcd;  // in c16's padding and unwritten places

std::uint16_t round16(Half format, float x) {
  return format == Half::fp16 ? to_fp16(x) : to_bf16(x);
}

// C (m x n, leading dimension ld) rounded, value by value; the padding kPad16.
std::vector<std::uint16_t> rounded(Half format, const std::vector<float>& c, std::size_t m,
                                   std::size_t n, std::size_t ld) {
  std::vector<std::uint16_t> h(c.size(), kPad16);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) h[i * ld + j] = round16(format, c[i * ld + j]);
  return h;
}

class GemmC16 : public ::testing::TestWithParam<GemmVersion> {};

TEST_P(GemmC16, RoundsTheProductAsTheScalarConversion) {
  ThreadsGuard guard;
  const Case cases[] = {{256, 784, 64, Trans::yes, Trans::no},  // layer 0's dW (half tile)
                        {300, 40, 64, Trans::yes, Trans::no, 1.0f, 0.0f, 5},  // a scratch edge
                        {45, 100, 700, Trans::yes, Trans::no},                // K over one block
                        {43, 784, 64, Trans::yes, Trans::no},   // one row left, a team
                        {64, 256, 784, Trans::no, Trans::yes},  // a forward, transposed
                        {37, 45, 19, Trans::yes, Trans::no, 1.0f, 0.5f, 2},  // beta reads C
                        {29, 90, 530, Trans::no, Trans::no, 0.5f, 0.25f, 1},
                        {9, 33, 0, Trans::no, Trans::no, 1.0f, 0.5f}};  // k = 0: beta C alone
  for (const Half format : {Half::fp16, Half::bf16})
    for (const Case& t : cases) {
      Operands o = make_operands(t, 7);
      std::vector<float> bias(t.n);
      for (std::size_t j = 0; j < t.n; ++j) bias[j] = 0.01f * static_cast<float>(j % 17) - 0.08f;
      for (int threads : {1, 2, 3})
        for (const bool with_bias : {false, true}) {
          set_compute_threads(threads);
          GemmEpilogue plain, fused;
          if (with_bias) plain = fused = {.bias = bias.data(), .relu = true};
          std::vector<float> want = o.c0, scratch = o.c0;
          gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
               t.beta, want.data(), o.ldc, plain);
          std::vector<std::uint16_t> got(want.size(), kPad16);
          fused.c16 = got.data();
          fused.c16_format = format;
          gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
               t.beta, scratch.data(), o.ldc, fused);
          EXPECT_EQ(got, rounded(format, want, t.m, t.n, o.ldc))
              << t.describe() << ": threads=" << threads << (with_bias ? " bias+relu" : "")
              << (format == Half::fp16 ? " fp16" : " bf16");
        }
    }
}

TEST_P(GemmC16, RefusesBadUses) {
  std::vector<float> a(4, 1.0f), c(4);
  std::vector<std::uint16_t> h(4);
  std::vector<float> p(4), v(4);
  const GemmSgd u{.params = p.data(), .velocity = v.data()};
  const auto call = [&](const GemmEpilogue& e) {
    gemm(GetParam(), Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, a.data(), 2, 0.0f, c.data(),
         2, e);
  };
  EXPECT_THROW(call({.c16 = h.data()}), std::invalid_argument);  // no format
  EXPECT_THROW(call({.c16_format = Half::fp16}), std::invalid_argument);
  EXPECT_THROW(call({.sgd = &u, .c16 = h.data(), .c16_format = Half::fp16}), std::invalid_argument);
  EXPECT_THROW(call({.c16 = reinterpret_cast<std::uint16_t*>(c.data()), .c16_format = Half::bf16}),
               std::invalid_argument);
  EXPECT_NO_THROW(call({.c16 = h.data(), .c16_format = Half::bf16}));
  EXPECT_EQ(h[0], to_bf16(2.0f));
}

INSTANTIATE_TEST_SUITE_P(All, GemmC16, ::testing::ValuesIn(gemm_versions()),
                         [](const ::testing::TestParamInfo<GemmVersion>& info) {
                           return std::string(gemm_version_name(info.param));
                         });

// Through 16-bit operands (gemm_16bit): v4's kernels that widen a 16-bit A where it lies round
// their tiles too.
TEST(GemmV4C16, SixteenBitOperandsRoundTheirProduct) {
  ThreadsGuard guard;
  const Case cases[] = {{256, 784, 64, Trans::yes, Trans::no},  // the weight gradient
                        {128, 256, 64, Trans::yes, Trans::no},  // the second layer's
                        {50, 48, 530, Trans::no, Trans::no},    // A read where it lies
                        {29, 90, 7, Trans::no, Trans::no, 1.0f, 0.0f, 2},
                        {64, 1024, 784, Trans::no, Trans::yes}};
  for (const Half format : {Half::fp16, Half::bf16})
    for (const Case& t : cases) {
      Operands o = make_operands(t, 13);
      std::vector<std::uint16_t> a16(o.a.size()), b16(o.b.size());
      for (std::size_t i = 0; i < a16.size(); ++i) a16[i] = round16(format, o.a[i]);
      for (std::size_t i = 0; i < b16.size(); ++i) b16[i] = round16(format, o.b[i]);
      for (int threads : {1, 2}) {
        set_compute_threads(threads);
        std::vector<float> want = o.c0, scratch = o.c0;
        gemm_16bit(format, t.ta, t.tb, t.m, t.n, t.k, a16.data(), o.lda, b16.data(), o.ldb, t.beta,
                   want.data(), o.ldc);
        std::vector<std::uint16_t> got(want.size(), kPad16);
        gemm_16bit(format, t.ta, t.tb, t.m, t.n, t.k, a16.data(), o.lda, b16.data(), o.ldb, t.beta,
                   scratch.data(), o.ldc, {.c16 = got.data(), .c16_format = format});
        EXPECT_EQ(got, rounded(format, want, t.m, t.n, o.ldc))
            << t.describe() << ": threads=" << threads
            << (format == Half::fp16 ? " fp16" : " bf16");
      }
    }
}

}  // namespace
}  // namespace concurdl::kernels
