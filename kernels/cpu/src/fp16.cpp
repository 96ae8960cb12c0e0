// binary16 bulk conversions (fp16.hpp): F16C where the CPU has it, the scalar functions otherwise.
#include "concurdl/kernels/fp16.hpp"

#include <immintrin.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <stdexcept>
#include <string>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define CONCURDL_F16C_KERNEL 1
#define CONCURDL_F16C_TARGET __attribute__((target("avx,f16c")))
#else
#define CONCURDL_F16C_KERNEL 0
#endif

namespace concurdl::kernels {

namespace {

void check_sizes(const char* who, std::size_t in, std::size_t out) {
  if (in != out)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(in) + " values into " +
                                std::to_string(out));
}

#if CONCURDL_F16C_KERNEL
// A build for an AVX-512 CPU (-march) converts 16 values an instruction; F16C alone, 8.
CONCURDL_F16C_TARGET void narrow_f16c(const float* in, fp16* out, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + i),
        _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = to_fp16(in[i]);
}

CONCURDL_F16C_TARGET void widen_f16c(const fp16* in, float* out, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i,
                     _mm512_maskz_cvtph_ps(
                         0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
#endif
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = from_fp16(in[i]);
}

// acc[i] = round(widen(acc[i]) + widen(in[i])) in one pass: both widenings exact, the sum in
// float32, rounded to nearest even as narrow_f16c rounds.
CONCURDL_F16C_TARGET void add_f16c(fp16* acc, const fp16* in, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_maskz_cvtph_ps(
        0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)));
    const __m512 b =
        _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(acc + i),
        _mm512_maskz_cvtps_ph(0xffff, _mm512_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(acc + i),
                     _mm256_cvtps_ph(_mm256_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) acc[i] = to_fp16(from_fp16(acc[i]) + from_fp16(in[i]));
}
#endif

}  // namespace

bool have_f16c() {
#if CONCURDL_F16C_KERNEL
  // CPUID leaf 1: ECX bit 29 F16C, bit 28 AVX, bit 27 OSXSAVE; XGETBV: the OS saves the ymm
  // state (XCR0 bits 1 and 2). (Clang 14's __builtin_cpu_supports does not know "f16c".)
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    const unsigned need = (1u << 29) | (1u << 28) | (1u << 27);
    if ((c & need) != need) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0x6u) == 0x6u;
  }();
  return yes;
#else
  return false;
#endif
}

void to_fp16(std::span<const float> in, std::span<fp16> out) {
  check_sizes("to_fp16", in.size(), out.size());
#if CONCURDL_F16C_KERNEL
  if (have_f16c()) return narrow_f16c(in.data(), out.data(), in.size());
#endif
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_fp16(in[i]);
}

void from_fp16(std::span<const fp16> in, std::span<float> out) {
  check_sizes("from_fp16", in.size(), out.size());
#if CONCURDL_F16C_KERNEL
  if (have_f16c()) return widen_f16c(in.data(), out.data(), in.size());
#endif
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = from_fp16(in[i]);
}

void add_fp16(std::span<fp16> acc, std::span<const fp16> in) {
  check_sizes("add_fp16", in.size(), acc.size());
#if CONCURDL_F16C_KERNEL
  if (have_f16c()) return add_f16c(acc.data(), in.data(), in.size());
#endif
  for (std::size_t i = 0; i < in.size(); ++i)
    acc[i] = to_fp16(from_fp16(acc[i]) + from_fp16(in[i]));
}

bool all_finite_fp16(std::span<const fp16> v) {
  unsigned bad = 0;  // no early exit: the loop vectorises
  for (const fp16 h : v) bad |= (h & 0x7c00u) == 0x7c00u ? 1u : 0u;
  return bad == 0;
}

bool all_finite_bf16(std::span<const std::uint16_t> v) {
  unsigned bad = 0;
  for (const std::uint16_t b : v) bad |= (b & 0x7f80u) == 0x7f80u ? 1u : 0u;
  return bad == 0;
}

}  // namespace concurdl::kernels
