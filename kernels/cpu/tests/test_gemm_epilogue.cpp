// GEMM epilogues: the fused element-wise finish (bias, ReLU, ReLU') and the fused optimiser
// step (GemmSgd: plain, and a mixed-precision step's unscaling and 16-bit rounding of the
// parameters) give the bits of the product followed by the separate passes, for every version;
// and GEMM v4 on 16-bit operands (gemm_16bit) gives the bits of its widened copies.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
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
using gemm_test::kNaN;
using gemm_test::kSentinel;
using gemm_test::make_operands;
using gemm_test::Operands;
using gemm_test::ThreadsGuard;

class GemmEpilogues : public ::testing::TestWithParam<GemmVersion> {};

// The fused epilogue (bias, ReLU, a ReLU's gradient) gives the bits of the product followed by
// ops.hpp's passes, for every version, through v4's transposed and direct shortcuts and its
// packed path, at 1-3 threads; only C's own columns are touched (the padding keeps its
// sentinel).
TEST_P(GemmEpilogues, TheEpilogueGivesTheBitsOfTheSeparatePasses) {
  ThreadsGuard guard;
  const Case cases[] = {{64, 256, 784, Trans::no, Trans::yes},   // a layer's forward, transposed
                        {64, 10, 128, Trans::no, Trans::yes},    // the last layer's
                        {128, 10, 2048, Trans::no, Trans::yes},  // narrow, with a team
                        {64, 256, 128, Trans::no, Trans::no, 1.0f, 0.0f, 3},  // a dA, padded
                        {37, 45, 19, Trans::yes, Trans::no, 1.0f, 0.5f}};     // beta reads C
  for (const Case& t : cases) {
    Operands o = make_operands(t, 3);
    if (t.beta == 0.0f)  // C is written, never read: NaN there would only hide a bad read
      for (std::size_t i = 0; i < t.m; ++i) std::fill_n(o.c0.data() + i * o.ldc, t.n, 0.0f);
    std::vector<float> bias(t.n), act(t.m * o.ldc, kNaN);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : bias) x = dist(rng);
    for (std::size_t i = 0; i < t.m; ++i)
      for (std::size_t j = 0; j < t.n; ++j) act[i * o.ldc + j] = dist(rng);
    for (int threads : {1, 2, 3}) {
      set_compute_threads(threads);
      for (int kind = 0; kind < 3; ++kind) {  // bias + ReLU, ReLU', bias alone (the last layer)
        std::vector<float> want = o.c0, got = o.c0;
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
             t.beta, want.data(), o.ldc);
        for (std::size_t i = 0; i < t.m; ++i) {
          float* row = want.data() + i * o.ldc;
          if (kind != 1) {
            add_bias_rows(row, 1, t.n, o.ldc, bias.data());
            if (kind == 0) relu_forward(row, row, t.n);
          } else {
            relu_backward(act.data() + i * o.ldc, row, t.n);
          }
        }
        const GemmEpilogue e = kind == 1 ? GemmEpilogue{.relu_of = act.data(), .ld_relu_of = o.ldc}
                                         : GemmEpilogue{.bias = bias.data(), .relu = kind == 0};
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
             t.beta, got.data(), o.ldc, e);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << t.describe() << ": threads=" << threads << " epilogue " << kind;
      }
    }
  }
  std::vector<float> c(4);
  const std::vector<float> a(4, 1.0f), act(4, 1.0f);
  EXPECT_THROW(gemm(GetParam(), Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, a.data(), 2, 0.0f,
                    c.data(), 2, {.relu_of = act.data(), .ld_relu_of = 1}),
               std::invalid_argument);
}

// The fused optimiser step (GemmSgd) gives the parameters and velocities of the product stored
// in C followed by sgd_update over it, bit for bit, for every version: through v4's whole tiles,
// its half-width and scratch edge tiles and short last row panels, a K longer than one cache
// block (the last block applies the step, the earlier ones leave partial sums in C), a last
// panel of one row (R = 1 with AVX-512 and AVX2 alike), and the transposed shortcut (the update
// then follows the copy back), at 1-3 threads (the team from 2M multiply-adds: the first, the
// 43 x 784 and the transposed case). C's padding is never written; the parameters' padding is
// never touched. Bad uses are refused.
TEST_P(GemmEpilogues, TheFusedSgdStepGivesTheBitsOfTheProductThenTheUpdate) {
  ThreadsGuard guard;
  const Case cases[] = {{256, 784, 64, Trans::yes, Trans::no},  // layer 0's dW (half tile)
                        {300, 40, 64, Trans::yes, Trans::no, 1.0f, 0.0f, 5},  // a scratch edge
                        {45, 100, 700, Trans::yes, Trans::no},                // K over one block
                        {10, 48, 64, Trans::yes, Trans::no},     // 10 rows, a half panel
                        {43, 784, 64, Trans::yes, Trans::no},    // one row left, a team
                        {43, 40, 64, Trans::yes, Trans::no},     // and an edge
                        {64, 256, 784, Trans::no, Trans::yes}};  // the transposed path
  const float lr = 0.05f, momentum = 0.9f, weight_decay = 5e-4f;
  for (const Case& t : cases) {
    Operands o = make_operands(t, 7);
    std::vector<float> p0(t.m * o.ldc, kSentinel), v0(t.m * o.ldc, kSentinel);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::size_t i = 0; i < t.m; ++i)
      for (std::size_t j = 0; j < t.n; ++j) {
        p0[i * o.ldc + j] = dist(rng);
        v0[i * o.ldc + j] = dist(rng);
      }
    for (int threads : {1, 2, 3}) {
      set_compute_threads(threads);
      std::vector<float> grad = o.c0, want_p = p0, want_v = v0;
      gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f,
           grad.data(), o.ldc);
      for (std::size_t i = 0; i < t.m; ++i)
        for (std::size_t j = 0; j < t.n; ++j) {
          const std::size_t at = i * o.ldc + j;
          sgd_update(want_p[at], want_v[at], grad[at], lr, momentum, weight_decay);
        }
      std::vector<float> c = o.c0, got_p = p0, got_v = v0;
      const GemmSgd u{.params = got_p.data(),
                      .velocity = got_v.data(),
                      .lr = lr,
                      .momentum = momentum,
                      .weight_decay = weight_decay};
      gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f,
           c.data(), o.ldc, {.sgd = &u});
      EXPECT_EQ(std::memcmp(got_p.data(), want_p.data(), want_p.size() * sizeof(float)), 0)
          << t.describe() << ": threads=" << threads << ": parameters";
      EXPECT_EQ(std::memcmp(got_v.data(), want_v.data(), want_v.size() * sizeof(float)), 0)
          << t.describe() << ": threads=" << threads << ": velocities";
      for (std::size_t i = 0; i < t.m; ++i)
        for (std::size_t j = t.n; j < o.ldc; ++j)
          if (c[i * o.ldc + j] != kSentinel) {
            ADD_FAILURE() << t.describe() << ": wrote C's padding at (" << i << ", " << j << ")";
            i = t.m;
            break;
          }
    }
  }
  std::vector<float> c(4), p(4), v(4);
  const std::vector<float> a(4, 1.0f);
  const GemmSgd u{.params = p.data(), .velocity = v.data(), .lr = lr};
  const auto call = [&](float alpha, float beta, const GemmEpilogue& e) {
    gemm(GetParam(), Trans::no, Trans::no, 2, 2, 2, alpha, a.data(), 2, a.data(), 2, beta, c.data(),
         2, e);
  };
  EXPECT_NO_THROW(call(1.0f, 0.0f, {.sgd = &u}));
  EXPECT_THROW(call(0.5f, 0.0f, {.sgd = &u}), std::invalid_argument);
  EXPECT_THROW(call(1.0f, 1.0f, {.sgd = &u}), std::invalid_argument);
  EXPECT_THROW(call(1.0f, 0.0f, {.bias = a.data(), .sgd = &u}), std::invalid_argument);
  const GemmSgd no_velocity{.params = p.data()};
  EXPECT_THROW(call(1.0f, 0.0f, {.sgd = &no_velocity}), std::invalid_argument);
  const GemmSgd params_in_c{.params = c.data(), .velocity = v.data()};
  EXPECT_THROW(call(1.0f, 0.0f, {.sgd = &params_in_c}), std::invalid_argument);
  const GemmSgd one_buffer{.params = p.data(), .velocity = p.data()};
  EXPECT_THROW(call(1.0f, 0.0f, {.sgd = &one_buffer}), std::invalid_argument);
}

// A mixed-precision step's fused update: the gradient times grad_scale (a power of two), and
// the updated parameter rounded into params16, for every version: the bits of the product
// stored in C, then sgd_update on C * grad_scale and the rounding, element by element. The
// edges as above; params16's padding is never written.
TEST_P(GemmEpilogues, TheFusedSgdStepScalesTheGradientAndRoundsTheParameters) {
  ThreadsGuard guard;
  const Case cases[] = {{256, 784, 64, Trans::yes, Trans::no},
                        {300, 40, 64, Trans::yes, Trans::no, 1.0f, 0.0f, 5},
                        {45, 100, 700, Trans::yes, Trans::no},
                        {43, 784, 64, Trans::yes, Trans::no}};
  const float lr = 0.05f, momentum = 0.9f, weight_decay = 5e-4f, scale = 1.0f / 1024;
  for (const Half format : {Half::fp16, Half::bf16})
    for (const Case& t : cases) {
      Operands o = make_operands(t, 3);
      std::vector<float> p0(t.m * o.ldc, kSentinel), v0(t.m * o.ldc, kSentinel);
      std::mt19937 rng(5);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (std::size_t i = 0; i < t.m; ++i)
        for (std::size_t j = 0; j < t.n; ++j) {
          p0[i * o.ldc + j] = dist(rng);
          v0[i * o.ldc + j] = dist(rng);
        }
      const std::uint16_t kUntouched = 0x5a5a;
      for (int threads : {1, 2}) {
        set_compute_threads(threads);
        std::vector<float> grad = o.c0, want_p = p0, want_v = v0;
        std::vector<std::uint16_t> want16(p0.size(), kUntouched);
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb,
             0.0f, grad.data(), o.ldc);
        for (std::size_t i = 0; i < t.m; ++i)
          for (std::size_t j = 0; j < t.n; ++j) {
            const std::size_t at = i * o.ldc + j;
            sgd_update_scaled(want_p[at], want_v[at], grad[at], scale, lr, momentum, weight_decay);
            want16[at] = format == Half::fp16 ? to_fp16(want_p[at]) : to_bf16(want_p[at]);
          }
        std::vector<float> c = o.c0, got_p = p0, got_v = v0;
        std::vector<std::uint16_t> got16(p0.size(), kUntouched);
        const GemmSgd u{.params = got_p.data(),
                        .velocity = got_v.data(),
                        .lr = lr,
                        .momentum = momentum,
                        .weight_decay = weight_decay,
                        .grad_scale = scale,
                        .params16 = got16.data(),
                        .params16_format = format};
        gemm(GetParam(), t.ta, t.tb, t.m, t.n, t.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb,
             0.0f, c.data(), o.ldc, {.sgd = &u});
        const std::string what = t.describe() + ": threads=" + std::to_string(threads) +
                                 (format == Half::fp16 ? " fp16" : " bf16");
        EXPECT_EQ(std::memcmp(got_p.data(), want_p.data(), want_p.size() * sizeof(float)), 0)
            << what << ": parameters";
        EXPECT_EQ(std::memcmp(got_v.data(), want_v.data(), want_v.size() * sizeof(float)), 0)
            << what << ": velocities";
        EXPECT_EQ(got16, want16) << what << ": the 16-bit parameters";
      }
    }
  std::vector<float> c(4), p(4), v(4);
  std::vector<std::uint16_t> p16(4);
  const std::vector<float> a(4, 1.0f);
  const auto call = [&](const GemmSgd& u) {
    gemm(GetParam(), Trans::no, Trans::no, 2, 2, 2, 1.0f, a.data(), 2, a.data(), 2, 0.0f, c.data(),
         2, {.sgd = &u});
  };
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .grad_scale = 0.0f}),
               std::invalid_argument);
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .grad_scale = kNaN}),
               std::invalid_argument);
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .params16 = p16.data()}),
               std::invalid_argument);
  EXPECT_THROW(call({.params = p.data(), .velocity = v.data(), .params16_format = Half::bf16}),
               std::invalid_argument);
}

// GEMM v4 on 16-bit operands widened while they are packed, or (A read where it lies) while the
// kernel reads them, gives the bits of widening both into float32 buffers and calling v4: every
// transpose, the training step's shapes (the transposed shortcut's 64 x 1024 x 784, W read in
// place; the 1024-float rows that alias in L1, packed for float32 and read in place here),
// edges, a K over one block, a leading dimension with padding, a fused update, at 1 and 2
// threads; Half::none and another version are refused.
TEST(GemmV4, SixteenBitOperandsGiveTheBitsOfTheirWidenedCopies) {
  ThreadsGuard guard;
  const Case cases[] = {{64, 1024, 784, Trans::no, Trans::yes},   // forward, transposed shortcut
                        {64, 1024, 1024, Trans::no, Trans::yes},  // forward, aliasing rows
                        {1024, 784, 64, Trans::yes, Trans::no},   // weight gradient
                        {64, 784, 1024, Trans::no, Trans::no},    // input gradient
                        {64, 10, 1024, Trans::no, Trans::yes},    // the 10 classes
                        {37, 45, 600, Trans::yes, Trans::yes, 1.0f, 0.0f, 3},
                        {13, 7, 5, Trans::no, Trans::no, 1.0f, 0.5f, 1},
                        // A read where it lies, widened by the kernel: a whole tile and a half,
                        // rows past the last whole panel, a K block and a tail of 18 values;
                        // then an edge tile of 26 columns and a K shorter than a vector
                        {50, 48, 530, Trans::no, Trans::no},
                        {29, 90, 7, Trans::no, Trans::no, 1.0f, 0.0f, 2}};
  for (const Half format : {Half::fp16, Half::bf16})
    for (const Case& t : cases) {
      Operands o = make_operands(t, 11);
      // The operands rounded to 16 bits (padding included: NaN stays NaN), and widened back.
      const auto narrow = [&](const std::vector<float>& x) {
        std::vector<std::uint16_t> h(x.size());
        for (std::size_t i = 0; i < x.size(); ++i)
          h[i] = format == Half::fp16 ? to_fp16(x[i]) : to_bf16(x[i]);
        return h;
      };
      const auto widen = [&](const std::vector<std::uint16_t>& h) {
        std::vector<float> x(h.size());
        for (std::size_t i = 0; i < h.size(); ++i)
          x[i] = format == Half::fp16 ? from_fp16(h[i]) : from_bf16(h[i]);
        return x;
      };
      const std::vector<std::uint16_t> a16 = narrow(o.a), b16 = narrow(o.b);
      const std::vector<float> a32 = widen(a16), b32 = widen(b16);
      for (int threads : {1, 2}) {
        set_compute_threads(threads);
        std::vector<float> want = o.c0, got = o.c0;
        gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, 1.0f, a32.data(), o.lda,
             b32.data(), o.ldb, t.beta, want.data(), o.ldc);
        gemm_16bit(format, t.ta, t.tb, t.m, t.n, t.k, a16.data(), o.lda, b16.data(), o.ldb, t.beta,
                   got.data(), o.ldc);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << t.describe() << ": threads=" << threads
            << (format == Half::fp16 ? " fp16" : " bf16");
      }
    }
  // A fused update through the 16-bit operands: the float32 call's bits.
  const Case t{256, 784, 64, Trans::yes, Trans::no};
  Operands o = make_operands(t, 2);
  std::vector<std::uint16_t> a16(o.a.size()), b16(o.b.size());
  std::vector<float> a32(o.a.size()), b32(o.b.size());
  for (std::size_t i = 0; i < a16.size(); ++i) a32[i] = from_fp16(a16[i] = to_fp16(o.a[i]));
  for (std::size_t i = 0; i < b16.size(); ++i) b32[i] = from_fp16(b16[i] = to_fp16(o.b[i]));
  std::vector<float> p1(t.m * o.ldc, 0.5f), v1(p1.size(), 0.25f), p2 = p1, v2 = v1, c(p1.size());
  std::vector<std::uint16_t> h1(p1.size()), h2(p1.size());
  const GemmSgd u1{.params = p1.data(),
                   .velocity = v1.data(),
                   .lr = 0.1f,
                   .momentum = 0.9f,
                   .grad_scale = 0.5f,
                   .params16 = h1.data(),
                   .params16_format = Half::fp16};
  GemmSgd u2 = u1;
  u2.params = p2.data();
  u2.velocity = v2.data();
  u2.params16 = h2.data();
  gemm(GemmVersion::v4_register, t.ta, t.tb, t.m, t.n, t.k, 1.0f, a32.data(), o.lda, b32.data(),
       o.ldb, 0.0f, c.data(), o.ldc, {.sgd = &u1});
  gemm_16bit(Half::fp16, t.ta, t.tb, t.m, t.n, t.k, a16.data(), o.lda, b16.data(), o.ldb, 0.0f,
             c.data(), o.ldc, {.sgd = &u2});
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(v1, v2);
  EXPECT_EQ(h1, h2);
  std::vector<std::uint16_t> x(4, 0);
  std::vector<float> y(4);
  EXPECT_THROW(gemm_16bit(Half::none, Trans::no, Trans::no, 2, 2, 2, x.data(), 2, x.data(), 2, 0.0f,
                          y.data(), 2),
               std::invalid_argument);
  EXPECT_THROW(gemm_16bit(Half::fp16, Trans::no, Trans::no, 2, 2, 2, x.data(), 1, x.data(), 2, 0.0f,
                          y.data(), 2),
               std::invalid_argument);
}

// The fused update's rounding into params16 on the values where rounding has cases: NaNs (quiet
// and signalling, with payloads), overflow to infinity, ties to even, FP16's subnormals and
// underflow, signed zeros. The update leaves each parameter as it was (lr 0, gradient 0), so
// params16 must be to_fp16 / to_bf16 of the parameter: GEMM v4's whole tiles round by vectors,
// its edge tiles value by value, and both must give the scalar conversion's bits.
TEST(GemmV4, TheFusedUpdateRoundsSpecialValuesAsTheScalarConversion) {
  ThreadsGuard guard;
  set_compute_threads(1);
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -70000.0f,
                            3.4e38f,
                            1.0f + 0x1p-8f,
                            1.0f + 0x3p-8f,
                            1.0f + 0x1p-11f,
                            1.0f + 0x3p-11f,
                            0x1p-14f,
                            0x1p-24f,
                            0x1p-25f,
                            0x3p-25f,
                            0x1p-26f,
                            -0x1p-20f,
                            6.1e-5f,
                            1e-40f,
                            -1e-45f};
  std::vector<float> values(std::begin(specials), std::end(specials));
  for (const std::uint32_t bits :
       {0x7fc00000u, 0xffc12345u, 0x7f800001u, 0x7fa00000u, 0x7fffffffu, 0xffff8000u}) {
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    values.push_back(f);
  }
  const std::size_t m = 28, n = 90, k = 4;  // 2 panels of rows; 2 whole tiles, and 26 columns
  std::vector<float> a(m * k, 0.0f), b(k * n, 0.0f), c(m * n), v(m * n, 0.0f);
  std::vector<float> p(m * n);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = values[i % values.size()];
  for (const Half format : {Half::fp16, Half::bf16}) {
    std::vector<float> got_p = p;
    std::vector<std::uint16_t> got16(p.size(), 0x5a5a);
    const GemmSgd u{.params = got_p.data(),
                    .velocity = v.data(),
                    .lr = 0.0f,
                    .params16 = got16.data(),
                    .params16_format = format};
    gemm(GemmVersion::v4_register, Trans::no, Trans::no, m, n, k, 1.0f, a.data(), k, b.data(), n,
         0.0f, c.data(), n, {.sgd = &u});
    for (std::size_t i = 0; i < p.size(); ++i) {
      const std::uint16_t want = format == Half::fp16 ? to_fp16(got_p[i]) : to_bf16(got_p[i]);
      ASSERT_EQ(got16[i], want) << (format == Half::fp16 ? "fp16" : "bf16") << " of " << got_p[i]
                                << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, GemmEpilogues, ::testing::ValuesIn(gemm_versions()),
                         [](const ::testing::TestParamInfo<GemmVersion>& info) {
                           return std::string(gemm_version_name(info.param));
                         });

}  // namespace
}  // namespace concurdl::kernels
