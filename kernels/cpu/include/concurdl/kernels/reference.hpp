// The double-precision reference every GEMM version is checked against, and the checker.
// The reference accumulates exact float products in double (a float times a float fits a
// double's 53 bits), so its own error is ~k * 2^-53, far below any float kernel's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "concurdl/kernels/gemm.hpp"

namespace concurdl::kernels {

struct GemmReference {
  std::size_t m = 0, n = 0;
  std::vector<double> value;      // alpha * op(A) op(B) + beta * C0, m x n, row-major (ld n)
  std::vector<double> tolerance;  // per element: how far a correct float GEMM may be from value
};

// Same arguments as gemm(); c0 is C before the call (read only when beta != 0, may then be
// null when beta == 0). Throws std::invalid_argument on a bad leading dimension.
GemmReference reference_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                             float alpha, const float* a, std::size_t lda, const float* b,
                             std::size_t ldb, float beta, const float* c0, std::size_t ldc);

// "" when every element of C (m x n, leading dimension ldc) is within its tolerance of the
// reference; else a message naming the worst element (the largest error / tolerance), its
// value, the reference, the tolerance, and how many elements are outside. NaN is always wrong
// (unless the reference is NaN too).
std::string check_gemm(const GemmReference& ref, const float* c, std::size_t ldc);

}  // namespace concurdl::kernels
