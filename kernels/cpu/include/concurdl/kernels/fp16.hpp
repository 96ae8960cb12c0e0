// IEEE 754 binary16 ("half", FP16) on the CPU: the format, and bulk conversions on F16C's
// VCVTPS2PH / VCVTPH2PS where the CPU has them.
//
// FP16 keeps 10 explicit mantissa bits (3 more than bfloat16) but only 5 exponent bits: the
// largest finite value is 65504 and the smallest normal 2^-14 (subnormals down to 2^-24). A
// gradient of 1e-8 is zero in FP16 and a scaled one past 65504 is infinite, which is why
// training that stores gradients in FP16 multiplies the loss by a scale and checks for overflow
// (Micikevicius et al., "Mixed Precision Training", ICLR 2018). The CPUs this suite meets convert
// FP16 (F16C, since Ivy Bridge and Piledriver) but only Sapphire Rapids and later Xeons compute
// in it (AVX512_FP16): here FP16 is a storage format, widened to float32 for arithmetic.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

namespace concurdl::kernels {

using fp16 = std::uint16_t;  // the bits of a binary16

// float32 -> binary16, rounding to nearest, ties to even (as VCVTPS2PH with imm 0 does): values
// from 65520 up become infinity, values below 2^-14 become subnormals or zero, a NaN stays a
// quiet NaN, signed zeros are kept.
inline fp16 to_fp16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return static_cast<fp16>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (u >= 0x477ff000u) return static_cast<fp16>(sign | 0x7c00u);  // 65520: the tie to 2^16
  if (u >= 0x38800000u) {                                          // normal: 2^-14 and up
    u += 0xfffu + ((u >> 13) & 1u);
    return static_cast<fp16>(sign | ((u - 0x38000000u) >> 13));  // exponent rebiased 127 -> 15
  }
  // Subnormal or zero: adding 0.5 rounds |f| to a multiple of 2^-24 (0.5's ulp), to even; the
  // low bits of the sum are then the half's mantissa (0x400: the smallest normal, rounded up).
  float a = 0;
  std::memcpy(&a, &u, sizeof a);
  const float r = a + 0.5f;
  std::uint32_t ru = 0;
  std::memcpy(&ru, &r, sizeof ru);
  return static_cast<fp16>(sign | (ru - 0x3f000000u));
}

// binary16 -> float32: exact.
inline float from_fp16(fp16 h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  std::uint32_t u = 0;
  if (e == 0x1f) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e == 0) {  // zero or subnormal: m x 2^-24, exact in float32
    const float f = static_cast<float>(m) * 5.9604644775390625e-8f;
    std::memcpy(&u, &f, sizeof u);
    u |= sign;
  } else {
    u = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Element-wise over spans of one size (else std::invalid_argument), on F16C eight at a time
// where the CPU has it (sixteen, by the AVX-512 forms, in a build for an AVX-512 CPU) (the same
// bits as the scalar functions above).
void to_fp16(std::span<const float> in, std::span<fp16> out);
void from_fp16(std::span<const fp16> in, std::span<float> out);
bool have_f16c();
// acc[i] = to_fp16(from_fp16(acc[i]) + from_fp16(in[i])) in one pass (the sum in float32): the
// 16-bit all-reduce's add.
void add_fp16(std::span<fp16> acc, std::span<const fp16> in);

// Whether every value is finite (no infinity, no NaN): the overflow check of loss scaling.
bool all_finite_fp16(std::span<const fp16> v);
bool all_finite_bf16(std::span<const std::uint16_t> v);

}  // namespace concurdl::kernels
