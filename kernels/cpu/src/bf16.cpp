// bfloat16 conversions and the AVX512_BF16 check (bf16.hpp); the GEMM is gemm_bf16.cpp, its
// peaks gemm_bf16_peak.cpp.
#include "concurdl/kernels/bf16.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "bf16_target.hpp"

namespace concurdl::kernels {

namespace {

// to_bf16(float) on a float's bits without its branch, so that the loops below vectorise: the
// same bits (round to nearest even, a NaN kept quiet).
inline bf16 round_bf16_bits(std::uint32_t u) {
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet = (u >> 16) | 0x40u;
  return static_cast<bf16>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

}  // namespace

void to_bf16(std::span<const float> in, std::span<bf16> out) {
  if (in.size() != out.size())
    throw std::invalid_argument("to_bf16: " + std::to_string(in.size()) + " floats into " +
                                std::to_string(out.size()) + " bfloat16s");
  const float* src = in.data();
  bf16* dst = out.data();
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::uint32_t u = 0;
    std::memcpy(&u, src + i, sizeof u);
    dst[i] = round_bf16_bits(u);
  }
}

void add_bf16(std::span<bf16> acc, std::span<const bf16> in) {
  if (in.size() != acc.size())
    throw std::invalid_argument("add_bf16: " + std::to_string(in.size()) + " bfloat16s into " +
                                std::to_string(acc.size()));
  // Widen (a shift), add in float32, round as to_bf16 above: one pass that vectorises.
  bf16* a = acc.data();
  const bf16* b = in.data();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float f = from_bf16(a[i]) + from_bf16(b[i]);
    std::uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    a[i] = round_bf16_bits(u);
  }
}

void from_bf16(std::span<const bf16> in, std::span<float> out) {
  if (in.size() != out.size())
    throw std::invalid_argument("from_bf16: " + std::to_string(in.size()) + " bfloat16s into " +
                                std::to_string(out.size()) + " floats");
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = from_bf16(in[i]);
}

namespace {

std::string check_bf16() {
#if CONCURDL_BF16_KERNEL
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0 || a < 7)
    return "not on this CPU: it reports no CPUID leaf 7, so no AVX-512";
  __get_cpuid(1, &a, &b, &c, &d);
  const unsigned eax1 = a;
  const unsigned family =
      ((eax1 >> 8) & 0xf) + (((eax1 >> 8) & 0xf) == 0xf ? (eax1 >> 20) & 0xff : 0);
  const unsigned model =
      ((eax1 >> 4) & 0xf) | ((((eax1 >> 8) & 0xf) >= 6 ? (eax1 >> 16) & 0xf : 0) << 4);
  const std::string cpu =
      "this CPU (family " + std::to_string(family) + " model " + std::to_string(model) + ")";
  const bool osxsave = (c & (1u << 27)) != 0;
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const bool f = (b & (1u << 16)) != 0, bw = (b & (1u << 30)) != 0, vl = (b & (1u << 31)) != 0;
  __get_cpuid_count(7, 1, &a, &b, &c, &d);
  const bool bf16 = (a & (1u << 5)) != 0;
  if (!f || !bw || !vl || !bf16)
    return "not on this CPU: " + cpu +
           " has no AVX512_BF16 (VDPBF16PS); Intel Cooper Lake, Sapphire Rapids and later "
           "Xeons, and AMD Zen 4 and later, have it";
  if (!osxsave) return "not on this CPU: " + cpu + "'s operating system does not enable XSAVE";
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xe6u) != 0xe6u)
    return "not on this CPU: the operating system does not enable the AVX-512 registers on " + cpu;
  return "";
#else
  return "not in this build: AVX512_BF16 kernels are built for x86-64 with GCC or Clang";
#endif
}

}  // namespace

const std::string& bf16_why_not() {
  static const std::string why = check_bf16();
  return why;
}

}  // namespace concurdl::kernels
