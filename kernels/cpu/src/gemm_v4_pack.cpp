// GEMM v4's packing (operands copied into the panels its micro-kernel reads) and the copy back
// of a product computed transposed; gemm_blocked.cpp has the loops around them.
#include <algorithm>
#include <cstring>

#include "gemm_v4.hpp"

namespace concurdl::kernels::detail::v4 {

namespace {
// Eight rows of eight floats transposed in registers: r[q][i] becomes r[i][q]. Three rounds of
// two-input shuffles (floats, pairs, halves), as the AVX unpack / shuffle / permute sequence;
// __builtin_shufflevector (GCC 12 and Clang) with constant lanes.
using V8 = float __attribute__((vector_size(8 * sizeof(float))));
static_assert(kNR % 8 == 0);
inline void transpose8(V8 (&r)[8]) {
  V8 t[8], u[8];
  for (int q = 0; q < 8; q += 2) {
    t[q] = __builtin_shufflevector(r[q], r[q + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[q + 1] = __builtin_shufflevector(r[q], r[q + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int q = 0; q < 8; q += 4) {
    u[q] = __builtin_shufflevector(t[q], t[q + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[q + 1] = __builtin_shufflevector(t[q], t[q + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[q + 2] = __builtin_shufflevector(t[q + 1], t[q + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[q + 3] = __builtin_shufflevector(t[q + 1], t[q + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = __builtin_shufflevector(u[q], u[q + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[q + 4] = __builtin_shufflevector(u[q], u[q + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// The operands by storage format: float32 where they lie, or 16-bit values (widened as they are
// copied: gemm_v4.hpp's get and widen_run).
template <Half H>
const auto* a_of(const GemmArgs& g) {
  if constexpr (H == Half::none)
    return g.a;
  else
    return g.a16;
}
template <Half H>
const auto* b_of(const GemmArgs& g) {
  if constexpr (H == Half::none)
    return g.b;
  else
    return g.b16;
}
// (Into a reference: a vector returned by value changes the ABI in a build without AVX.)
template <Half H, class T>
inline void load8(const T* p, V8& v) {
  if constexpr (H == Half::none) {
    std::memcpy(&v, p, sizeof v);
  } else {
    float x[8];
    widen_run<H>(p, x, 8);
    std::memcpy(&v, x, sizeof v);
  }
}

// Rows [i, i + R) of Ct (R a multiple of 8) into columns of C, 8 x 8 blocks through registers
// side by side, so that each row of C gets R floats in one go.
template <std::size_t R>
void transpose_strip(const float* ct, std::size_t ldt, float* c, std::size_t ldc, std::size_t i,
                     std::size_t j0, std::size_t j1) {
  static_assert(R % 8 == 0);
  std::size_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    V8 r[R / 8][8];
    for (std::size_t b = 0; b < R / 8; ++b) {
      for (std::size_t q = 0; q < 8; ++q)
        std::memcpy(&r[b][q], ct + (i + 8 * b + q) * ldt + j, sizeof(V8));
      transpose8(r[b]);
    }
    for (std::size_t q = 0; q < 8; ++q)
      for (std::size_t b = 0; b < R / 8; ++b)
        std::memcpy(c + (j + q) * ldc + i + 8 * b, &r[b][q], sizeof(V8));
  }
  for (; j < j1; ++j)
    for (std::size_t q = 0; q < R; ++q) c[j * ldc + i + q] = ct[(i + q) * ldt + j];
}
}  // namespace

// op(A)[i0 .. i0+mc, p0 .. p0+kc] into MR-row panels: panel r holds rows r*MR.., column by
// column (MR consecutive floats per p); rows past mc are zero.
template <Trans TA, Half H>
void pack_a_panel(const GemmArgs& g, std::size_t i0, std::size_t rows, std::size_t p0,
                  std::size_t kc, float* __restrict dst) {
  const auto* const a = a_of<H>(g);
  if constexpr (TA == Trans::no) {  // A(i, p) = a[i * lda + p]: read along rows of A
    for (std::size_t i = 0; i < rows; ++i) {
      const auto* src = a + (i0 + i) * g.lda + p0;
      if constexpr (H == Half::none) {
        for (std::size_t p = 0; p < kc; ++p) dst[p * kMR + i] = src[p];
      } else {  // the row widened by vectors first, then scattered
        float row[kKC];
        widen_run<H>(src, row, kc);
        for (std::size_t p = 0; p < kc; ++p) dst[p * kMR + i] = row[p];
      }
    }
  } else {  // A(i, p) = a[p * lda + i]: a column of op(A) is contiguous
    // A whole panel's column is a copy of a constant size, which the compiler makes a few
    // vector moves; `rows` floats at a time was a call to memmove per column (the training
    // step's weight-gradient GEMMs pack dZᵀ this way: ~4% of a step at 1 thread).
    if (rows == kMR) {
      for (std::size_t p = 0; p < kc; ++p)
        widen_run<H>(a + (p0 + p) * g.lda + i0, dst + p * kMR, kMR);
      return;
    }
    for (std::size_t p = 0; p < kc; ++p) {
      const auto* src = a + (p0 + p) * g.lda + i0;
      for (std::size_t i = 0; i < rows; ++i) dst[p * kMR + i] = get<H>(src + i);
    }
  }
  for (std::size_t i = rows; i < kMR; ++i)
    for (std::size_t p = 0; p < kc; ++p) dst[p * kMR + i] = 0.0f;
}

// op(B)[p0 .. p0+kc, j0 .. j0+cols] into one NR-column panel, row by row; columns past cols
// are zero.
template <Trans TB, Half H>
void pack_b_panel(const GemmArgs& g, std::size_t p0, std::size_t kc, std::size_t j0,
                  std::size_t cols, float* __restrict dst) {
  const auto* const b = b_of<H>(g);
  if constexpr (TB == Trans::no) {  // B(p, j) = b[p * ldb + j]: a row of op(B) is contiguous
    if (cols == kNR) {              // a constant-size copy per row, as pack_a_panel does
      for (std::size_t p = 0; p < kc; ++p)
        widen_run<H>(b + (p0 + p) * g.ldb + j0, dst + p * kNR, kNR);
      return;
    }
    for (std::size_t p = 0; p < kc; ++p) {
      const auto* src = b + (p0 + p) * g.ldb + j0;
      for (std::size_t j = 0; j < cols; ++j) dst[p * kNR + j] = get<H>(src + j);
      for (std::size_t j = cols; j < kNR; ++j) dst[p * kNR + j] = 0.0f;
    }
  } else {  // B(p, j) = b[j * ldb + p]: read along rows of B
    // A transpose. A whole panel goes 8 x 8 at a time through registers (transpose8: eight
    // rows of B read as vectors, eight rows of the panel written as vectors, 24 shuffles in
    // between); what is left (a narrow last panel, the last rows below a multiple of 8), value
    // by value, a block of kPackRows rows of the panel at a time, so that the lines being
    // written stay in L1 while every column visits them (the whole panel, KC x NR floats, is
    // 64 KiB with AVX-512: written column by column, each column evicted the last from a 48 KiB
    // L1). The forward GEMM of a training step, computed as W Xᵀ, packs X this way every step.
    std::size_t done = 0;
    if (cols == kNR) {
      for (; done + 8 <= kc; done += 8)
        for (std::size_t jb = 0; jb < kNR; jb += 8) {
          V8 r[8];
          for (std::size_t q = 0; q < 8; ++q) load8<H>(b + (j0 + jb + q) * g.ldb + p0 + done, r[q]);
          transpose8(r);
          for (std::size_t q = 0; q < 8; ++q)
            std::memcpy(dst + (done + q) * kNR + jb, &r[q], sizeof(V8));
        }
    }
    constexpr std::size_t kPackRows = 64;
    for (std::size_t pb = done; pb < kc; pb += kPackRows) {
      const std::size_t pe = std::min(kc, pb + kPackRows);
      for (std::size_t j = 0; j < cols; ++j) {
        const auto* src = b + (j0 + j) * g.ldb + p0;
        for (std::size_t p = pb; p < pe; ++p) dst[p * kNR + j] = get<H>(src + p);
      }
    }
    for (std::size_t p = 0; p < kc; ++p)
      for (std::size_t j = cols; j < kNR; ++j) dst[p * kNR + j] = 0.0f;
  }
}

#define CONCURDL_V4_PACKS(H)                                                                       \
  template void pack_a_panel<Trans::no, H>(const GemmArgs&, std::size_t, std::size_t, std::size_t, \
                                           std::size_t, float* __restrict);                        \
  template void pack_a_panel<Trans::yes, H>(const GemmArgs&, std::size_t, std::size_t,             \
                                            std::size_t, std::size_t, float* __restrict);          \
  template void pack_b_panel<Trans::no, H>(const GemmArgs&, std::size_t, std::size_t, std::size_t, \
                                           std::size_t, float* __restrict);                        \
  template void pack_b_panel<Trans::yes, H>(const GemmArgs&, std::size_t, std::size_t,             \
                                            std::size_t, std::size_t, float* __restrict);
CONCURDL_V4_PACKS(Half::none)
CONCURDL_V4_PACKS(Half::fp16)
CONCURDL_V4_PACKS(Half::bf16)
#undef CONCURDL_V4_PACKS

// C[j][i] = Ct[i][j] for i in [i0, i1), j in [j0, j1): Ct's rows are C's columns.
void transpose_back(const float* ct, std::size_t ldt, float* c, std::size_t ldc, std::size_t i0,
                    std::size_t i1, std::size_t j0, std::size_t j1) {
  std::size_t i = i0;
  // Sixteen rows of Ct at a time where they exist, so that each row of C is written a whole
  // 64-byte line at a time: C's rows are ldc floats apart, often a multiple of 256 (1 KiB), so
  // the rows of a strip fall in a few L1 sets, and a half-written line was evicted before its
  // other half came (the forward GEMM's 64 x 256 output: ~4 -> ~1 us on the Zen 5 guest).
  for (; i + 16 <= i1; i += 16) transpose_strip<16>(ct, ldt, c, ldc, i, j0, j1);
  for (; i + 8 <= i1; i += 8) transpose_strip<8>(ct, ldt, c, ldc, i, j0, j1);
  for (; i < i1; ++i)
    for (std::size_t j = j0; j < j1; ++j) c[j * ldc + i] = ct[i * ldt + j];
}

}  // namespace concurdl::kernels::detail::v4
