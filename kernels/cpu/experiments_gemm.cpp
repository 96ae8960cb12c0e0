// GEMM v1-v4 against OpenBLAS (gemm.hpp): square C = A * B in float, every version checked
// against the double reference (reference.hpp) before and after it is timed.
//   concurdl run kernels/gemm          all five versions, n up to 512 (quick) / 1024 (full):
//                                      GFLOP/s vs n, fraction of OpenBLAS, roofline
//   concurdl run kernels/gemm_large    v2-v4 and OpenBLAS at n = 1024 (quick) .. 3072 (full);
//                                      v1 is left out: 4-5 s a call at n = 1024
//   concurdl run kernels/gemm_threads  v4 and OpenBLAS at n = 1024 over 1 .. 2x the cores
// The first two run on all the cores (v1-v3 use one of them by design: single-threaded code is
// part of what the lesson measures); speedup there is the fraction of OpenBLAS's speed.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/reference.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl;
using kernels::GemmVersion;
using kernels::Trans;

// The largest n any GEMM experiment takes: three n x n float matrices are then 3 GiB, and n * n
// is far from overflowing. `--set n=99999999999` is a usage error naming this limit.
constexpr std::int64_t kMaxN = 16384;

void note_once(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard lock(mu);
  if (said.insert(what).second) std::fprintf(stderr, "concurdl: note: %s\n", what.c_str());
}

// One size's inputs and their reference, shared by every version and thread count of the
// group. Values in [-1, 1): the reference's tolerance scales with them (reference.cpp).
struct Inputs {
  std::size_t n = 0;
  std::vector<float> a, b;
  kernels::GemmReference ref;
};

// Puts the kernels' thread setting back when the group is done, so that what runs next sees
// the setting it had before this experiment.
struct RestoreThreads {
  int saved = kernels::compute_threads();
  ~RestoreThreads() { kernels::set_compute_threads(saved); }
};

Inputs& inputs_for(GroupCache& cache, std::size_t n) {
  return cache.get<Inputs>(fmt::format("gemm {}", n), [n] {
    Inputs in;
    in.n = n;
    std::mt19937 rng(2024);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    in.a.resize(n * n);
    in.b.resize(n * n);
    for (float& x : in.a) x = dist(rng);
    for (float& x : in.b) x = dist(rng);
    in.ref = kernels::reference_gemm(Trans::no, Trans::no, n, n, n, 1.0f, in.a.data(), n,
                                     in.b.data(), n, 0.0f, nullptr, n);
    return in;
  });
}

// One configuration: C = A * B (beta = 0, so C is only written). C is poisoned with NaN before
// every run: a version that returned without computing cannot pass on the last run's result.
Trial gemm_trial(const Params& p, GroupCache& cache) {
  const GemmVersion v = kernels::gemm_variants().find(p).version;
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  const int threads = static_cast<int>(param_int(p, "threads"));
  cache.get<RestoreThreads>("restore threads", [] { return RestoreThreads{}; });
  const Inputs& in = inputs_for(cache, n);
  auto c = std::make_shared<std::vector<float>>(n * n);
  Trial t;
  t.reset = [c, threads, v] {
    kernels::set_compute_threads(threads);
    kernels::settle_runtime(v == GemmVersion::openblas ? kernels::ThreadRuntime::openblas
                                                       : kernels::ThreadRuntime::openmp);
    std::fill(c->begin(), c->end(), std::numeric_limits<float>::quiet_NaN());
  };
  // Small products take microseconds, which the clock and a thread wake-up would dominate: one
  // timed run makes (512 / n)^3 calls (at least one), as much work as one call at n = 512.
  const std::size_t calls = n >= 512 ? 1 : (512 / n) * (512 / n) * (512 / n);
  t.run = [c, v, n, calls, &in] {
    for (std::size_t i = 0; i < calls; ++i)
      kernels::gemm(v, Trans::no, Trans::no, n, n, n, 1.0f, in.a.data(), n, in.b.data(), n, 0.0f,
                    c->data(), n);
  };
  t.check = [c, n, &in] { return kernels::check_gemm(in.ref, c->data(), n); };
  const kernels::Cost cost = kernels::gemm_cost(n, n, n, /*reads_c=*/false);
  t.work = {.bytes = cost.bytes * static_cast<double>(calls),
            .flops = cost.flops * static_cast<double>(calls)};
  if (calls > 1) t.notes["calls_per_run"] = std::to_string(calls);
  if (v == GemmVersion::v4_register) {
    const kernels::GemmBlocking b = kernels::gemm_v4_blocking();
    t.notes["blocking"] =
        fmt::format("{}x{} register tile ({} floats a vector), KC {}, NC {}, MC {}", b.mr, b.nr,
                    b.lanes, b.kc, b.nc, b.mc);
  }
  if (v == GemmVersion::openblas) {
    t.notes["openblas_core"] = kernels::openblas_core();
    if (kernels::openblas_core_is_generic()) {
      t.notes["openblas_core"] += " (generic SSE kernels on an AVX2/AVX-512 CPU: not a fair peer)";
      note_once(fmt::format(
          "OpenBLAS did not recognise this CPU and uses its '{}' (SSE3) kernels; for a fair "
          "peer run with OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) in the "
          "environment",
          kernels::openblas_core()));
    }
  }
  return t;
}

bool fits_large_n(const kernels::GemmVariant& v) { return v.version != GemmVersion::v1_naive; }
bool multithreaded(const kernels::GemmVariant& v) { return v.multithreaded; }

// The three charts of a size sweep: GFLOP/s vs n, the fraction of OpenBLAS's speed vs n, and
// the roofline (each size is a point at its compulsory-traffic intensity, n / 6 FLOP/byte).
std::vector<Figure> size_figures(const std::string& what) {
  return {{.id = "gflops",
           .title = "GEMM " + what + ": FLOP/s vs n (square, float, all cores)",
           .kind = FigureKind::lines,
           .x = "n",
           .y = "flops_per_s",
           .series = "variant",
           .log_x = true,
           .log_y = true,
           .y_label = "FLOP/s (log)"},
          {.id = "vs_openblas",
           .title = "GEMM " + what + ": speed as a fraction of OpenBLAS vs n",
           .kind = FigureKind::lines,
           .x = "n",
           .y = "speedup",
           .series = "variant",
           .log_x = true,
           .y_label = "time(OpenBLAS) / time(version)"},
          {.id = "roofline",
           .title = "GEMM " + what + ": roofline (arithmetic intensity from compulsory traffic)",
           .kind = FigureKind::lines,
           .x = "intensity",
           .y = "flops_per_s",
           .series = "variant",
           .log_x = true,
           .log_y = true,
           .overlays = {Overlay::roofline},
           .y_label = "FLOP/s (log)",
           .x_label = "FLOP/byte (log)",
           .along_x = {"n"}}};
}

// The thread count of the runs on all the cores: this machine's hardware threads, at most
// kMaxThreads.
std::string all_cores() {
  return std::to_string(std::min<std::int64_t>(hardware_threads(), kMaxThreads));
}

// v1 takes ~0.25 s a call at n = 512 and ~4.6 s at 1024 (Sapphire Rapids), so the quick
// profile stops at 512; the sizes past that are kernels/gemm_large, without v1.
Experiment gemm_experiment() {
  return {
      .id = "kernels/gemm",
      .chapter = "kernels",
      .title = "GEMM v1-v4 vs OpenBLAS: FLOP/s vs n on all cores, against the roofline",
      .axes =
          {kernels::gemm_variants().axis("kernels/gemm"),
           {"n", {"64", "128", "256", "512", "1024"}, {"128", "256", "512"}, AxisKind::size, kMaxN},
           {"threads", {all_cores()}, {}, AxisKind::count, kMaxThreads}},
      .baseline = {{"variant", "openblas"}},
      .ceiling = Ceiling::peak_flops,
      .prepare = gemm_trial,
      .figures = size_figures("v1-v4"),
      .claims =
          {{.id = "loop_order",
            // Magnitude: how much the unit-stride inner loop gains is the caches' and the vector
            // width's (17.6x on the Emerald Rapids guest, 33-42x on Zen 5).
            .statement =
                "Loop order alone: how many times as fast v2 (i-k-j, unit stride, vectorised) "
                "is as v1 (i-j-k) at n = 512",
            .select = {{"variant", "v2_ikj"}, {"n", "512"}},
            .versus = {{"variant", "v1_naive"}},
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::caches, ClaimCause::vector_isa},
            .unit = "×"},
           {.id = "register_tile",
            // A magnitude: the FMA units and caches of each core (3.64-5.52x on one Zen 4 machine).
            .statement =
                "At n = 512, how many times as fast keeping a tile of C in AVX-512 registers "
                "across the K loop, on packed panels (v4), is as cache blocking alone (v3)",
            .select = {{"variant", "v4_register"}, {"n", "512"}},
            .versus = {{"variant", "v3_blocked"}},
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::vector_isa, ClaimCause::caches},
            .unit = "×",
            .cpu_feature = "avx512f"}},
  };
}

Experiment gemm_large_experiment() {
  return {
      .id = "kernels/gemm_large",
      .chapter = "kernels",
      .title = "GEMM v2-v4 vs OpenBLAS at large n on all cores (v1 left out: seconds a call)",
      .axes = {kernels::gemm_variants().axis("kernels/gemm_large", {.where = fits_large_n}),
               {"n", {"1024", "2048", "3072"}, {"1024"}, AxisKind::size, kMaxN},
               {"threads", {all_cores()}, {}, AxisKind::count, kMaxThreads}},
      .baseline = {{"variant", "openblas"}},
      .ceiling = Ceiling::peak_flops,
      .prepare = gemm_trial,
      .figures = size_figures("v2-v4, large n"),
      .claims =
          {{.id = "v4_vs_openblas",
            // Magnitude: against OpenBLAS's kernels for the CPU it detects (0.96-1.03x on the
            // Emerald Rapids guest, 1.72-1.81x on Zen 5 under OPENBLAS_CORETYPE=Haswell).
            .statement = "At n = 1024 on all cores, how fast the AVX-512 v4 runs against OpenBLAS, "
                         "whichever kernels OpenBLAS picks for the CPU (provenance.libraries: "
                         "AVX-512 Cooperlake ones on the Zen 4 reference, SkylakeX ones on a "
                         "Xeon, AVX2 Haswell ones where OPENBLAS_CORETYPE=Haswell is set)",
            .select = {{"variant", "v4_register"}, {"n", "1024"}},
            .versus = {{"variant", "openblas"}},
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::peer_kernels, ClaimCause::vector_isa},
            .unit = "×",
            .cpu_feature = "avx512f"},
           {.id = "v4_fraction_of_peak",
            // Magnitude: 0.6-0.65 on the Emerald Rapids guest, 0.76-0.92 on Zen 5; the
            // micro-kernel's tile and blocks were tuned on Zen 5's caches.
            .statement =
                "At n = 1024 on all cores, the fraction of the calibrated AVX-512 FMA peak v4 "
                "reaches",
            .select = {{"variant", "v4_register"}, {"n", "1024"}},
            .field = "fraction_of_ceiling",
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::vector_isa, ClaimCause::caches},
            .cpu_feature = "avx512f"}},
  };
}

Experiment gemm_threads_experiment() {
  return {
      .id = "kernels/gemm_threads",
      .chapter = "kernels",
      .title = "GEMM v4 and OpenBLAS at n = 1024: speedup vs threads, past the cores",
      .axes = {kernels::gemm_variants().axis("kernels/gemm_threads", {.where = multithreaded}),
               {"n", {"1024", "2048"}, {"1024"}, AxisKind::size, kMaxN},
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads}},
      .baseline = {{"threads", "1"}},
      .ceiling = Ceiling::peak_flops,
      .prepare = gemm_trial,
      .figures = {{.id = "speedup",
                   .title = "GEMM: speedup vs threads (v4 and OpenBLAS)",
                   .kind = FigureKind::speedup,
                   .x = "threads",
                   .series = "variant"},
                  {.id = "gflops",
                   .title = "GEMM: FLOP/s vs threads",
                   .kind = FigureKind::lines,
                   .x = "threads",
                   .y = "flops_per_s",
                   .series = "variant",
                   .log_x = true,
                   .overlays = {Overlay::flops_ceiling},
                   .y_label = "FLOP/s"}},
  };
}

const bool registered = [] {
  register_chapter({"kernels",
                    "Shared kernels and the training stack: GEMM v1-v4 vs OpenBLAS "
                    "on a roofline, the MLP trained on Fashion-MNIST"});
  register_experiment(gemm_experiment());
  register_experiment(gemm_large_experiment());
  register_experiment(gemm_threads_experiment());
  return true;
}();

}  // namespace
