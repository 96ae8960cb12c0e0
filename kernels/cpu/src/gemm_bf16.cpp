// The BF16 GEMM (bf16.hpp); the conversions and the AVX512_BF16 check are bf16.cpp, the peaks it
// is read against gemm_bf16_peak.cpp.
//
// The GEMM is GEMM v4's scheme (gemm_v4.hpp) with VDPBF16PS in place of the FMA: a 14 x 32 tile
// of C in 28 zmm accumulators, B packed in panels of 32 columns and A in micro-panels of 14 rows,
// both by pairs along k, because VDPBF16PS multiplies the bfloat16 pair (2i, 2i+1) of one
// operand with the same pair of the other and adds both products to float32 lane i:
//   B panel, per k pair q: 32 columns x (B[2q][j], B[2q+1][j])   = 64 bf16 = 2 zmm
//   A panel, per k pair q: 14 rows, (A[i][2q], A[i][2q+1]) as one 32-bit word, broadcast
// so acc[r][v] += A pair of row r . B pairs of columns 16v..16v+15, for every q. k is cut into
// blocks of KC = 512 (an A micro-panel, 14 KiB, stays in L1 while B panels stream past it) and n
// into blocks of NC = 256 (the packed B block, 256 KiB, in L2); an odd k is padded with a zero.
// Per k block, A is packed once for all rows; the threads share the packing and split the tiles
// of C. The packing (register transposes and permutes for B, scalar loops for A) is a few percent
// of a call at n = 1024. A forward pass's product with a batch's few rows (X Wᵀ, m = 64) runs as
// its transpose instead, the weights read where they lie: packing W was about an eighth of that
// call (gemm_bf16 below).
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/threads.hpp"
#include "gemm_impl.hpp"
#include "gemm_v4.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bf16_target.hpp"

namespace concurdl::kernels {

namespace {

void require_bf16(const char* who) {
  if (!have_bf16()) throw std::runtime_error(std::string(who) + ": " + bf16_why_not());
}

#if CONCURDL_BF16_KERNEL
constexpr std::size_t kMR = 14, kNR = 32, kKC = 512, kNC = 256;
// At most this many rows of C (a batch), the forward product runs transposed (gemm_bf16). On the
// Zen 5 guest, 1 thread, n 1024, k 784: transposed 0.26 ms against 0.29 direct at m = 64, even at
// 128, 1.02 against 0.96 at 256. Why it stops paying is not measured: the packing of W it saves
// is a fixed cost while the transpose back grows with m (and its buffer, n x m floats, with it).
constexpr std::size_t kTransposedMaxM = 128;

// 16 x 16 pairs of bfloat16 (32-bit words): pairs q0 .. q0 + 15 of rows[0 .. 15] into rows of
// out, ld_out pairs apart: out[q][i] = rows[i][q0 + q]. In registers, unaligned as it comes.
// (GCC 12 takes the unpacks' undefined pass-through operand for an uninitialised variable.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
CONCURDL_BF16_TARGET void transpose16(const bf16* const* rows, std::size_t q0, bf16* out,
                                      std::size_t ld_out) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(rows[i] + 2 * q0);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
      t[8 * i + j + 4] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    _mm512_storeu_si512(out + 2 * j * ld_out, _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88));
    _mm512_storeu_si512(out + 2 * (j + 8) * ld_out, _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// out[2 j] = r0[j], out[2 j + 1] = r1[j] for j < 32: one permutation of the two rows for each
// half of the output.
CONCURDL_BF16_TARGET void interleave32(const bf16* r0, const bf16* r1, bf16* out) {
  alignas(64) static const std::uint16_t lo[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                   37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                   11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static const std::uint16_t hi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21,
                                                   53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58,
                                                   27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i a = _mm512_loadu_si512(r0), b = _mm512_loadu_si512(r1);
  _mm512_storeu_si512(out, _mm512_permutex2var_epi16(a, _mm512_load_si512(lo), b));
  _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi16(a, _mm512_load_si512(hi), b));
}

// The panel of kNR columns from j0 (`cols` of them real) of B[p0 .. p0+2 kc2) into dst, by k
// pairs: per pair q, 32 columns x (B[p][j], B[p+1][j]); columns past cols and rows past k are
// zero. B[p][j] is b[p ldb + j], or b[j ldb + p] when `tb` (B given as its transpose, n x k: a
// weight matrix stored out x in, or a batch X in the transposed forward product, whose pairs
// along k are then already side by side).
void pack_b_panel(const bf16* b, std::size_t ldb, bool tb, std::size_t k, std::size_t p0,
                  std::size_t kc2, std::size_t j0, std::size_t cols, bf16* dst) {
  if (tb && cols == kNR && p0 + 2 * kc2 <= k) {
    // B^T's rows hold the k pairs side by side: a panel is a 32 x kc2 block of 32-bit words,
    // transposed 16 x 16 at a time in registers (the scalar loop below is 5x slower).
    const bf16* rows[kNR];
    for (std::size_t col = 0; col < kNR; ++col) rows[col] = b + (j0 + col) * ldb + p0;
    std::size_t q = 0;
    for (; q + 16 <= kc2; q += 16)
      for (std::size_t half = 0; half < 2; ++half)
        transpose16(rows + 16 * half, q, dst + 2 * (q * kNR + 16 * half), kNR);
    for (; q < kc2; ++q)
      for (std::size_t col = 0; col < kNR; ++col)
        std::memcpy(dst + 2 * (q * kNR + col), rows[col] + 2 * q, 2 * sizeof(bf16));
    return;
  }
  if (tb) {
    for (std::size_t q = 0; q < kc2; ++q) {
      const std::size_t p = p0 + 2 * q;
      bf16* out = dst + q * 2 * kNR;
      for (std::size_t col = 0; col < kNR; ++col) {
        if (col >= cols) {  // (no pointer formed past B's last row)
          out[2 * col] = out[2 * col + 1] = bf16{0};
          continue;
        }
        const bf16* row = b + (j0 + col) * ldb;
        out[2 * col] = row[p];
        out[2 * col + 1] = p + 1 < k ? row[p + 1] : bf16{0};
      }
    }
    return;
  }
  for (std::size_t q = 0; q < kc2; ++q) {
    const std::size_t p = p0 + 2 * q;
    const bf16* r0 = b + p * ldb + j0;
    const bf16* r1 = p + 1 < k ? r0 + ldb : nullptr;
    bf16* out = dst + q * 2 * kNR;
    if (cols == kNR && r1 != nullptr) {  // the common case: two rows interleaved
      interleave32(r0, r1, out);
      continue;
    }
    for (std::size_t col = 0; col < kNR; ++col) {
      out[2 * col] = col < cols ? r0[col] : bf16{0};
      out[2 * col + 1] = col < cols && r1 != nullptr ? r1[col] : bf16{0};
    }
  }
}

// Rows [i0, i0 + rows) of A[., p0 .. p0+2 kc2) into one micro-panel: per pair q, kMR 32-bit
// words (A[i][p], A[i][p+1]); rows past `rows` and columns past k are zero. A[i][p] is
// a[i lda + p], or a[p lda + i] when `ta` (A given as its transpose, k x m: the output
// gradient in a weight gradient dZ^T X, whose pairs along k are then a row apart).
void pack_a(const bf16* a, std::size_t lda, bool ta, std::size_t k, std::size_t i0,
            std::size_t rows, std::size_t p0, std::size_t kc2, std::uint32_t* dst) {
  const bool full_k = p0 + 2 * kc2 <= k;
  if (ta) {
    for (std::size_t q = 0; q < kc2; ++q) {
      const std::size_t p = p0 + 2 * q;
      const bf16* r0 = a + p * lda + i0;
      const bf16* r1 = p + 1 < k ? r0 + lda : nullptr;
      std::uint32_t* out = dst + q * kMR;
      for (std::size_t r = 0; r < kMR; ++r) {
        const std::uint32_t lo = r < rows ? r0[r] : 0u;
        const std::uint32_t hi = r < rows && r1 != nullptr ? r1[r] : 0u;
        out[r] = lo | (hi << 16);
      }
    }
    return;
  }
  for (std::size_t r = 0; r < kMR; ++r) {
    if (r >= rows) {
      for (std::size_t q = 0; q < kc2; ++q) dst[q * kMR + r] = 0;
      continue;
    }
    const bf16* row = a + (i0 + r) * lda + p0;
    if (full_k) {
      for (std::size_t q = 0; q < kc2; ++q)
        dst[q * kMR + r] = std::uint32_t{row[2 * q]} | (std::uint32_t{row[2 * q + 1]} << 16);
      continue;
    }
    for (std::size_t q = 0; q < kc2; ++q) {
      const std::size_t p = p0 + 2 * q;
      const std::uint32_t lo = p < k ? row[2 * q] : 0u, hi = p + 1 < k ? row[2 * q + 1] : 0u;
      dst[q * kMR + r] = lo | (hi << 16);
    }
  }
}

// 16 float32 rounded to a 16-bit format (to nearest even, as to_bf16 / to_fp16) and stored.
// (GCC 12 takes the intrinsics' undefined pass-through operand for an uninitialised variable.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
CONCURDL_BF16_TARGET void store_16bit(Half format, std::uint16_t* dst, __m512 x) {
  __m256i h;
  if (format == Half::fp16) {
    h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
  } else {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan,
                              _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    h = _mm512_cvtepi32_epi16(r);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), h);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// sgd_update and sgd_update_scaled (ops.hpp) on 16 lanes, the same expressions, compiled for the
// kernel's target: a call to the templates with 512-bit arguments from here crosses an ABI that
// a build without -mavx512f does not have (Clang refuses it).
CONCURDL_BF16_TARGET inline void sgd_update16(__m512& p, __m512& v, __m512 g, float lr,
                                              float momentum, float weight_decay) {
  v = momentum * v + (g + weight_decay * p);
  p -= lr * v;
}
CONCURDL_BF16_TARGET inline void sgd_update16_scaled(__m512& p, __m512& v, __m512 sum, float scale,
                                                     float lr, float momentum, float weight_decay) {
  __m512 g = sum * scale;
  asm("" : "+v"(g));
  sgd_update16(p, v, g, lr, momentum, weight_decay);
}

// A whole tile's fused update: acc (+ C when not the first k block) times grad_scale applied to
// the parameters at offset `at`. Unscaled and scaled as two functions, as GEMM v4's epilogue has
// them as two loops (gemm_blocked.cpp).
template <bool Scaled>
CONCURDL_BF16_TARGET inline void apply_tile(const __m512 (&acc)[kMR][2], const float* c,
                                            std::size_t ldc, bool first, const GemmSgd& u,
                                            std::size_t at) {
  for (std::size_t r = 0; r < kMR; ++r)
    for (std::size_t v = 0; v < 2; ++v) {
      const std::size_t o = at + r * ldc + v * 16;
      __m512 x = acc[r][v];
      if (!first) x = _mm512_add_ps(x, _mm512_loadu_ps(c + r * ldc + v * 16));
      __m512 pv = _mm512_loadu_ps(u.params + o), vv = _mm512_loadu_ps(u.velocity + o);
      if constexpr (Scaled)
        sgd_update16_scaled(pv, vv, x, u.grad_scale, u.lr, u.momentum, u.weight_decay);
      else
        sgd_update16(pv, vv, x, u.lr, u.momentum, u.weight_decay);
      _mm512_storeu_ps(u.params + o, pv);
      _mm512_storeu_ps(u.velocity + o, vv);
      if (u.params16 != nullptr) store_16bit(u.params16_format, u.params16 + o, pv);
    }
}

// tile (kMR x kNR) of A panel . B panel over kc2 pairs; C's corner at c (rows x cols of it are
// real): written as beta C + tile when `first` (beta 0: not read), else C += tile. With sgd
// (the last k block of a fused update) the sum is not stored but applied to the parameters at
// offset `at` of sgd's buffers.
// Not InPlaceA: ap is a packed micro-panel (kMR words a pair). InPlaceA: ar is A itself, read in
// place: row r's pair q is ar[r lda + 2q] and the next (A not transposed, its pairs along k side
// by side; all kMR rows real), so that no pass copies A.
template <bool InPlaceA>
CONCURDL_BF16_TARGET void micro_kernel(const std::uint32_t* ap, const bf16* ar, std::size_t lda,
                                       const bf16* bp, std::size_t kc2, float* c, std::size_t ldc,
                                       std::size_t rows, std::size_t cols, bool first, float beta,
                                       const GemmSgd* sgd, std::size_t at) {
  __m512 acc[kMR][2];
#pragma GCC unroll 14
  for (std::size_t r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  // With sgd, the first 2 kMR pairs each ask for one line of the next tile's parameters and one
  // of its velocities (kNR columns on: the tile this thread takes next), as GEMM v4's kernel
  // does: the update's traffic (8 bytes read and written a parameter) otherwise waits on memory.
  // Two lines a pair: a weight gradient's k of 64 is 32 pairs, fewer than the 56 lines.
  const bool prefetch = sgd != nullptr;
  const auto next_p = reinterpret_cast<std::uintptr_t>(prefetch ? sgd->params + at + kNR : nullptr);
  const auto next_v =
      reinterpret_cast<std::uintptr_t>(prefetch ? sgd->velocity + at + kNR : nullptr);
  for (std::size_t q = 0; q < kc2; ++q) {
    if (prefetch && q < 2 * kMR) {  // row q / 2, its half q % 2 (64 bytes each)
      const std::uintptr_t off = ((q / 2) * ldc + (q % 2) * 16) * sizeof(float);
      __builtin_prefetch(reinterpret_cast<const void*>(next_p + off), 1, 3);
      __builtin_prefetch(reinterpret_cast<const void*>(next_v + off), 1, 3);
    }
    const __m512i b0 = _mm512_loadu_si512(bp + q * 2 * kNR);
    const __m512i b1 = _mm512_loadu_si512(bp + q * 2 * kNR + kNR);
#pragma GCC unroll 14
    for (std::size_t r = 0; r < kMR; ++r) {
      std::uint32_t word = 0;
      if constexpr (InPlaceA)
        std::memcpy(&word, ar + r * lda + 2 * q, sizeof word);  // 2-byte aligned as may be
      else
        word = ap[q * kMR + r];
      const __m512i av = _mm512_set1_epi32(static_cast<int>(word));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)av, (__m512bh)b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)av, (__m512bh)b1);
    }
  }
  if (sgd != nullptr && rows == kMR && cols == kNR) {
    if (sgd->grad_scale == 1.0f)
      apply_tile<false>(acc, c, ldc, first, *sgd, at);
    else
      apply_tile<true>(acc, c, ldc, first, *sgd, at);
    return;
  }
  if (rows == kMR && cols == kNR) {
    const __m512 vb = _mm512_set1_ps(beta);
    for (std::size_t r = 0; r < kMR; ++r)
      for (std::size_t v = 0; v < 2; ++v) {
        float* out = c + r * ldc + v * 16;
        __m512 x = acc[r][v];
        if (!first)
          x = _mm512_add_ps(x, _mm512_loadu_ps(out));
        else if (beta != 0.0f)
          x = _mm512_fmadd_ps(vb, _mm512_loadu_ps(out), x);
        _mm512_storeu_ps(out, x);
      }
    return;
  }
  alignas(64) float tile[kMR][kNR];
  for (std::size_t r = 0; r < kMR; ++r) {
    _mm512_store_ps(&tile[r][0], acc[r][0]);
    _mm512_store_ps(&tile[r][16], acc[r][1]);
  }
  if (sgd != nullptr) {
    for (std::size_t r = 0; r < rows; ++r) {
      if (!first)
        for (std::size_t j = 0; j < cols; ++j) tile[r][j] += c[r * ldc + j];
      detail::apply_sgd(*sgd, &tile[r][0], at + r * ldc, cols);
    }
    return;
  }
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) {
      float& out = c[r * ldc + j];
      out = !first ? out + tile[r][j] : (beta != 0.0f ? beta * out + tile[r][j] : tile[r][j]);
    }
}

// The blocked product (C = op(A) op(B) + beta C, or the fused update): per k block, A packed
// once for every row (row_blocks micro-panels; with a_in_place, A not transposed and k even, only
// a last short block: the full ones are read where they lie), then per n block the B panels, and
// every thread runs its rows' tiles against them.
void blocked(const bf16* a, std::size_t lda, bool ta, bool a_in_place, const bf16* b,
             std::size_t ldb, bool tb, std::size_t m, std::size_t n, std::size_t k, float beta,
             float* c, std::size_t ldc, const GemmSgd* sgd) {
  assert(!a_in_place || (!ta && k % 2 == 0));  // in place, a row's pairs are read as words
  const std::size_t row_blocks = (m + kMR - 1) / kMR;
  const int threads = std::max(1, compute_threads());
  const bool team = threads > 1 && (row_blocks > 1 || n > kNR);
  // The packing buffers are the calling thread's, kept between calls: a fresh allocation of
  // half a megabyte per call is page faults (and, freed again, TLB shootdowns across the team)
  // that cost as much as a whole call at n = 256.
  thread_local std::vector<std::uint32_t> apack;
  thread_local std::vector<bf16> bpack;
  if (apack.size() < row_blocks * kMR * (kKC / 2)) apack.resize(row_blocks * kMR * (kKC / 2));
  if (bpack.size() < (kNC / kNR) * kKC * kNR) bpack.resize((kNC / kNR) * kKC * kNR);
  // Inside the team, the names above would be each worker's own (empty) buffers: use these.
  std::uint32_t* const ap_all = apack.data();
  bf16* const bp_all = bpack.data();
  for (std::size_t p0 = 0; p0 < k; p0 += kKC) {
    const std::size_t kc = std::min(kKC, k - p0), kc2 = (kc + 1) / 2;
    const bool first = p0 == 0;
    const GemmSgd* const update = p0 + kc == k ? sgd : nullptr;  // the last k block applies it
#pragma omp parallel num_threads(threads) if (team)
    {
#pragma omp for schedule(static)
      for (std::size_t rb = 0; rb < row_blocks; ++rb)
        if (!a_in_place || m - rb * kMR < kMR)  // in place: only a last, short block is packed
          pack_a(a, lda, ta, k, rb * kMR, std::min(kMR, m - rb * kMR), p0, kc2,
                 ap_all + rb * kMR * kc2);
      for (std::size_t j0 = 0; j0 < n; j0 += kNC) {
        const std::size_t nc = std::min(kNC, n - j0), panels = (nc + kNR - 1) / kNR;
#pragma omp for schedule(static)
        for (std::size_t t = 0; t < panels; ++t)
          pack_b_panel(b, ldb, tb, k, p0, kc2, j0 + t * kNR, std::min(kNR, nc - t * kNR),
                       bp_all + t * kc2 * 2 * kNR);
          // (the implicit barrier: every panel is packed before any tile reads it)
          // The tiles, row block by row block, split evenly in that order: a thread's run of
          // tiles mostly shares one A micro-panel, and a short C (a batch of 64 rows is 5 row
          // blocks) still keeps every thread busy.
#pragma omp for collapse(2) schedule(static)
        for (std::size_t rb = 0; rb < row_blocks; ++rb)
          for (std::size_t t = 0; t < panels; ++t) {
            const std::size_t i0 = rb * kMR, rows = std::min(kMR, m - i0);
            const bf16* const bp = bp_all + t * kc2 * 2 * kNR;
            float* const ct = c + i0 * ldc + j0 + t * kNR;
            const std::size_t cols = std::min(kNR, nc - t * kNR), at = i0 * ldc + j0 + t * kNR;
            if (a_in_place && rows == kMR)
              micro_kernel<true>(nullptr, a + i0 * lda + p0, lda, bp, kc2, ct, ldc, rows, cols,
                                 first, beta, update, at);
            else
              micro_kernel<false>(ap_all + rb * kMR * kc2, nullptr, 0, bp, kc2, ct, ldc, rows, cols,
                                  first, beta, update, at);
          }
        // (and here: no thread packs the next block's panels while another still reads these)
      }
    }
  }
}

#endif
}  // namespace

void gemm_bf16(std::size_t m, std::size_t n, std::size_t k, const bf16* a, std::size_t lda,
               const bf16* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  gemm_bf16(Trans::no, Trans::no, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16(Trans trans_a, Trans trans_b, std::size_t m, std::size_t n, std::size_t k,
               const bf16* a, std::size_t lda, const bf16* b, std::size_t ldb, float beta, float* c,
               std::size_t ldc) {
  gemm_bf16(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, nullptr);
}

void gemm_bf16(Trans trans_a, Trans trans_b, std::size_t m, std::size_t n, std::size_t k,
               const bf16* a, std::size_t lda, const bf16* b, std::size_t ldb, float beta, float* c,
               std::size_t ldc, const GemmSgd* sgd) {
  const bool ta = trans_a == Trans::yes, tb = trans_b == Trans::yes;
  if (lda < (ta ? m : k) || ldb < (tb ? k : n) || ldc < n)
    throw std::invalid_argument("gemm_bf16: a leading dimension is smaller than its row (lda " +
                                std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                                std::to_string(ldc) + " for m " + std::to_string(m) + ", n " +
                                std::to_string(n) + ", k " + std::to_string(k) + ")");
  if (sgd != nullptr) {
    detail::check_sgd("gemm_bf16", *sgd, c);
    if (beta != 0.0f) throw std::invalid_argument("gemm_bf16: the fused sgd wants beta == 0");
  }
  require_bf16("gemm_bf16");
  if (m == 0 || n == 0) return;
#if CONCURDL_BF16_KERNEL
  if (k == 0) {  // C = beta C
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    if (sgd != nullptr)
      for (std::size_t i = 0; i < m; ++i) detail::apply_sgd(*sgd, c + i * ldc, i * ldc, n);
    return;
  }
  // A batch's forward product, X Wᵀ with few rows of X: computed as its transpose, W Xᵀ, with W
  // read in place as the A operand (no pass packs the weights but a last block of n mod 14 rows;
  // pack_b_panel's transpose packs X), into a buffer transposed back into C. Per element of C the
  // same pairs summed in the same order, the two factors of each exact product swapped: the same
  // bits as the direct product (for inputs that are not NaN: x86 keeps the first operand's NaN
  // payload). Only where: beta is 0 (no pass over C to add its term, and no element that one
  // route scales in a vector register and the other in scalar code); k is even (a row's last pair
  // is read whole); n >= kMR (a whole block of W's rows to read in place); and C's m rows pad
  // less in kNR-column panels than in kMR-row blocks (a batch of 64 fills two panels; as row
  // blocks it is five, the last with 8 of 14 rows real).
  const auto padded = [](std::size_t x, std::size_t to) { return (x + to - 1) / to * to; };
  if (!ta && tb && sgd == nullptr && beta == 0.0f && k % 2 == 0 && m <= kTransposedMaxM &&
      n >= kMR && padded(m, kNR) <= padded(m, kMR)) {
    thread_local std::vector<float> ct;
    if (ct.size() < n * m) ct.resize(n * m);
    float* const t = ct.data();
    blocked(b, ldb, false, true, a, lda, true, n, m, k, 0.0f, t, m, nullptr);
    detail::v4::transpose_back(t, m, c, ldc, 0, n, 0, m);  // GEMM v4's copy back of its own Cᵀ
    return;
  }
  blocked(a, lda, ta, false, b, ldb, tb, m, n, k, beta, c, ldc, sgd);
#else
  (void)a, (void)b, (void)c, (void)beta;
#endif
}

}  // namespace concurdl::kernels
