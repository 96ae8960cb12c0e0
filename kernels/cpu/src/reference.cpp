// The double-precision GEMM reference and the checker (reference.hpp).
//
// Tolerance. A float GEMM computes each C(i, j) from k products by some order of float
// additions (the order is the kernel's business: blocked, FMA-fused, split across vector
// lanes). For any order, the standard error bound for a sum of k products in float is
//   |computed - exact| <= gamma_k * sum_p |A(i, p)| |B(p, j)|,  gamma_k = k u / (1 - k u),
// with u = 2^-24 the unit roundoff (Higham, Accuracy and Stability of Numerical Algorithms,
// 3.1). alpha, beta * C0 and the final addition add at most three more roundings, so we allow
//   tol(i, j) = (k + 3) u (|alpha| S(i, j) + |beta| |C0(i, j)|) (1 + 1e-3) + 1e-30,
// where S(i, j) = sum_p |A(i, p) B(p, j)|, computed exactly enough in double. It is a bound, not
// an estimate: no correct kernel fails it, whatever its summation order. A wrong kernel (a term
// dropped or doubled, a transposed index, a stale C) is off by about one product or more,
// S / k on average, which exceeds the bound while k^2 u < 1, i.e. k < ~4000 (all the sizes the
// suite uses). The 1e-30 absolute floor covers elements whose exact value is 0.
#include "concurdl/kernels/reference.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace concurdl::kernels {

GemmReference reference_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                             float alpha, const float* a, std::size_t lda, const float* b,
                             std::size_t ldb, float beta, const float* c0, std::size_t ldc) {
  const std::size_t a_cols = ta == Trans::no ? k : m, b_cols = tb == Trans::no ? n : k;
  if ((a_cols > 0 && lda < a_cols) || (b_cols > 0 && ldb < b_cols) || (n > 0 && ldc < n))
    throw std::invalid_argument("reference_gemm: a leading dimension is smaller than its row");
  if (beta != 0.0f && c0 == nullptr && m > 0 && n > 0)
    throw std::invalid_argument("reference_gemm: beta != 0 needs C0");

  // op(B) as a dense k x n double matrix: the inner loop below walks it with unit stride.
  std::vector<double> bd(k * n);
  for (std::size_t p = 0; p < k; ++p)
    for (std::size_t j = 0; j < n; ++j)
      bd[p * n + j] = tb == Trans::no ? b[p * ldb + j] : b[j * ldb + p];

  GemmReference ref;
  ref.m = m;
  ref.n = n;
  ref.value.assign(m * n, 0.0);
  ref.tolerance.assign(m * n, 0.0);
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double scale = static_cast<double>(k + 3) * u * (1 + 1e-3);
  const double da = alpha, db = beta;
  // Rows are independent: any thread count gives the same values.
#pragma omp parallel for schedule(static) if (static_cast <double>(m) * n * k > 1e7)
  for (std::size_t i = 0; i < m; ++i) {
    double* val = ref.value.data() + i * n;
    double* tol = ref.tolerance.data() + i * n;
    for (std::size_t p = 0; p < k; ++p) {
      const double aip = ta == Trans::no ? a[i * lda + p] : a[p * lda + i];
      const double* brow = bd.data() + p * n;
      for (std::size_t j = 0; j < n; ++j) {
        const double prod = aip * brow[j];  // exact: 24-bit x 24-bit significands
        val[j] += prod;
        tol[j] += std::fabs(prod);
      }
    }
    for (std::size_t j = 0; j < n; ++j) {
      const double cij = db == 0.0 ? 0.0 : static_cast<double>(c0[i * ldc + j]);
      val[j] = da * val[j] + (db == 0.0 ? 0.0 : db * cij);
      tol[j] = scale * (std::fabs(da) * tol[j] + std::fabs(db) * std::fabs(cij)) + 1e-30;
    }
  }
  return ref;
}

std::string check_gemm(const GemmReference& ref, const float* c, std::size_t ldc) {
  std::size_t bad = 0, worst_i = 0, worst_j = 0;
  double worst_ratio = -1;
  for (std::size_t i = 0; i < ref.m; ++i)
    for (std::size_t j = 0; j < ref.n; ++j) {
      const double want = ref.value[i * ref.n + j], got = c[i * ldc + j];
      const double err = std::fabs(got - want), tol = ref.tolerance[i * ref.n + j];
      if (std::isnan(want) && std::isnan(got)) continue;
      // NaN compares false: a NaN or infinite result is outside any tolerance
      const double ratio = std::isfinite(err) ? err / tol : std::numeric_limits<double>::infinity();
      if (!(err <= tol)) ++bad;
      if (ratio > worst_ratio) worst_ratio = ratio, worst_i = i, worst_j = j;
    }
  if (bad == 0) return "";
  const std::size_t w = worst_i * ref.n + worst_j;
  char msg[320];
  std::snprintf(msg, sizeof msg,
                "C(%zu, %zu) = %.9g but the double reference is %.9g: |error| %.3g > tolerance "
                "%.3g; %zu of %zu elements outside the tolerance",
                worst_i, worst_j, static_cast<double>(c[worst_i * ldc + worst_j]), ref.value[w],
                std::fabs(c[worst_i * ldc + worst_j] - ref.value[w]), ref.tolerance[w], bad,
                ref.m * ref.n);
  return msg;
}

}  // namespace concurdl::kernels
