// Internal: the argument bundle the GEMM versions share, and element access through transposes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/fp16.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/ops.hpp"

namespace concurdl::kernels::detail {

struct GemmArgs {
  Trans ta, tb;
  std::size_t m, n, k;
  float alpha;
  const float* a;
  std::size_t lda;
  const float* b;
  std::size_t ldb;
  float beta;
  float* c;
  std::size_t ldc;
  const GemmEpilogue* epilogue = nullptr;  // v4 applies it itself, per thread
  // gemm_16bit's operands (v4 only): when `half` is not none, a16 and b16 replace a and b.
  Half half = Half::none;
  const std::uint16_t* a16 = nullptr;
  const std::uint16_t* b16 = nullptr;

  // op(A)(i, p) and op(B)(p, j)
  float A(std::size_t i, std::size_t p) const {
    return ta == Trans::no ? a[i * lda + p] : a[p * lda + i];
  }
  float B(std::size_t p, std::size_t j) const {
    return tb == Trans::no ? b[p * ldb + j] : b[j * ldb + p];
  }
};

// C = beta * C (beta == 0 writes zeros without reading C).
void scale_c(const GemmArgs& g);
// A 16-bit format's rounding of one float32 (to nearest even): GemmSgd's params16.
inline std::uint16_t round_16bit(Half format, float x) {
  return format == Half::bf16 ? to_bf16(x) : to_fp16(x);
}
// n floats rounded into a 16-bit format, a vector at a time (to_bf16 / to_fp16's bits).
inline void round_row(Half format, const float* in, std::uint16_t* out, std::size_t n) {
  if (format == Half::bf16)
    to_bf16(std::span<const float>(in, n), std::span<bf16>(out, n));
  else
    to_fp16(std::span<const float>(in, n), std::span<fp16>(out, n));
}
// std::invalid_argument, naming `who`, for a GemmSgd that cannot be applied to C.
void check_sgd(const char* who, const GemmSgd& u, const float* c);
// A fused optimiser step (GemmSgd) over n gradients g of one row, the parameters at offset `at`
// of u's buffers: sgd_update on g * grad_scale, element by element, and params16 when asked.
inline void apply_sgd(const GemmSgd& u, const float* g, std::size_t at, std::size_t n) {
  float* const p = u.params + at;
  float* const v = u.velocity + at;
  if (u.grad_scale == 1.0f)
    for (std::size_t j = 0; j < n; ++j)
      sgd_update(p[j], v[j], g[j], u.lr, u.momentum, u.weight_decay);
  else
    for (std::size_t j = 0; j < n; ++j)
      sgd_update_scaled(p[j], v[j], g[j], u.grad_scale, u.lr, u.momentum, u.weight_decay);
  if (u.params16 != nullptr)
    for (std::size_t j = 0; j < n; ++j) u.params16[at + j] = round_16bit(u.params16_format, p[j]);
}
// g.epilogue (if any) over rows [i0, i1) and columns [j0, j1) of C.
void finish_c(const GemmArgs& g, std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1);

void gemm_v1(const GemmArgs& g);
void gemm_v2(const GemmArgs& g);
void gemm_v3(const GemmArgs& g);
void gemm_v4(const GemmArgs& g);

}  // namespace concurdl::kernels::detail
