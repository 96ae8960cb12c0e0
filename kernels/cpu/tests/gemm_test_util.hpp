// Internal to the GEMM tests (test_gemm.cpp, test_gemm_epilogue.cpp): a case's shape and
// operands, with NaN in A's and B's padding and a sentinel in C's.
#pragma once

#include <cstddef>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"

namespace concurdl::kernels::gemm_test {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 12345.0f;  // in C's padding: a kernel must never write there

// Restores the thread setting a test changes, so that other tests see the default.
struct ThreadsGuard {
  int saved = compute_threads();
  ~ThreadsGuard() { set_compute_threads(saved); }
};

struct Case {
  std::size_t m, n, k;
  Trans ta = Trans::no, tb = Trans::no;
  float alpha = 1.0f, beta = 0.0f;
  std::size_t pad = 0;  // leading dimension = row length + pad

  std::string describe() const {
    char s[160];
    std::snprintf(s, sizeof s, "m=%zu n=%zu k=%zu ta=%d tb=%d alpha=%g beta=%g pad=%zu", m, n, k,
                  ta == Trans::yes, tb == Trans::yes, alpha, beta, pad);
    return s;
  }
};

// Operands of a case: A, B with NaN in their padding (a kernel reading it poisons C), C with
// NaN everywhere when beta == 0 (it must not be read) and the sentinel in its padding.
struct Operands {
  std::size_t lda, ldb, ldc;
  std::vector<float> a, b, c, c0;
};

inline Operands make_operands(const Case& t, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t a_rows = t.ta == Trans::no ? t.m : t.k, a_cols = t.ta == Trans::no ? t.k : t.m;
  const std::size_t b_rows = t.tb == Trans::no ? t.k : t.n, b_cols = t.tb == Trans::no ? t.n : t.k;
  Operands o;
  o.lda = a_cols + t.pad;
  o.ldb = b_cols + t.pad;
  o.ldc = t.n + t.pad;
  auto fill = [&](std::vector<float>& x, std::size_t rows, std::size_t cols, std::size_t ld,
                  float pad_value, bool values) {
    x.assign(rows * ld, pad_value);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) x[i * ld + j] = values ? dist(rng) : kNaN;
  };
  fill(o.a, a_rows, a_cols, o.lda, kNaN, true);
  fill(o.b, b_rows, b_cols, o.ldb, kNaN, true);
  fill(o.c, t.m, t.n, o.ldc, kSentinel, t.beta != 0.0f);
  o.c0 = o.c;
  return o;
}

}  // namespace concurdl::kernels::gemm_test
