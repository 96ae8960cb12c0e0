// GEMM v4 (packed panels, register tile, OpenMP); v3, the cache blocking it builds on, is in
// gemm_v3.cpp.
//
// v4 follows BLIS/GotoBLAS: the five loops around a micro-kernel. Row-major, so the vector
// lanes run along a row of C (the N dimension); that makes op(B) the operand whose micro-panels
// stream from L2 and op(A) the one whose micro-panel stays in L1:
//
//   for ic in M step MC            A block (MC x KC) packed into MR-row panels     -> L3
//     for pc in K step KC            (beta applies on the first pc, then C += ...)
//       for jc in N step NC          B block (KC x NC) packed into NR-column panels -> L2
//         for ir in MC step MR       A micro-panel (MR x KC)                         -> L1
//           for jr in NC step NR     B micro-panel (KC x NR), streamed from L2
//             micro-kernel: C[MR x NR] (+)= A-panel * B-panel, the C tile in registers
//
// Packing copies each operand once per block into the order the micro-kernel reads it (unit
// stride, aligned, zero-padded to whole panels), whatever its transpose and leading dimension:
// the micro-kernel sees one layout. Two shortcuts skip a copy that would not pay for itself:
// with few columns of C the kernel reads A where it lies (read_a_directly), and a batch of rows
// times a transposed weight matrix, C = X Wᵀ, is computed as Cᵀ = W Xᵀ so that W, the large
// operand, is the one read in place (compute_transposed). The last panel of rows runs a kernel
// for just those rows, a last panel of columns half a tile wide one for just those columns.
// Threads split C statically into rectangles of whole tiles
// (one each, no barriers); each C element is computed by one thread with the same K order and
// the same instructions, so the result has the same bits for any thread count.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "concurdl/kernels/threads.hpp"
#include "gemm_impl.hpp"

namespace concurdl::kernels::detail {

// ---------------------------------------------------------------------------------------------
// v4: packed panels and a register tile.
namespace {

// The register tile, from the vector registers the target has (set at compile time, so
// -march decides): MR rows x NR columns of C in MR * NR / kLanes accumulators, plus NR / kLanes
// registers for a row of the B panel and one for a broadcast element of A.
//   AVX-512: 32 registers of 16 floats: 14 x 32 tile = 28 accumulators + 2 for B + 1 for A
//   AVX/AVX2: 16 registers of 8 floats:  6 x 16 tile = 12 accumulators + 2 + 1
//   SSE2:     16 registers of 4 floats:  6 x 8 tile  = 12 accumulators + 2 + 1
// The cache blocks:
//   KC: an A micro-panel (MR x KC floats: 28 KiB for AVX-512) stays in L1 (48 KiB on Ice Lake
//       and later) while B micro-panels stream past it;
//   NC: a B block (KC x NC: 512 KiB) stays in L2 (2 MiB per core on Sapphire Rapids, 1-2 MiB
//       on most AVX-512 parts) while every A micro-panel of the A block uses it;
//   MC: an A block (MC x KC: 4 MiB) is read from L3 once per B block.
// Measured on Sapphire Rapids (2 vCPUs of a busy shared VM, 1 thread, CPU time, n = 512-2048):
// tiles 12 x 32 and 14 x 32 with KC 384-512 and NC 256-512 all reached 130-150 GFLOP/s, about
// OpenBLAS's own AVX-512 kernel (135-155); these values were the steadiest of that set. The
// AVX2 values are BLIS's Haswell ones (its MC and NC swap roles here: BLIS is column-major);
// on the same CPU built for AVX2 they reach 0.9x OpenBLAS's Haswell kernel.
#if defined(__AVX512F__)
constexpr std::size_t kLanes = 16, kMR = 14, kNR = 32, kKC = 512, kNC = 256, kMC = 2016;
#elif defined(__AVX__)
constexpr std::size_t kLanes = 8, kMR = 6, kNR = 16, kKC = 256, kNC = 144, kMC = 4080;
#else
constexpr std::size_t kLanes = 4, kMR = 6, kNR = 8, kKC = 256, kNC = 128, kMC = 1020;
#endif
constexpr std::size_t kNV = kNR / kLanes;  // vectors per row of the tile
static_assert(kNR % kLanes == 0 && kMC % kMR == 0 && kNC % kNR == 0);

// A GCC/Clang vector extension: arithmetic on it is element-wise, `float * vec` broadcasts.
// Unaligned loads and stores go through memcpy, which compiles to one vector move.
constexpr std::size_t ceil_div(std::size_t x, std::size_t d) { return (x + d - 1) / d; }

using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));
inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// C[R x NR] = alpha * Ap * Bp + beta * C. Bp is a packed kc x NR panel (row p at bp + p * NR).
// Ap is a packed MR x kc panel (column p at ap + p * MR; its first R rows are used), or, with
// Direct, R rows of A itself (row-major, not transposed: A(i, p) at ap[i * lda + p]). beta == 0
// never reads C. R = MR is the whole tile; R < MR the last panel of a C whose height is not a
// multiple of MR (a training batch's 64 rows are 4 x 14 + 8): only those rows are computed. Every
// element of C gets the same instructions in the same order of p whichever R and whether A was
// packed or not, so the bits are the same. With sgd (a fused optimiser step, gemm.hpp; alpha is
// 1) the tile is not stored: each element is the gradient of the parameter `at` + its offset in
// the tile, applied to sgd's params and velocity while it is in a register (beta is 0, or 1 on
// a later K block, where acc + 1 * C rounds one way however it is contracted).
template <std::size_t R, bool Direct, std::size_t NV = kNV>
void micro_kernel_rows(std::size_t kc, const float* __restrict ap, std::size_t lda,
                       const float* __restrict bp, float alpha, float beta, float* __restrict c,
                       std::size_t ldc, const GemmSgd* sgd, std::size_t at) {
  Vec acc[R][NV] = {};
  // With sgd, each of the first 2 R NV steps of p asks for one vector of the tile NR columns on
  // (the next the rectangle's loop takes, but at the end of a block of columns), parameters
  // then velocities, so that they arrive from L3 while this tile's multiply-adds run. Without it
  // the update waited on them: the first weight gradient of a training step (784 x 256) took 124 us
  // with the update fused, 109 without it, and 118 with these prefetches (Zen 5 guest, 1 thread);
  // asking for all of the current tile's lines at the start did not help. Addresses as integers:
  // the last tile's "next" lies past the matrix, and a prefetch may point anywhere.
  const auto k_loop = [&]<bool Prefetch>(std::uintptr_t next_p, std::uintptr_t next_v) {
    for (std::size_t p = 0; p < kc; ++p) {
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
      for (std::size_t v = 0; v < NV; ++v) b[v] = load(bp + p * kNR + v * kLanes);
#pragma GCC unroll 16
      for (std::size_t i = 0; i < R; ++i) {
        const float a = Direct ? ap[i * lda + p] : ap[p * kMR + i];
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) acc[i][v] += a * b[v];
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
#pragma GCC unroll 16
    for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) {
        const std::size_t o = i * ldc + v * kLanes;
        const Vec g = beta == 0.0f ? acc[i][v] : acc[i][v] + beta * load(c + o);
        Vec pv = load(pp + o), vv = load(vp + o);
        sgd_update(pv, vv, g, u.lr, u.momentum, u.weight_decay);
        store(pp + o, pv);
        store(vp + o, vv);
      }
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

// The kernels for 1 .. MR rows, indexed by the row count, packed A and direct A.
using RowKernel = void (*)(std::size_t, const float*, std::size_t, const float*, float, float,
                           float*, std::size_t, const GemmSgd*, std::size_t);
template <bool Direct, std::size_t NV, std::size_t... R>
constexpr std::array<RowKernel, sizeof...(R) + 1> row_kernels(std::index_sequence<R...>) {
  return {nullptr, &micro_kernel_rows<R + 1, Direct, NV>...};
}
constexpr auto kPackedKernels = row_kernels<false, kNV>(std::make_index_sequence<kMR>{});
constexpr auto kDirectKernels = row_kernels<true, kNV>(std::make_index_sequence<kMR>{});
// The same for a last panel of C half a tile wide (NR / 2 columns, whole vectors): the first
// weight gradient's 784 columns are 24 panels and 16. Every element still gets the same
// instructions in the same order of p, so the bits are those of the whole tile; without it
// those tiles went through edge_tile, computing 16 columns of zeros into scratch and copying.
static_assert(kNV % 2 == 0);
constexpr std::size_t kHalfNR = kNR / 2;
constexpr auto kPackedHalfKernels = row_kernels<false, kNV / 2>(std::make_index_sequence<kMR>{});
constexpr auto kDirectHalfKernels = row_kernels<true, kNV / 2>(std::make_index_sequence<kMR>{});

// A tile whose last columns stick out of C: the rows that exist, all NR columns, computed into
// scratch (with C's values copied in when beta reads them), and the columns that exist copied
// back, or with sgd applied from there.
void edge_tile(RowKernel kernel, std::size_t kc, const float* ap, std::size_t lda, const float* bp,
               float alpha, float beta, float* c, std::size_t ldc, std::size_t rows,
               std::size_t cols, const GemmSgd* sgd, std::size_t at) {
  alignas(64) float tile[kMR * kNR];
  if (beta != 0.0f) {  // the columns that do not exist are read too: make them zeros
    std::fill(tile, tile + kMR * kNR, 0.0f);
    for (std::size_t i = 0; i < rows; ++i)
      std::memcpy(tile + i * kNR, c + i * ldc, cols * sizeof(float));
  }
  kernel(kc, ap, lda, bp, alpha, beta, tile, kNR, nullptr, 0);
  for (std::size_t i = 0; i < rows; ++i) {
    if (sgd != nullptr)
      apply_sgd(*sgd, tile + i * kNR, sgd->params + at + i * ldc, sgd->velocity + at + i * ldc,
                cols);
    else
      std::memcpy(c + i * ldc, tile + i * kNR, cols * sizeof(float));
  }
}

// Whether the micro-kernel reads A where it lies instead of a packed copy. Packing pays for
// itself when each A micro-panel meets many B panels; with few (the forward pass of a training
// step computed as Zᵀ = W Xᵀ: 64 samples are two panels of 32) copying A costs more than it saves:
// W, 784 x 256 floats, took ~17 us a step to pack on the Zen 5 guest, for 5 uses of each panel.
// Read directly, the MR rows of a micro-panel are MR streams lda floats apart, which the L1 holds
// only when they do not all fall in the same sets: never for a row length of a multiple of 512
// floats (2 KiB), where packing stays.
// Up to eight panels: 64 x 256 x 128 (a training step's layer 1 input gradient) ~20 -> ~18 us,
// square GEMMs of 192 and 256 ~10% faster (Zen 5 guest, 1 thread); four was the limit before.
constexpr std::size_t kDirectMaxPanels = 8, kAliasingFloats = 512;
bool read_a_directly(const GemmArgs& g) {
  return g.ta == Trans::no && ceil_div(g.n, kNR) <= kDirectMaxPanels &&
         g.lda % kAliasingFloats != 0;
}

// op(A)[i0 .. i0+mc, p0 .. p0+kc] into MR-row panels: panel r holds rows r*MR.., column by
// column (MR consecutive floats per p); rows past mc are zero.
template <Trans TA>
void pack_a_panel(const GemmArgs& g, std::size_t i0, std::size_t rows, std::size_t p0,
                  std::size_t kc, float* __restrict dst) {
  if constexpr (TA == Trans::no) {  // A(i, p) = a[i * lda + p]: read along rows of A
    for (std::size_t i = 0; i < rows; ++i) {
      const float* src = g.a + (i0 + i) * g.lda + p0;
      for (std::size_t p = 0; p < kc; ++p) dst[p * kMR + i] = src[p];
    }
  } else {  // A(i, p) = a[p * lda + i]: a column of op(A) is contiguous
    // A whole panel's column is a copy of a constant size, which the compiler makes a few
    // vector moves; `rows` floats at a time was a call to memmove per column (the training
    // step's weight-gradient GEMMs pack dZᵀ this way: ~4% of a step at 1 thread).
    if (rows == kMR) {
      for (std::size_t p = 0; p < kc; ++p)
        std::memcpy(dst + p * kMR, g.a + (p0 + p) * g.lda + i0, kMR * sizeof(float));
      return;
    }
    for (std::size_t p = 0; p < kc; ++p) {
      const float* src = g.a + (p0 + p) * g.lda + i0;
      for (std::size_t i = 0; i < rows; ++i) dst[p * kMR + i] = src[i];
    }
  }
  for (std::size_t i = rows; i < kMR; ++i)
    for (std::size_t p = 0; p < kc; ++p) dst[p * kMR + i] = 0.0f;
}

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

// op(B)[p0 .. p0+kc, j0 .. j0+cols] into one NR-column panel, row by row; columns past cols
// are zero.
template <Trans TB>
void pack_b_panel(const GemmArgs& g, std::size_t p0, std::size_t kc, std::size_t j0,
                  std::size_t cols, float* __restrict dst) {
  if constexpr (TB == Trans::no) {  // B(p, j) = b[p * ldb + j]: a row of op(B) is contiguous
    if (cols == kNR) {              // a constant-size copy per row, as pack_a_panel does
      for (std::size_t p = 0; p < kc; ++p)
        std::memcpy(dst + p * kNR, g.b + (p0 + p) * g.ldb + j0, kNR * sizeof(float));
      return;
    }
    for (std::size_t p = 0; p < kc; ++p) {
      const float* src = g.b + (p0 + p) * g.ldb + j0;
      for (std::size_t j = 0; j < cols; ++j) dst[p * kNR + j] = src[j];
      for (std::size_t j = cols; j < kNR; ++j) dst[p * kNR + j] = 0.0f;
    }
  } else {  // B(p, j) = b[j * ldb + p]: read along rows of B
    // A transpose. A whole panel goes 8 x 8 at a time through registers (transpose8: eight
    // rows of B read as vectors, eight rows of the panel written as vectors, 24 shuffles in
    // between); what is left (a narrow last panel, the last rows below a multiple of 8), float
    // by float, a block of kPackRows rows of the panel at a time, so that the lines being
    // written stay in L1 while every column visits them (the whole panel, KC x NR floats, is
    // 64 KiB with AVX-512: written column by column, each column evicted the last from a 48 KiB
    // L1). The forward GEMM of a training step, X W^T, packs all of W this way every step.
    std::size_t done = 0;
    if (cols == kNR) {
      for (; done + 8 <= kc; done += 8)
        for (std::size_t jb = 0; jb < kNR; jb += 8) {
          V8 r[8];
          for (std::size_t q = 0; q < 8; ++q)
            std::memcpy(&r[q], g.b + (j0 + jb + q) * g.ldb + p0 + done, sizeof(V8));
          transpose8(r);
          for (std::size_t q = 0; q < 8; ++q)
            std::memcpy(dst + (done + q) * kNR + jb, &r[q], sizeof(V8));
        }
    }
    constexpr std::size_t kPackRows = 64;
    for (std::size_t pb = done; pb < kc; pb += kPackRows) {
      const std::size_t pe = std::min(kc, pb + kPackRows);
      for (std::size_t j = 0; j < cols; ++j) {
        const float* src = g.b + (j0 + j) * g.ldb + p0;
        for (std::size_t p = pb; p < pe; ++p) dst[p * kNR + j] = src[p];
      }
    }
    for (std::size_t p = 0; p < kc; ++p)
      for (std::size_t j = cols; j < kNR; ++j) dst[p * kNR + j] = 0.0f;
  }
}

// Packing buffers, one pair per thread (OpenMP keeps its workers alive between regions),
// grown on demand: a fresh allocation per call would page-fault megabytes on every call.
struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
struct PackBuffer {
  std::unique_ptr<float[], AlignedFree> data;
  std::size_t size = 0;
  float* get(std::size_t n) {
    if (n > size) {
      data.reset(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
      size = n;
    }
    return data.get();
  }
};

// One thread's share: the BLIS loops over the block C[i0 .. i1, j0 .. j1], with its own packed
// panels, so threads never wait for each other's packing.
template <Trans TA, Trans TB>
void v4_rectangle(const GemmArgs& g, std::size_t i0, std::size_t i1, std::size_t j0,
                  std::size_t j1) {
  thread_local PackBuffer a_buf, b_buf;
  const bool direct = TA == Trans::no && read_a_directly(g);
  const auto& kernels = direct ? kDirectKernels : kPackedKernels;
  const auto& half_kernels = direct ? kDirectHalfKernels : kPackedHalfKernels;
  const std::size_t kc_max = std::min(kKC, g.k);
  float* const a_pack =
      direct ? nullptr : a_buf.get(ceil_div(std::min(kMC, i1 - i0), kMR) * kMR * kc_max);
  float* const b_pack = b_buf.get(kc_max * ceil_div(std::min(kNC, j1 - j0), kNR) * kNR);
  const GemmSgd* const fused = g.epilogue != nullptr ? g.epilogue->sgd : nullptr;
  for (std::size_t ic = i0; ic < i1; ic += kMC) {
    const std::size_t mc = std::min(kMC, i1 - ic);
    for (std::size_t pc = 0; pc < g.k; pc += kKC) {
      const std::size_t kc = std::min(kKC, g.k - pc);
      const float beta = pc == 0 ? g.beta : 1.0f;  // later K blocks add to what the first wrote
      const GemmSgd* const sgd = pc + kc == g.k ? fused : nullptr;  // the last K block applies it
      if (!direct)
        for (std::size_t r = 0; r * kMR < mc; ++r)
          pack_a_panel<TA>(g, ic + r * kMR, std::min(kMR, mc - r * kMR), pc, kc,
                           a_pack + r * kMR * kc);
      for (std::size_t jc = j0; jc < j1; jc += kNC) {
        const std::size_t nc = std::min(kNC, j1 - jc);
        for (std::size_t s = 0; s * kNR < nc; ++s)
          pack_b_panel<TB>(g, pc, kc, jc + s * kNR, std::min(kNR, nc - s * kNR),
                           b_pack + s * kNR * kc);
        for (std::size_t i = 0; i < mc; i += kMR) {  // A micro-panel stays in L1 across this row
          const float* ap = direct ? g.a + (ic + i) * g.lda + pc : a_pack + i * kc;
          const std::size_t rows = std::min(kMR, mc - i);
          for (std::size_t j = 0; j < nc; j += kNR) {
            const float* bp = b_pack + j * kc;
            const std::size_t at = (ic + i) * g.ldc + jc + j;
            float* c = g.c + at;
            const std::size_t cols = std::min(kNR, nc - j);
            if (cols == kNR)  // whole tiles, and the last panel's rows straight into C
              kernels[rows](kc, ap, g.lda, bp, g.alpha, beta, c, g.ldc, sgd, at);
            else if (cols == kHalfNR)
              half_kernels[rows](kc, ap, g.lda, bp, g.alpha, beta, c, g.ldc, sgd, at);
            else
              edge_tile(kernels[rows], kc, ap, g.lda, bp, g.alpha, beta, c, g.ldc, rows, cols, sgd,
                        at);
          }
        }
      }
    }
  }
}

// How `threads` threads split C: a grid of tm x tn rectangles (tm * tn = threads), each a whole
// number of MR x NR tiles, chosen to minimise the tiles of the largest rectangle, then the
// panels it packs. Depends on the shape and the count only, never on timing.
struct Grid {
  std::size_t tm = 1, tn = 1;
};
Grid split(std::size_t m, std::size_t n, std::size_t threads) {
  const std::size_t mp = ceil_div(m, kMR), np = ceil_div(n, kNR);
  Grid best;
  std::size_t best_area = SIZE_MAX, best_edge = SIZE_MAX;
  for (std::size_t tm = 1; tm <= threads; ++tm) {
    if (threads % tm != 0) continue;
    const std::size_t tn = threads / tm;
    const std::size_t rows = ceil_div(mp, tm), cols = ceil_div(np, tn);
    const std::size_t area = rows * cols, edge = rows * kMR + cols * kNR;
    if (area < best_area || (area == best_area && edge < best_edge)) {
      best = {tm, tn};
      best_area = area;
      best_edge = edge;
    }
  }
  return best;
}

// Below this many multiply-adds (2M: ~10 us on a Zen 5 core, ~30 us on older ones) a team costs
// more than it saves, and on a busy machine a worker that has to wait for a core can cost
// milliseconds. At 2^21 the 64 x 256 x 128 GEMMs of a training step's second layer are in:
// measured at 2 threads (Zen 5 guest), their three GEMMs 73 -> 43 us a step, the step from
// 208K to 262K samples/s; at 2^22 (the value before) they ran on one thread.
constexpr double kParallelMinMacs = 1 << 21;

// C = A Bᵀ with few rows and many columns, the forward pass of a training step (64 samples times
// Wᵀ, W 256 x 784 as a layer stores it), is computed as its transpose Cᵀ = B Aᵀ: there W is A,
// whose micro-panels the kernel reads where they lie (read_a_directly), and only the 64 rows of
// X are packed; each thread then copies its rectangle of Cᵀ back into C, 8 x 8 at a time. The
// same products in the same order of p: the same bits as the direct computation. Only for
// beta == 0 (C is written, not updated), for whole panels of rows (32, 64, 96 or 128: a batch of
// 14 rows would fill 14 of a transposed tile's 32 columns), and when W's rows do not alias in
// the L1. Also when C has fewer columns than one panel (the last layer's 10 classes): computed
// directly, every tile would be 10 useful columns of 32 through a scratch tile; transposed, its
// 10 rows are one panel of whole tiles (that GEMM 2.9 -> 1.4 us on the Zen 5 guest, 1 thread).
// Its panel limits are the four panels A was read in place up to when it was measured (that
// limit is eight now, kDirectMaxPanels; these stay: C = X Wᵀ of 64 x 256 must still be computed
// transposed, W read in place, rather than with Wᵀ packed).
constexpr std::size_t kTransposedMaxPanels = 4;
bool compute_transposed(const GemmArgs& g) {
  return g.ta == Trans::no && g.tb == Trans::yes && g.beta == 0.0f && g.m % kNR == 0 &&
         g.m / kNR <= kTransposedMaxPanels &&
         (ceil_div(g.n, kNR) > kTransposedMaxPanels || g.n < kNR) && g.ldb % kAliasingFloats != 0;
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

template <Trans TA, Trans TB>
void v4_packed(const GemmArgs& g) {
  const double macs =
      static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  const int threads = macs >= kParallelMinMacs ? compute_threads() : 1;
  const bool transposed = TA == Trans::no && TB == Trans::yes && compute_transposed(g);
  thread_local PackBuffer ct_buf;  // the calling thread's: the team writes its rectangles
  GemmArgs w = g;                  // the product the team computes: C, or Cᵀ into ct_buf
  if (transposed) {
    w.m = g.n;
    w.n = g.m;
    w.a = g.b;
    w.lda = g.ldb;
    w.b = g.a;
    w.ldb = g.lda;
    w.c = ct_buf.get(g.m * g.n);
    w.ldc = g.m;
    w.epilogue = nullptr;  // C's finish, once Cᵀ is copied back
  }
  // Each thread takes one rectangle of C: no barriers, no shared buffers. The team may be
  // smaller than asked (nested regions), so the grid is made from the team's real size.
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::size_t team = 1, me = 0;
#ifdef _OPENMP
    team = static_cast<std::size_t>(omp_get_num_threads());
    me = static_cast<std::size_t>(omp_get_thread_num());
#endif
    // Transposed, the threads split W's rows: each reads its own share of W. Split by columns
    // (the batch), each would read all of W, and the optimiser's update after the backward pass
    // would then find W's lines in the other core's cache (SGD 16 -> 24 us a step at 2 threads).
    // A narrow C (fewer columns than a panel: Cᵀ has one panel of rows) has no rows of W to
    // share out, and is split as any product is.
    const Grid grid =
        transposed && ceil_div(w.m, kMR) >= team ? Grid{team, 1} : split(w.m, w.n, team);
    const std::size_t mp = ceil_div(w.m, kMR), np = ceil_div(w.n, kNR);
    const std::size_t ti = me / grid.tn, tj = me % grid.tn;
    // Rectangle ti of tm: tiles [ti * mp / tm, (ti + 1) * mp / tm), in elements, clipped to C.
    const std::size_t i0 = std::min(w.m, ti * mp / grid.tm * kMR);
    const std::size_t i1 = std::min(w.m, (ti + 1) * mp / grid.tm * kMR);
    const std::size_t j0 = std::min(w.n, tj * np / grid.tn * kNR);
    const std::size_t j1 = std::min(w.n, (tj + 1) * np / grid.tn * kNR);
    if (i0 < i1 && j0 < j1) {
      v4_rectangle<TA, TB>(w, i0, i1, j0, j1);
      // The epilogue (gemm.hpp) on this thread's rectangle of C, while it is in this core's cache.
      // With sgd the rectangle's tiles applied it themselves.
      if (transposed) {
        transpose_back(w.c, w.ldc, g.c, g.ldc, i0, i1, j0, j1);
        finish_c(g, j0, j1, i0, i1);
      } else if (g.epilogue == nullptr || g.epilogue->sgd == nullptr) {
        finish_c(g, i0, i1, j0, j1);
      }
    }
  }
}

}  // namespace

void gemm_v4(const GemmArgs& g) {
  if (g.k == 0) {
    scale_c(g);
    return finish_c(g, 0, g.m, 0, g.n);
  }
  if (g.ta == Trans::no)
    g.tb == Trans::no ? v4_packed<Trans::no, Trans::no>(g) : v4_packed<Trans::no, Trans::yes>(g);
  else
    g.tb == Trans::no ? v4_packed<Trans::yes, Trans::no>(g) : v4_packed<Trans::yes, Trans::yes>(g);
}

}  // namespace concurdl::kernels::detail

namespace concurdl::kernels {
GemmBlocking gemm_v4_blocking() {
  using namespace detail;
  return {.mr = kMR, .nr = kNR, .kc = kKC, .mc = kMC, .nc = kNC, .lanes = kLanes};
}
}  // namespace concurdl::kernels
