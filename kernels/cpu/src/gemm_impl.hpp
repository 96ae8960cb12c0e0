// Internal: the argument bundle the GEMM versions share, and element access through transposes.
#pragma once

#include <cstddef>

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
// A fused optimiser step (GemmSgd) over n gradients g of one row: sgd_update, element by element.
inline void apply_sgd(const GemmSgd& u, const float* g, float* p, float* v, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j)
    sgd_update(p[j], v[j], g[j], u.lr, u.momentum, u.weight_decay);
}
// g.epilogue (if any) over rows [i0, i1) and columns [j0, j1) of C.
void finish_c(const GemmArgs& g, std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1);

void gemm_v1(const GemmArgs& g);
void gemm_v2(const GemmArgs& g);
void gemm_v3(const GemmArgs& g);
void gemm_v4(const GemmArgs& g);

}  // namespace concurdl::kernels::detail
