// GEMM: dispatch, names, cost, and the OpenBLAS peer. The suite's versions live in
// gemm_simple.cpp (v1, v2), gemm_v3.cpp and gemm_blocked.cpp (v4).
#include "concurdl/kernels/gemm.hpp"

#include <cblas.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "concurdl/kernels/ops.hpp"
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

namespace {
void run_gemm(GemmVersion v, const detail::GemmArgs& g) {
  const std::size_t a_cols = g.ta == Trans::no ? g.k : g.m;
  const std::size_t b_cols = g.tb == Trans::no ? g.n : g.k;
  if ((a_cols > 0 && g.lda < a_cols) || (b_cols > 0 && g.ldb < b_cols) || (g.n > 0 && g.ldc < g.n))
    throw std::invalid_argument("gemm: a leading dimension is smaller than its row");
  if (g.epilogue != nullptr && g.epilogue->relu_of != nullptr && g.epilogue->ld_relu_of < g.n)
    throw std::invalid_argument(
        "gemm: the epilogue's relu_of has a leading dimension smaller "
        "than C's row");
  if (g.epilogue != nullptr && g.epilogue->sgd != nullptr) {
    const GemmEpilogue& e = *g.epilogue;
    detail::check_sgd("gemm", *e.sgd, g.c);
    if (e.bias != nullptr || e.relu || e.relu_of != nullptr)
      throw std::invalid_argument(
          "gemm: the epilogue's sgd replaces storing C; it cannot follow a bias or a ReLU");
    if (g.alpha != 1.0f || g.beta != 0.0f)
      throw std::invalid_argument("gemm: the epilogue's sgd wants alpha == 1 and beta == 0");
  }
  if (g.epilogue != nullptr &&
      (g.epilogue->c16 != nullptr) != (g.epilogue->c16_format != Half::none))
    throw std::invalid_argument("gemm: the epilogue needs c16 and c16_format together");
  if (g.epilogue != nullptr && g.epilogue->c16 != nullptr) {
    if (g.epilogue->sgd != nullptr)
      throw std::invalid_argument("gemm: the epilogue's c16 and sgd both replace storing C");
    if (static_cast<const void*>(g.epilogue->c16) == static_cast<const void*>(g.c))
      throw std::invalid_argument(
          "gemm: the epilogue's c16 is C itself (want a buffer of its own)");
  }
  if (g.half != Half::none && v != GemmVersion::v4_register)
    throw std::invalid_argument("gemm: 16-bit operands are GEMM v4's only");
  if (g.m == 0 || g.n == 0) return;
  switch (v) {
    case GemmVersion::v1_naive:
      detail::gemm_v1(g);
      break;
    case GemmVersion::v2_ikj:
      detail::gemm_v2(g);
      break;
    case GemmVersion::v3_blocked:
      detail::gemm_v3(g);
      break;
    case GemmVersion::v4_register:
      note_gemm_runtime(ThreadRuntime::openmp);
      return detail::gemm_v4(g);  // finishes each thread's share of C itself
    case GemmVersion::openblas:
      note_gemm_runtime(ThreadRuntime::openblas);
      if (g.k == 0) {
        detail::scale_c(g);  // some BLAS builds reject k == 0
        break;
      }
      cblas_sgemm(CblasRowMajor, g.ta == Trans::no ? CblasNoTrans : CblasTrans,
                  g.tb == Trans::no ? CblasNoTrans : CblasTrans, static_cast<int>(g.m),
                  static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, g.a,
                  static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta, g.c,
                  static_cast<int>(g.ldc));
      break;
    default:
      throw std::invalid_argument("gemm: unknown version");
  }
  detail::finish_c(g, 0, g.m, 0, g.n);
}
}  // namespace

void gemm(GemmVersion v, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
          float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
          float* c, std::size_t ldc) {
  run_gemm(v, {ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc});
}

void gemm(GemmVersion v, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
          float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
          float* c, std::size_t ldc, const GemmEpilogue& epilogue) {
  run_gemm(v, {ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &epilogue});
}

void gemm_16bit(Half format, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                const std::uint16_t* a, std::size_t lda, const std::uint16_t* b, std::size_t ldb,
                float beta, float* c, std::size_t ldc, const GemmEpilogue& epilogue) {
  if (format == Half::none)
    throw std::invalid_argument("gemm_16bit: the operands' format is none (want fp16 or bf16)");
  detail::GemmArgs g{ta, tb, m, n, k, 1.0f, nullptr, lda, nullptr, ldb, beta, c, ldc, &epilogue};
  g.half = format;
  g.a16 = a;
  g.b16 = b;
  run_gemm(GemmVersion::v4_register, g);
}

namespace detail {
void check_sgd(const char* who, const GemmSgd& u, const float* c) {
  const std::string w(who);
  if (u.params == nullptr || u.velocity == nullptr)
    throw std::invalid_argument(w + ": the epilogue's sgd has a null params or velocity");
  if (u.params == u.velocity || u.params == c || u.velocity == c)
    throw std::invalid_argument(
        w + ": the epilogue's sgd needs C, params and velocity in three separate buffers");
  if (!(u.grad_scale > 0.0f) || !std::isfinite(u.grad_scale))
    throw std::invalid_argument(w + ": the epilogue's sgd has grad_scale " +
                                std::to_string(u.grad_scale) + " (want a finite value > 0)");
  if ((u.params16 != nullptr) != (u.params16_format != Half::none))
    throw std::invalid_argument(w +
                                ": the epilogue's sgd needs params16 and params16_format together");
}

// ops.hpp's arithmetic (add_bias_rows' one add, relu, relu_grad), a row segment at a time in
// loops of its own: calling add_bias_rows and relu_* per row cost ~8 ns a call (their thread
// checks), ~3.5 us of a training step's ~450 calls on the Zen 5 guest.
void finish_c(const GemmArgs& g, std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1) {
  if (g.epilogue == nullptr || j0 >= j1) return;
  const GemmEpilogue& e = *g.epilogue;
  const std::size_t cols = j1 - j0;
  if (e.sgd != nullptr) {
    const GemmSgd u = *e.sgd;
    for (std::size_t i = i0; i < i1; ++i) apply_sgd(u, g.c + i * g.ldc + j0, i * g.ldc + j0, cols);
    return;
  }
  for (std::size_t i = i0; i < i1; ++i) {
    float* row = g.c + i * g.ldc + j0;
    if (e.bias != nullptr) {
      const float* b = e.bias + j0;
      if (e.relu)
        for (std::size_t j = 0; j < cols; ++j) row[j] = relu(row[j] + b[j]);
      else
        for (std::size_t j = 0; j < cols; ++j) row[j] += b[j];
    } else if (e.relu) {
      for (std::size_t j = 0; j < cols; ++j) row[j] = relu(row[j]);
    }
    if (e.relu_of != nullptr) {
      const float* act = e.relu_of + i * e.ld_relu_of + j0;
      for (std::size_t j = 0; j < cols; ++j) row[j] = relu_grad(act[j], row[j]);
    }
    if (e.c16 != nullptr) round_row(e.c16_format, row, e.c16 + i * g.ldc + j0, cols);
  }
}
}  // namespace detail

}  // namespace concurdl::kernels
