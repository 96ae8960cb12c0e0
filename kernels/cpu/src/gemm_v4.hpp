// Internal: GEMM v4's register tile and cache blocks, its vector type and the conversions of
// 16-bit operands, shared by its loops (gemm_blocked.cpp), micro-kernels (gemm_v4_kernel.hpp) and
// its packing and transposing (gemm_v4_pack.cpp).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/fp16.hpp"
#include "gemm_impl.hpp"

namespace concurdl::kernels::detail::v4 {

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
inline constexpr std::size_t kLanes = 16, kMR = 14, kNR = 32, kKC = 512, kNC = 256, kMC = 2016;
#elif defined(__AVX__)
inline constexpr std::size_t kLanes = 8, kMR = 6, kNR = 16, kKC = 256, kNC = 144, kMC = 4080;
#else
inline constexpr std::size_t kLanes = 4, kMR = 6, kNR = 8, kKC = 256, kNC = 128, kMC = 1020;
#endif
inline constexpr std::size_t kNV = kNR / kLanes;  // vectors per row of the tile
static_assert(kNR % kLanes == 0 && kMC % kMR == 0 && kNC % kNR == 0);

inline constexpr std::size_t ceil_div(std::size_t x, std::size_t d) { return (x + d - 1) / d; }

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

// A GCC/Clang vector extension: arithmetic on it is element-wise, `float * vec` broadcasts.
// Unaligned loads and stores go through memcpy, which compiles to one vector move.

using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));
inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
// A vector rounded to a 16-bit format (to nearest even) and stored: GemmSgd's params16. FP16
// straight from the register by VCVTPS2PH on the whole vector: through a buffer on the stack (a
// 64-byte store, then 32-byte loads of it) the wide MLP's second weight gradient (1M parameters,
// fused update) took 768 us a step in fp16, 693 this way, 633 in float32 (Zen 5 guest, 1 thread;
// a stalled store forwarding is the likely cause, not confirmed by a counter). bfloat16 by
// to_bf16's integer rounding on the vector's bits.
inline void store_16bit(Half format, std::uint16_t* p, Vec v) {
  if (format == Half::fp16) {
#if defined(__AVX512F__)
    static_assert(kLanes == 16);
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(p),
        _mm512_maskz_cvtps_ph(0xffff, std::bit_cast<__m512>(v), _MM_FROUND_TO_NEAREST_INT));
    return;
#elif defined(__F16C__) && defined(__AVX__)
    static_assert(kLanes == 8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(std::bit_cast<__m256>(v), _MM_FROUND_TO_NEAREST_INT));
    return;
#endif
  }
  if (format == Half::bf16) {
    using Bits = std::uint32_t __attribute__((vector_size(kLanes * sizeof(std::uint32_t))));
    Bits u = std::bit_cast<Bits>(v);
    const Bits nan = reinterpret_cast<Bits>((u & 0x7fffffffu) >
                                            0x7f800000u);  // all ones where a NaN: kept quiet
    const Bits rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    u = (nan & ((u >> 16) | 0x40u)) | (~nan & rounded);
    for (std::size_t i = 0; i < kLanes; ++i) p[i] = static_cast<std::uint16_t>(u[i]);
    return;
  }
  alignas(64) float x[kLanes];
  std::memcpy(x, &v, sizeof v);
  for (std::size_t i = 0; i < kLanes; ++i) p[i] = round_16bit(format, x[i]);
}

// Two vectors, 2 kLanes values, rounded to format F as store_16bit rounds each and stored:
// FP16 with AVX-512 as one 64-byte store of both halves. GEMM v4's c16 tiles store this way: the
// FP16 weight gradient of 256 x 784 (k = 64, 1 thread, Zen 5 guest, rounds interleaved in one
// process) took 111.5-112.6 us with a 32-byte store per vector against 105.8-107.8 storing
// float32 C, and 105.0-107.8 with these against 104.6-107.6. Why the narrower stores cost more
// is not known: more store-queue entries, or lines written in halves, are hypotheses no counter
// on that guest can test. The fused update's params16 keeps one store per
// vector: pairs there made the wide MLP's FP16 step 1.5-3% slower in three interleaved A/B runs.
// bfloat16 pairs are not measured here (this CPU rounds bf16 in gemm_bf16): two stores.
// (GCC 12 takes the intrinsics' undefined pass-through operand for an uninitialised variable.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <Half F>
inline void store_16bit_pair(std::uint16_t* p, Vec v0, Vec v1) {
#if defined(__AVX512F__)
  if constexpr (F == Half::fp16) {
    static_assert(kLanes == 16);
    const __m256i lo =
        _mm512_maskz_cvtps_ph(0xffff, std::bit_cast<__m512>(v0), _MM_FROUND_TO_NEAREST_INT);
    const __m256i hi =
        _mm512_maskz_cvtps_ph(0xffff, std::bit_cast<__m512>(v1), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_si512(p, _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1));
    return;
  }
#endif
  store_16bit(F, p, v0);
  store_16bit(F, p + kLanes, v1);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// A tile row's NV vectors rounded into 16 bits (format F) at p: two to a store where they pair.
template <Half F, std::size_t NV>
inline void store_row_16bit(std::uint16_t* p, const Vec (&row)[NV]) {
  std::size_t v = 0;
  for (; v + 2 <= NV; v += 2) store_16bit_pair<F>(p + v * kLanes, row[v], row[v + 1]);
  if (v < NV) store_16bit(F, p + v * kLanes, row[v]);
}

// A value of an operand widened (exactly) to float32: float32 as it is, fp16 by F16C's
// VCVTPH2PS where the build targets it, bf16 by a shift.
template <Half H, class T>
inline float get(const T* p) {
  if constexpr (H == Half::none) {
    return *p;
  } else if constexpr (H == Half::bf16) {
    return from_bf16(*p);
  } else {
#if defined(__F16C__)
    return _cvtsh_ss(*p);
#else
    return from_fp16(*p);
#endif
  }
}
// n consecutive values into floats, by vectors where the build has them.
template <Half H, class T>
inline void widen_run(const T* __restrict src, float* __restrict dst, std::size_t n) {
  if constexpr (H == Half::none) {
    std::memcpy(dst, src, n * sizeof(float));
  } else if constexpr (H == Half::bf16) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = from_bf16(src[i]);
  } else {
    std::size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i,
                       _mm512_maskz_cvtph_ps(
                           0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#endif
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
    for (; i < n; ++i) dst[i] = get<H>(src + i);
  }
}

// kLanes consecutive 16-bit values of format H widened (exactly) into a vector: a B read where
// it lies (read_b_directly) by the micro-kernel. The same values widen_run gives.
template <Half H>
inline Vec widen_vec(const std::uint16_t* src) {
#if defined(__AVX512F__)
  if constexpr (H == Half::fp16) {
    static_assert(kLanes == 16);
    return std::bit_cast<Vec>(
        _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))));
  }
#elif defined(__F16C__) && defined(__AVX__)
  if constexpr (H == Half::fp16) {
    static_assert(kLanes == 8);
    return std::bit_cast<Vec>(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
  }
#endif
  alignas(64) float x[kLanes];
  widen_run<H>(src, x, kLanes);
  Vec v;
  std::memcpy(&v, x, sizeof v);
  return v;
}

// op(A)[i0 .. i0+rows, p0 .. p0+kc] into one MR-row panel at dst (MR floats per p, rows past
// `rows` zero), and op(B)[p0 .. p0+kc, j0 .. j0+cols] into one NR-column panel (NR floats per p,
// columns past `cols` zero): gemm_v4_pack.cpp, for Trans::no and Trans::yes. H is the operands'
// storage: none reads g.a and g.b (float32), fp16 and bf16 read g.a16 and g.b16 and widen each
// value (exactly) as it is copied: the panels are float32 either way.
template <Trans TA, Half H>
void pack_a_panel(const GemmArgs& g, std::size_t i0, std::size_t rows, std::size_t p0,
                  std::size_t kc, float* __restrict dst);
template <Trans TB, Half H>
void pack_b_panel(const GemmArgs& g, std::size_t p0, std::size_t kc, std::size_t j0,
                  std::size_t cols, float* __restrict dst);

// C[j][i] = Ct[i][j] for i in [i0, i1), j in [j0, j1): Ct's rows are C's columns (the
// transposed shortcut's copy back).
void transpose_back(const float* ct, std::size_t ldt, float* c, std::size_t ldc, std::size_t i0,
                    std::size_t i1, std::size_t j0, std::size_t j1);

}  // namespace concurdl::kernels::detail::v4
