// bfloat16 on the CPU: the format, and a GEMM on AVX512_BF16's VDPBF16PS where the CPU has it.
//
// bfloat16 (Kalamkar et al., "A Study of BFLOAT16 for Deep Learning Training", 2019) is the top
// half of a float32: the same sign and 8-bit exponent (the same range, so no loss scaling is
// needed to keep gradients from underflowing), 7 explicit mantissa bits instead of 23 (about 3
// significant decimal digits). Half the bytes of every tensor and message; the product of two
// bfloat16 values is exact in float32 (8 x 8 significant bits fit in 24), so a GEMM that
// accumulates in float32 loses only what rounding its inputs lost.
//
// VDPBF16PS (Intel, "Intel 64 and IA-32 Architectures Software Developer's Manual", vol. 2; on
// Cooper Lake, Sapphire Rapids and later Xeons, and AMD Zen 4 and later) multiplies pairs of
// bfloat16 values and adds both products to a float32 lane: 16 lanes x 2 products, 64 flops per
// 512-bit instruction against 32 for a float32 FMA. It flushes denormal inputs and results to
// zero and rounds to nearest even. Whether the CPU has it is read at run time (CPUID, and XGETBV
// for the operating system's support of the 512-bit registers); the kernels are compiled for it
// whatever -march says, and called only when it is there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "concurdl/kernels/gemm.hpp"

namespace concurdl::kernels {

using bf16 = std::uint16_t;  // the bits of a bfloat16

// float32 -> bfloat16, rounding to nearest, ties to even; a NaN stays a (quiet) NaN, infinities
// and signed zeros are kept, values past the largest bfloat16 round to infinity.
inline bf16 to_bf16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16>(u >> 16);
}

// bfloat16 -> float32: exact.
inline float from_bf16(bf16 b) {
  const std::uint32_t u = std::uint32_t{b} << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Element-wise over spans of one size (else std::invalid_argument).
void to_bf16(std::span<const float> in, std::span<bf16> out);
void from_bf16(std::span<const bf16> in, std::span<float> out);
// acc[i] = to_bf16(from_bf16(acc[i]) + from_bf16(in[i])) in one pass (the sum in float32): the
// 16-bit all-reduce's add.
void add_bf16(std::span<bf16> acc, std::span<const bf16> in);

// "" when this CPU runs AVX512_BF16 (and AVX512F/BW/VL, with the 512-bit state enabled by the
// operating system) and this build can emit it; else one line saying what is missing, naming the
// CPU: "not on this CPU: ... has no AVX512_BF16 (VDPBF16PS) ...". Computed once.
const std::string& bf16_why_not();
inline bool have_bf16() { return bf16_why_not().empty(); }

// C (m x n, float32, row stride ldc) = A B + beta C, with A (m x k) and B (k x n) bfloat16,
// row-major with row strides lda >= k and ldb >= n. Products exact, sums in float32 a pair of
// products at a time (VDPBF16PS), over k in order within blocks of 512. beta == 0: C is
// written, never read. On compute_threads() threads (tiles of C split between them). Throws
// std::runtime_error(bf16_why_not()) on a CPU without AVX512_BF16, std::invalid_argument on a
// leading dimension smaller than its row.
void gemm_bf16(std::size_t m, std::size_t n, std::size_t k, const bf16* a, std::size_t lda,
               const bf16* b, std::size_t ldb, float beta, float* c, std::size_t ldc);
// The same with op(A) and op(B), as kernels::gemm takes them: A stored k x m (lda >= m) when
// trans_a, B stored n x k (ldb >= k) when trans_b. A layer's three GEMMs are (no, yes) forward,
// (yes, no) for the weight gradient and (no, no) for the input gradient. The transposes cost
// only in the packing (a few percent of a call); the tiles are the same. (no, yes) with beta 0,
// k even, n >= 14 and at most 128 rows of A (where 32-row panels pad A's rows less than 14-row
// blocks: m = 29-32, 57-64, 85-96, 127-128) runs as its transpose, B read in place: the same bits
// for inputs that are not NaN.
void gemm_bf16(Trans trans_a, Trans trans_b, std::size_t m, std::size_t n, std::size_t k,
               const bf16* a, std::size_t lda, const bf16* b, std::size_t ldb, float beta, float* c,
               std::size_t ldc);
// The same with a fused optimiser step instead of storing C (gemm.hpp's GemmSgd: C is the
// gradient of sgd->params, laid out as C; beta must be 0): each tile's products, times
// grad_scale, applied to params and velocity while they are in registers, and params16 written
// when asked. The bits of the product stored in C followed by sgd_update over it where the build
// contracts multiply-adds as the kernel does (a build for a CPU with FMA, as -march=native is
// here); in a build without FMA the caller's sgd_update is not contracted and the kernel's is,
// so they agree within those roundings.
void gemm_bf16(Trans trans_a, Trans trans_b, std::size_t m, std::size_t n, std::size_t k,
               const bf16* a, std::size_t lda, const bf16* b, std::size_t ldb, float beta, float* c,
               std::size_t ldc, const GemmSgd* sgd);

// The BF16 peak: flop/s of independent VDPBF16PS chains in registers (no memory traffic) on
// `threads` threads for about `seconds`, 64 flops an instruction. The ceiling gemm_bf16 is read
// against, as calibrate/fma_peak is float32's. Throws as gemm_bf16 does.
double bf16_peak_flops(int threads, double seconds = 0.2);
// The same measurement with float32 FMAs (VFMADD on 512-bit registers where the CPU has AVX-512,
// else the widest the build targets): 2 flops a lane an instruction. The BF16 GEMM's experiment
// reads each precision against its own peak, both measured alike in the same run.
double fp32_peak_flops(int threads, double seconds = 0.2);

}  // namespace concurdl::kernels
