// The BF16 GEMM (bf16.hpp) beside the float32 ones:
//   concurdl run kernels/gemm_bf16   bf16 (VDPBF16PS, float32 sums), v4 and OpenBLAS in float32,
//                                    square n = 256 .. 1024 (2048 full) on all cores: FLOP/s,
//                                    and each against its own precision's peak, both peaks
//                                    measured alike in the same trial (bf16_peak_flops,
//                                    fp32_peak_flops)
// Each version is checked before and after it is timed: the float32 ones against the double
// reference of their inputs, the bf16 one against the double reference of its inputs rounded to
// bfloat16 (what it was given; the rounding itself is the format's, not the kernel's error).
// Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16 (no sbgemm), so no BF16 peer runs
// here; on a CPU without AVX512_BF16 the bf16 row is left out, and its records say why.
#include <fmt/format.h>

#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/reference.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl;
using kernels::GemmVersion;
using kernels::Trans;

constexpr std::int64_t kMaxN = 8192;

struct Inputs {
  std::size_t n = 0;
  std::vector<float> a, b;              // float32, in [-1, 1)
  std::vector<kernels::bf16> a16, b16;  // the same rounded to bfloat16
  kernels::GemmReference ref, ref16;    // of a, b; of a16, b16 (as floats)
};

const Inputs& inputs_for(GroupCache& cache, std::size_t n) {
  return cache.get<Inputs>(fmt::format("gemm_bf16 {}", n), [n] {
    Inputs in;
    in.n = n;
    std::mt19937 rng(2024);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    in.a.resize(n * n);
    in.b.resize(n * n);
    for (float& x : in.a) x = dist(rng);
    for (float& x : in.b) x = dist(rng);
    in.a16.resize(n * n);
    in.b16.resize(n * n);
    kernels::to_bf16(in.a, in.a16);
    kernels::to_bf16(in.b, in.b16);
    std::vector<float> a(n * n), b(n * n);
    kernels::from_bf16(in.a16, a);
    kernels::from_bf16(in.b16, b);
    in.ref = kernels::reference_gemm(Trans::no, Trans::no, n, n, n, 1.0f, in.a.data(), n,
                                     in.b.data(), n, 0.0f, nullptr, n);
    in.ref16 = kernels::reference_gemm(Trans::no, Trans::no, n, n, n, 1.0f, a.data(), n, b.data(),
                                       n, 0.0f, nullptr, n);
    return in;
  });
}

struct RestoreThreads {
  int saved = kernels::compute_threads();
  ~RestoreThreads() { kernels::set_compute_threads(saved); }
};

// The own precision's peak at `threads`, measured once per run and thread count.
double own_peak(GroupCache& cache, bool bf16, int threads) {
  return cache.get<double>(fmt::format("peak {} {}", bf16 ? "bf16" : "fp32", threads), [=] {
    kernels::ComputeThreadsScope scope(threads);
    return bf16 ? kernels::bf16_peak_flops(threads) : kernels::fp32_peak_flops(threads);
  });
}

const std::vector<Metric> kMetrics = {
    {"own_peak_flops", "FLOP/s", false,
     "the peak of the row's precision on its threads, measured in this run: VDPBF16PS chains "
     "(64 flops an instruction) for bf16, FMA chains for float32"},
};

Trial bf16_trial(const Params& p, GroupCache& cache) {
  const std::string variant = param_str(p, "variant");
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  const int threads = static_cast<int>(param_int(p, "threads"));
  cache.get<RestoreThreads>("restore threads", [] { return RestoreThreads{}; });
  const bool bf16 = variant == "bf16";
  GemmVersion v = GemmVersion::openblas;
  if (!bf16 && !kernels::parse_gemm_version(variant, v))
    throw UsageError(
        fmt::format("parameter 'variant': '{}' is not bf16, v4_register or openblas", variant));
  if (bf16 && !kernels::have_bf16()) throw UsageError("variant bf16: " + kernels::bf16_why_not());
  const Inputs& in = inputs_for(cache, n);
  const double peak = own_peak(cache, bf16, threads);
  auto c = std::make_shared<std::vector<float>>(n * n);
  Trial t;
  // The bf16 kernel and v4 run on an OpenMP team, OpenBLAS on its own pool: each waits (untimed)
  // for the other's spinning workers to stop (settle_runtime).
  const auto runtime = !bf16 && v == GemmVersion::openblas ? kernels::ThreadRuntime::openblas
                                                           : kernels::ThreadRuntime::openmp;
  t.reset = [c, threads, runtime] {
    kernels::set_compute_threads(threads);
    kernels::settle_runtime(runtime);
    std::fill(c->begin(), c->end(), std::numeric_limits<float>::quiet_NaN());
  };
  const std::size_t calls = n >= 512 ? 1 : (512 / n) * (512 / n) * (512 / n);
  if (bf16)
    t.run = [c, n, calls, &in] {
      for (std::size_t i = 0; i < calls; ++i)
        kernels::gemm_bf16(n, n, n, in.a16.data(), n, in.b16.data(), n, 0.0f, c->data(), n);
    };
  else
    t.run = [c, v, n, calls, &in] {
      for (std::size_t i = 0; i < calls; ++i)
        kernels::gemm(v, Trans::no, Trans::no, n, n, n, 1.0f, in.a.data(), n, in.b.data(), n, 0.0f,
                      c->data(), n);
    };
  t.check = [c, n, bf16, &in] {
    return kernels::check_gemm(bf16 ? in.ref16 : in.ref, c->data(), n);
  };
  t.observe = [peak](Sample& s) { s.metrics["own_peak_flops"] = peak; };
  const kernels::Cost cost = kernels::gemm_cost(n, n, n, /*reads_c=*/false);
  // bfloat16 inputs are half the bytes.
  t.work = {.bytes = cost.bytes * static_cast<double>(calls) * (bf16 ? 0.5 : 1.0),
            .flops = cost.flops * static_cast<double>(calls)};
  if (calls > 1) t.notes["calls_per_run"] = std::to_string(calls);
  if (v == GemmVersion::openblas && !bf16) t.notes["openblas_core"] = kernels::openblas_core();
  return t;
}

// fraction_of_own_peak: FLOP/s over the row's own precision's peak.
void derive_own_peak(const Params&, const Work& w, Record& r) {
  const auto it = r.metrics.find("own_peak_flops");
  if (it == r.metrics.end() || r.stats.median <= 0 || !(it->second.stats.median > 0)) return;
  r.derived["fraction_of_own_peak"] = w.flops / r.stats.median / it->second.stats.median;
}

std::vector<std::string> variants() {
  std::vector<std::string> v;
  if (kernels::have_bf16()) v.emplace_back("bf16");
  v.emplace_back("v4_register");
  v.emplace_back("openblas");
  return v;
}

const bool registered = [] {
  const std::string all_cores =
      std::to_string(std::min<std::int64_t>(hardware_threads(), kMaxThreads));
  register_experiment({
      .id = "kernels/gemm_bf16",
      .chapter = "kernels",
      .title = "GEMM in bfloat16 (VDPBF16PS, float32 sums) beside float32 v4 and OpenBLAS: "
               "FLOP/s and the fraction of each precision's own peak",
      .axes = {{.name = "variant", .values = variants()},
               {"n", {"256", "512", "1024", "2048"}, {"256", "512", "1024"}, AxisKind::size, kMaxN},
               {"threads", {all_cores}, {}, AxisKind::count, kMaxThreads}},
      .baseline = {{"variant", "openblas"}},
      .metrics = kMetrics,
      .derive = derive_own_peak,
      .prepare = bf16_trial,
      .figures = {{.id = "gflops",
                   .title = "GEMM FLOP/s vs n: bfloat16 and float32 (all cores)",
                   .x = "n",
                   .y = "flops_per_s",
                   .series = "variant",
                   .log_x = true,
                   .y_label = "FLOP/s"},
                  {.id = "fraction_of_own_peak",
                   .title = "GEMM FLOP/s over its own precision's measured peak",
                   .x = "n",
                   .y = "fraction_of_own_peak",
                   .series = "variant",
                   .log_x = true,
                   .y_label = "fraction of the precision's peak"}},
      .derived = {"fraction_of_own_peak"},
      .claims = {{.id = "bf16_vs_openblas",
                  // Magnitude: VDPBF16PS's rate against the FMA's is the CPU's (2x the flops an
                  // instruction; what the core issues per cycle differs by design).
                  .statement =
                      "At n = 1024 on all cores, how many times as many FLOP/s the bfloat16 "
                      "GEMM runs as OpenBLAS's float32 one",
                  .select = {{"variant", "bf16"}, {"n", "1024"}},
                  .versus = {{"variant", "openblas"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::vector_isa, ClaimCause::peer_kernels},
                  .unit = "×",
                  .cpu_feature = "avx512_bf16"},
                 {.id = "bf16_fraction_of_own_peak",
                  // Magnitude: how close the micro-kernel comes to VDPBF16PS's rate depends on the
                  // caches and the core (the tile and blocks are GEMM v4's, tuned for float32).
                  .statement =
                      "At n = 1024 on all cores, the fraction of the measured VDPBF16PS peak "
                      "the bfloat16 GEMM reaches",
                  .select = {{"variant", "bf16"}, {"n", "1024"}},
                  .field = "fraction_of_own_peak",
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::vector_isa, ClaimCause::caches},
                  .cpu_feature = "avx512_bf16"}},
  });
  return true;
}();

}  // namespace
