// Internal: GEMM v4's micro-kernels, for 1 .. MR rows of a tile, whole or half a tile wide, A
// packed or read where it lies (float32, or 16-bit widened as it is read), and the tiles whose
// last columns stick out of C; the loops around them are gemm_blocked.cpp's.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "gemm_impl.hpp"
#include "gemm_v4.hpp"

namespace concurdl::kernels::detail::v4 {

// A 16-bit A's micro-panel widened, rows kRowLd floats apart (16 floats past a K block, so
// that its rows do not share L1 sets): written by the 16-bit kernels as they read A, read back
// by the float32 direct kernels for the micro-panel's other B panels. The calling thread's.
inline constexpr std::size_t kRowLd = kKC + kLanes;
// static: internal to the one file that includes this header, so that the kernels reach it as
// a plain thread-local (an inline one could go through a TLS wrapper call).
alignas(64) static thread_local float t_widened[kMR * kRowLd];

// How a tile leaves its sums on the last K block of a product: stored in C (no TileFinish at
// all), applied as sgd, or rounded into c16 (GemmEpilogue's; at the tile's offset in C).
struct TileFinish {
  const GemmSgd* sgd = nullptr;
  std::uint16_t* c16 = nullptr;
  Half c16_format = Half::none;
};
// Whether v4's tiles round C into c16 themselves: when nothing else is to be done to C first.
inline bool tiles_round(const GemmEpilogue* e) {
  return e != nullptr && e->c16 != nullptr && e->bias == nullptr && !e->relu &&
         e->relu_of == nullptr;
}

// C[R x NR] = alpha * Ap * Bp + beta * C. Bp is a kc x NR panel, row p at bp + p * ldb: packed
// (ldb = NR), or B where it lies (read_b_directly), float32 or, with BH, 16-bit values widened
// (exactly) as they are read.
// Ap is a packed MR x kc panel (column p at ap + p * MR; its first R rows are used), or, with
// Direct, R rows of A itself (row-major, not transposed: A(i, p) at ap[i * lda + p]). beta == 0
// never reads C. R = MR is the whole tile; R < MR the last panel of a C whose height is not a
// multiple of MR (a training batch's 64 rows are 4 x 14 + 8): only those rows are computed. Every
// element of C gets the same instructions in the same order of p whichever R and whether A was
// packed or not, so the bits are the same. With sgd (a fused optimiser step, gemm.hpp; alpha is
// 1) the tile is not stored: each element is the gradient of the parameter `at` + its offset in
// the tile, applied to sgd's params and velocity while it is in a register (beta is 0, or 1 on
// a later K block, where acc + 1 * C rounds one way however it is contracted). With c16 the
// tile's values are rounded into 16 bits there instead of stored: the same values C would get.
// With AH (fp16 or bf16; Direct only) A is 16-bit, read where it lies: each row's next kLanes
// values are widened (exactly) into t_widened, in L1, and the kernel broadcasts from there, the
// conversions interleaved with the multiply-adds; the micro-panel's other B panels then read
// t_widened with the float32 kernels. The same products in the same order of p.
template <Half AH>
using AElem = std::conditional_t<AH == Half::none, float, std::uint16_t>;
template <std::size_t R, bool Direct, std::size_t NV = kNV, Half AH = Half::none,
          Half BH = Half::none>
void micro_kernel_rows(std::size_t kc, const AElem<AH>* __restrict ap, std::size_t lda,
                       const AElem<BH>* __restrict bp, std::size_t ldb, float alpha, float beta,
                       float* __restrict c, std::size_t ldc, const TileFinish* finish,
                       std::size_t at) {
  static_assert(AH == Half::none || Direct);
  const GemmSgd* const sgd = finish != nullptr ? finish->sgd : nullptr;
  Vec acc[R][NV] = {};
  // With sgd, each of the first 2 R NV steps of p asks for one vector of the tile NR columns on
  // (the next the rectangle's loop takes, but at the end of a block of columns), parameters
  // then velocities, so that they arrive from L3 while this tile's multiply-adds run. Without it
  // the update waited on them: the first weight gradient of a training step (784 x 256) took 124 us
  // with the update fused, 109 without it, and 118 with these prefetches (Zen 5 guest, 1 thread);
  // asking for all of the current tile's lines at the start did not help. Addresses as integers:
  // the last tile's "next" lies past the matrix, and a prefetch may point anywhere.
  const auto k_loop = [&]<bool Prefetch>(std::uintptr_t next_p, std::uintptr_t next_v) {
    // One step of p: row i's element of A is a_of(i).
    const auto mac = [&](std::size_t p, const auto& a_of) {
      if constexpr (Prefetch) {
        if (p < 2 * R * NV) {
          const std::size_t line = p % (R * NV);
          __builtin_prefetch(reinterpret_cast<const void*>(
                                 (p < R * NV ? next_p : next_v) +
                                 ((line / NV) * ldc + (line % NV) * kLanes) * sizeof(float)),
                             1, 3);
        }
      }
      Vec b[NV];
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) {
        if constexpr (BH == Half::none)
          b[v] = load(bp + p * ldb + v * kLanes);
        else
          b[v] = widen_vec<BH>(bp + p * ldb + v * kLanes);
      }
#pragma GCC unroll 16
      for (std::size_t i = 0; i < R; ++i) {
        const float a = a_of(i);
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) acc[i][v] += a * b[v];
      }
    };
    if constexpr (AH == Half::none) {
      for (std::size_t p = 0; p < kc; ++p)
        mac(p, [&](std::size_t i) { return Direct ? ap[i * lda + p] : ap[p * kMR + i]; });
    } else {
      float* const w = t_widened;
      for (std::size_t p0 = 0; p0 < kc; p0 += kLanes) {
        const std::size_t pn = std::min(kLanes, kc - p0);
#pragma GCC unroll 16
        for (std::size_t i = 0; i < R; ++i) {
          if (pn == kLanes)
            widen_run<AH>(ap + i * lda + p0, w + i * kRowLd + p0, kLanes);
          else
            widen_run<AH>(ap + i * lda + p0, w + i * kRowLd + p0, pn);
        }
        for (std::size_t q = 0; q < pn; ++q)
          mac(p0 + q, [&](std::size_t i) { return w[i * kRowLd + p0 + q]; });
      }
    }
  };
  if (sgd != nullptr)
    k_loop.template operator()<true>(
        reinterpret_cast<std::uintptr_t>(sgd->params + at) + kNR * sizeof(float),
        reinterpret_cast<std::uintptr_t>(sgd->velocity + at) + kNR * sizeof(float));
  else
    k_loop.template operator()<false>(0, 0);
  if (sgd != nullptr) {
    const GemmSgd u = *sgd;
    float* __restrict const pp = u.params + at;
    float* __restrict const vp = u.velocity + at;
    // Unscaled and scaled as two loops (a branch per vector inside one changed how the compiler
    // contracted the unscaled update, and with it the bits).
    const auto update = [&]<bool Scaled>() {
#pragma GCC unroll 16
      for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) {
          const std::size_t o = i * ldc + v * kLanes;
          const Vec sum = beta == 0.0f ? acc[i][v] : acc[i][v] + beta * load(c + o);
          Vec pv = load(pp + o), vv = load(vp + o);
          if constexpr (Scaled)
            sgd_update_scaled(pv, vv, sum, u.grad_scale, u.lr, u.momentum, u.weight_decay);
          else
            sgd_update(pv, vv, sum, u.lr, u.momentum, u.weight_decay);
          store(pp + o, pv);
          store(vp + o, vv);
          if (u.params16 != nullptr) store_16bit(u.params16_format, u.params16 + at + o, pv);
        }
    };
    if (u.grad_scale == 1.0f)
      update.template operator()<false>();
    else
      update.template operator()<true>();
    return;
  }
  if (finish != nullptr && finish->c16 != nullptr) {
    std::uint16_t* const c16 = finish->c16 + at;
    const auto round = [&]<Half F>() {
#pragma GCC unroll 16
      for (std::size_t i = 0; i < R; ++i) {
        Vec row[NV];
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v)
          row[v] = beta == 0.0f ? (alpha == 1.0f ? acc[i][v] : alpha * acc[i][v])
                                : alpha * acc[i][v] + beta * load(c + i * ldc + v * kLanes);
        store_row_16bit<F>(c16 + i * ldc, row);
      }
    };
    if (finish->c16_format == Half::fp16)
      round.template operator()<Half::fp16>();
    else
      round.template operator()<Half::bf16>();
    return;
  }
  if (beta == 0.0f && alpha == 1.0f) {  // 1 * x is x: the same bits without the multiplies
#pragma GCC unroll 16
    for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) store(c + i * ldc + v * kLanes, acc[i][v]);
  } else if (beta == 0.0f) {
#pragma GCC unroll 16
    for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) store(c + i * ldc + v * kLanes, alpha * acc[i][v]);
  } else {
#pragma GCC unroll 16
    for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) {
        float* cv = c + i * ldc + v * kLanes;
        store(cv, alpha * acc[i][v] + beta * load(cv));
      }
  }
}

// The kernels for 1 .. MR rows, indexed by the row count, packed A and direct A (float32, or
// 16-bit widened as it is read).
template <class T, class U = float>
using RowKernel = void (*)(std::size_t, const T*, std::size_t, const U*, std::size_t, float, float,
                           float*, std::size_t, const TileFinish*, std::size_t);
template <bool Direct, std::size_t NV, Half AH = Half::none, Half BH = Half::none, std::size_t... R>
constexpr std::array<RowKernel<AElem<AH>, AElem<BH>>, sizeof...(R) + 1> row_kernels(
    std::index_sequence<R...>) {
  return {nullptr, &micro_kernel_rows<R + 1, Direct, NV, AH, BH>...};
}
// BH: B's storage where the kernel reads B in place (read_b_directly), else none.
template <Half BH = Half::none>
inline constexpr auto kPackedKernels =
    row_kernels<false, kNV, Half::none, BH>(std::make_index_sequence<kMR>{});
template <Half BH = Half::none>
inline constexpr auto kDirectKernels =
    row_kernels<true, kNV, Half::none, BH>(std::make_index_sequence<kMR>{});
template <Half AH, Half BH = Half::none>
inline constexpr auto kDirect16Kernels =
    row_kernels<true, kNV, AH, BH>(std::make_index_sequence<kMR>{});
// The same for a last panel of C half a tile wide (NR / 2 columns, whole vectors): the first
// weight gradient's 784 columns are 24 panels and 16. Every element still gets the same
// instructions in the same order of p, so the bits are those of the whole tile; without it
// those tiles went through edge_tile, computing 16 columns of zeros into scratch and copying.
static_assert(kNV % 2 == 0);
inline constexpr std::size_t kHalfNR = kNR / 2;
template <Half BH = Half::none>
inline constexpr auto kPackedHalfKernels =
    row_kernels<false, kNV / 2, Half::none, BH>(std::make_index_sequence<kMR>{});
template <Half BH = Half::none>
inline constexpr auto kDirectHalfKernels =
    row_kernels<true, kNV / 2, Half::none, BH>(std::make_index_sequence<kMR>{});
template <Half AH, Half BH = Half::none>
inline constexpr auto kDirect16HalfKernels =
    row_kernels<true, kNV / 2, AH, BH>(std::make_index_sequence<kMR>{});

// A tile whose last columns stick out of C: the rows that exist, all NR columns, computed into
// scratch (with C's values copied in when beta reads them), and the columns that exist copied
// back, or with sgd applied, or rounded into c16, from there.
template <class T, class U>
void edge_tile(RowKernel<T, U> kernel, std::size_t kc, const T* ap, std::size_t lda, const U* bp,
               std::size_t ldb, float alpha, float beta, float* c, std::size_t ldc,
               std::size_t rows, std::size_t cols, const TileFinish* finish, std::size_t at) {
  alignas(64) float tile[kMR * kNR];
  if (beta != 0.0f) {  // the columns that do not exist are read too: make them zeros
    std::fill(tile, tile + kMR * kNR, 0.0f);
    for (std::size_t i = 0; i < rows; ++i)
      std::memcpy(tile + i * kNR, c + i * ldc, cols * sizeof(float));
  }
  kernel(kc, ap, lda, bp, ldb, alpha, beta, tile, kNR, nullptr, 0);
  for (std::size_t i = 0; i < rows; ++i) {
    if (finish != nullptr && finish->sgd != nullptr)
      apply_sgd(*finish->sgd, tile + i * kNR, at + i * ldc, cols);
    else if (finish != nullptr && finish->c16 != nullptr)
      round_row(finish->c16_format, tile + i * kNR, finish->c16 + at + i * ldc, cols);
    else
      std::memcpy(c + i * ldc, tile + i * kNR, cols * sizeof(float));
  }
}

}  // namespace concurdl::kernels::detail::v4
