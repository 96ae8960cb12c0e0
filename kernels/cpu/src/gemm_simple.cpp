// GEMM v1 (naive i-j-k) and v2 (i-k-j, unit stride in the inner loop).
#include "gemm_impl.hpp"

namespace concurdl::kernels::detail {

void scale_c(const GemmArgs& g) {
  for (std::size_t i = 0; i < g.m; ++i) {
    float* row = g.c + i * g.ldc;
    if (g.beta == 0.0f) {
      for (std::size_t j = 0; j < g.n; ++j) row[j] = 0.0f;
    } else if (g.beta != 1.0f) {
      for (std::size_t j = 0; j < g.n; ++j) row[j] *= g.beta;
    }
  }
}

// v1: the textbook triple loop. For each C(i, j) a dot product of row i of A with column j of
// B; walking down a column of B jumps N floats per step.
void gemm_v1(const GemmArgs& g) {
  for (std::size_t i = 0; i < g.m; ++i)
    for (std::size_t j = 0; j < g.n; ++j) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < g.k; ++p) acc += g.A(i, p) * g.B(p, j);
      float& cij = g.c[i * g.ldc + j];
      cij = g.alpha * acc + (g.beta == 0.0f ? 0.0f : g.beta * cij);
    }
}

// v2: swap the two inner loops. Row i of C is scaled by beta, then for each p the row of B
// scaled by alpha * A(i, p) is added to it: the inner loop walks B and C along rows with unit
// stride, so the compiler vectorises it; A(i, p) is a scalar for the whole row. Nothing is
// reused beyond a row: all of B streams through the caches once per row of C. With op(B)
// transposed the inner loop walks down a column of the stored B again (stride ldb) — v2 is the
// lesson's step, v4 packs B to remove that case.
namespace {
template <Trans TA, Trans TB>
void v2_rows(const GemmArgs& g) {
  for (std::size_t i = 0; i < g.m; ++i) {
    float* __restrict crow = g.c + i * g.ldc;
    if (g.beta == 0.0f) {
      for (std::size_t j = 0; j < g.n; ++j) crow[j] = 0.0f;
    } else if (g.beta != 1.0f) {
      for (std::size_t j = 0; j < g.n; ++j) crow[j] *= g.beta;
    }
    for (std::size_t p = 0; p < g.k; ++p) {
      const float aip = g.alpha * (TA == Trans::no ? g.a[i * g.lda + p] : g.a[p * g.lda + i]);
      if constexpr (TB == Trans::no) {
        const float* __restrict brow = g.b + p * g.ldb;
        for (std::size_t j = 0; j < g.n; ++j) crow[j] += aip * brow[j];
      } else {
        for (std::size_t j = 0; j < g.n; ++j) crow[j] += aip * g.b[j * g.ldb + p];
      }
    }
  }
}
}  // namespace

void gemm_v2(const GemmArgs& g) {
  if (g.ta == Trans::no)
    g.tb == Trans::no ? v2_rows<Trans::no, Trans::no>(g) : v2_rows<Trans::no, Trans::yes>(g);
  else
    g.tb == Trans::no ? v2_rows<Trans::yes, Trans::no>(g) : v2_rows<Trans::yes, Trans::yes>(g);
}

}  // namespace concurdl::kernels::detail
