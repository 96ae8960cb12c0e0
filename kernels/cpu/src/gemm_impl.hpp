// Internal: the argument bundle the GEMM versions share, and element access through transposes.
#pragma once

#include <cstddef>

#include "concurdl/kernels/gemm.hpp"

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
// g.epilogue (if any) over rows [i0, i1) and columns [j0, j1) of C.
void finish_c(const GemmArgs& g, std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1);

void gemm_v1(const GemmArgs& g);
void gemm_v2(const GemmArgs& g);
void gemm_v3(const GemmArgs& g);
void gemm_v4(const GemmArgs& g);

}  // namespace concurdl::kernels::detail
