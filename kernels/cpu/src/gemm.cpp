// GEMM: dispatch, names, cost, and the OpenBLAS peer. The suite's versions live in
// gemm_simple.cpp (v1, v2) and gemm_blocked.cpp (v3, v4).
#include "concurdl/kernels/gemm.hpp"

#include <cblas.h>

#include <stdexcept>

#include "concurdl/kernels/threads.hpp"
#include "gemm_impl.hpp"

namespace concurdl::kernels {

namespace {
// In GemmVersion order: gemm_version_name indexes it.
constexpr GemmVariant kGemmRows[] = {
    {{"v1_naive",
      "i-j-k loops: each C(i,j) a dot product, the inner loop walking B down a column (stride "
      "N): a cache miss per multiply-add once B outgrows the cache; seconds a call at n = 1024"},
     GemmVersion::v1_naive,
     false},
    {{"v2_ikj",
      "i-k-j loops: the inner loop runs along rows of B and C, unit stride, so it vectorises; "
      "no reuse beyond one row"},
     GemmVersion::v2_ikj,
     false},
    {{"v3_blocked",
      "v2 over cache blocks: C in tiles whose A and B panels stay in cache, so a block of B is "
      "reused from L2"},
     GemmVersion::v3_blocked,
     false},
    {{"v4_register",
      "BLIS/GotoBLAS: A and B packed into panels, an MR x NR register tile of C kept in vector "
      "registers across the K loop, OpenMP over tiles: within reach of OpenBLAS"},
     GemmVersion::v4_register,
     true},
    {{"openblas", "cblas_sgemm: the peer every version is measured against"},
     GemmVersion::openblas,
     true},
};
constexpr VariantTable kGemmVariants{kGemmRows};
}  // namespace

const VariantTable<GemmVariant>& gemm_variants() { return kGemmVariants; }

std::string_view gemm_version_name(GemmVersion v) {
  return kGemmRows[static_cast<std::size_t>(v)].name;
}

bool parse_gemm_version(std::string_view name, GemmVersion& out) {
  const GemmVariant* row = kGemmVariants.lookup(name);
  if (row == nullptr) return false;
  out = row->version;
  return true;
}

const std::vector<GemmVersion>& gemm_versions() {
  static const std::vector<GemmVersion> all = [] {
    std::vector<GemmVersion> v;
    for (const GemmVariant& row : kGemmVariants) v.push_back(row.version);
    return v;
  }();
  return all;
}

Cost gemm_cost(std::size_t m, std::size_t n, std::size_t k, bool reads_c) {
  const double fm = static_cast<double>(m), fn = static_cast<double>(n),
               fk = static_cast<double>(k);
  Cost c;
  c.flops = 2 * fm * fn * fk;
  c.bytes = sizeof(float) * (fm * fk + fk * fn + fm * fn * (reads_c ? 2 : 1));
  return c;
}

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name == nullptr ? "unknown" : name;
}

bool openblas_core_is_generic() {
  static const bool generic = [] {
    const std::string core = openblas_core();
    const bool sse_only = core == "Prescott" || core == "Core2" || core == "Penryn" ||
                          core == "Dunnington" || core == "Nehalem" || core == "Atom" ||
                          core == "Katmai" || core == "Coppermine" || core == "Northwood";
    __builtin_cpu_init();
    return sse_only && __builtin_cpu_supports("avx2");
  }();
  return generic;
}

void gemm(GemmVersion v, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
          float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
          float* c, std::size_t ldc) {
  const std::size_t a_cols = ta == Trans::no ? k : m, b_cols = tb == Trans::no ? n : k;
  if ((a_cols > 0 && lda < a_cols) || (b_cols > 0 && ldb < b_cols) || (n > 0 && ldc < n))
    throw std::invalid_argument("gemm: a leading dimension is smaller than its row");
  if (m == 0 || n == 0) return;
  const detail::GemmArgs g{ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
  switch (v) {
    case GemmVersion::v1_naive:
      return detail::gemm_v1(g);
    case GemmVersion::v2_ikj:
      return detail::gemm_v2(g);
    case GemmVersion::v3_blocked:
      return detail::gemm_v3(g);
    case GemmVersion::v4_register:
      note_gemm_runtime(ThreadRuntime::openmp);
      return detail::gemm_v4(g);
    case GemmVersion::openblas:
      note_gemm_runtime(ThreadRuntime::openblas);
      if (k == 0) return detail::scale_c(g);  // some BLAS builds reject k == 0
      cblas_sgemm(CblasRowMajor, ta == Trans::no ? CblasNoTrans : CblasTrans,
                  tb == Trans::no ? CblasNoTrans : CblasTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                  static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
      return;
  }
  throw std::invalid_argument("gemm: unknown version");
}

}  // namespace concurdl::kernels
