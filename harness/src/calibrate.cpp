// Calibration: this machine's ceilings, measured by ordinary registered experiments so that they
// get the same repetitions, statistics, records and charts as everything else.
//   calibrate/mem_copy     c[i] = a[i]            2 arrays moved   (BabelStream's Copy)
//   calibrate/mem_triad    a[i] = b[i] + s*c[i]   3 arrays moved   (BabelStream's Triad)
//   calibrate/fma_peak     independent FMA chains in registers, no memory traffic
//   calibrate/thread_copy  one thread writes a chunk, another copies it out: cache-to-cache
// Arrays are >= 4x the last-level cache so that the memory, not the cache, is measured.
#include "concurdl/harness/calibrate.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "concurdl/harness/experiment.hpp"

namespace concurdl {

std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  for (int idx = 0; idx < 8; ++idx) {
    std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", idx));
    std::string s;
    if (!(in >> s) || s.empty()) continue;
    std::size_t v = std::stoull(s);
    if (s.back() == 'K') v <<= 10;
    if (s.back() == 'M') v <<= 20;
    best = std::max(best, v);
  }
  return best ? best : std::size_t{32} << 20;
}

namespace {

using Doubles = std::unique_ptr<double[]>;

struct Arrays {
  std::size_t n = 0;
  Doubles a, b, c;
};

// Elements per array: 4x the last-level cache, at least 32 MiB of doubles.
std::size_t array_elements() {
  return std::max<std::size_t>(4 * last_level_cache_bytes(), std::size_t{32} << 20) / sizeof(double);
}

// First touch by all hardware threads with the kernels' static schedule: the arrays are shared
// by every thread count of the group, and this spreads their pages over the NUMA nodes.
Arrays make_arrays(std::size_t n) {
  const int threads = static_cast<int>(hardware_threads());
  Arrays x{n, Doubles(new double[n]), Doubles(new double[n]), Doubles(new double[n])};
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    x.a[i] = 1.0;
    x.b[i] = 2.0;
    x.c[i] = 0.0;
  }
  return x;
}

std::string check_all(const double* v, std::size_t n, double expected, const char* name) {
  for (std::size_t i = 0; i < n; ++i)
    if (v[i] != expected) return fmt::format("{}[{}] = {}, expected {}", name, i, v[i], expected);
  return "";
}

Trial mem_trial(const Params& p, GroupCache& cache, bool triad) {
  const int threads = static_cast<int>(param_int(p, "threads"));
  const std::size_t n = array_elements();
  auto& x = cache.get<Arrays>("arrays", [&] { return make_arrays(n); });
  Trial t;
  if (triad) {
    // a = b + 3c with b = 2, c = 1 after reset: every a[i] must be 5.
    t.reset = [&x, threads] {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (std::size_t i = 0; i < x.n; ++i) x.c[i] = 1.0;
    };
    t.run = [&x, threads] {
      double* __restrict a = x.a.get();
      const double* __restrict b = x.b.get();
      const double* __restrict c = x.c.get();
#pragma omp parallel for num_threads(threads) schedule(static)
      for (std::size_t i = 0; i < x.n; ++i) a[i] = b[i] + 3.0 * c[i];
    };
    t.check = [&x] { return check_all(x.a.get(), x.n, 5.0, "a"); };
    t.work = {static_cast<double>(n), 3.0 * sizeof(double) * n, 2.0 * n};
  } else {
    t.reset = [&x, threads] {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (std::size_t i = 0; i < x.n; ++i) x.a[i] = 1.0;
    };
    t.run = [&x, threads] {
      const double* __restrict a = x.a.get();
      double* __restrict c = x.c.get();
#pragma omp parallel for num_threads(threads) schedule(static)
      for (std::size_t i = 0; i < x.n; ++i) c[i] = a[i];
    };
    t.check = [&x] { return check_all(x.c.get(), x.n, 1.0, "c"); };
    t.work = {static_cast<double>(n), 2.0 * sizeof(double) * n, 0};
  }
  return t;
}

// Enough independent chains to cover FMA latency x FMA units on current cores (4 x 2 = 8).
constexpr int kChains = 12;
constexpr int kLanes = 8;  // 8 floats = one AVX register; the compiler keeps each chain in one
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

float fma_chains(std::int64_t iterations, float seed) {
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < kLanes; ++l) acc[c][l] = seed + 0.001f * static_cast<float>(c + l);
  const Vec m = Vec{} + 0.999999f, k = Vec{} + 1e-6f;
  for (std::int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * m + k;  // one FMA per lane
  float sum = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < kLanes; ++l) sum += acc[c][l];
  return sum;
}

// The same chains computed one at a time in scalar float: what every thread must return. The
// compiler emits fused multiply-adds where the target has them (-march=native) and a multiply
// then an add where it does not; the two converge to slightly different fixed points, so both
// references are computed and a thread must match one. Chains with equal starts (c + l) are
// computed once.
struct FmaReference {
  double fused = 0, unfused = 0;
};

FmaReference fma_reference(std::int64_t iterations) {
  FmaReference ref;
  std::vector<float> fused(kChains + kLanes), unfused(kChains + kLanes);
  for (int s = 0; s < kChains + kLanes - 1; ++s) {
    float a = 1.0f + 0.001f * static_cast<float>(s), b = a;
    for (std::int64_t i = 0; i < iterations; ++i) {
      a = std::fma(a, 0.999999f, 1e-6f);
      volatile float product = b * 0.999999f;  // volatile: keep it unfused
      b = product + 1e-6f;
    }
    fused[static_cast<std::size_t>(s)] = a;
    unfused[static_cast<std::size_t>(s)] = b;
  }
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < kLanes; ++l) {
      ref.fused += fused[static_cast<std::size_t>(c + l)];
      ref.unfused += unfused[static_cast<std::size_t>(c + l)];
    }
  return ref;
}

Trial fma_trial(const Params& p, GroupCache& cache) {
  const int threads = static_cast<int>(param_int(p, "threads"));
  const std::int64_t iters = param_int(p, "iterations");
  const FmaReference ref = cache.get<FmaReference>("reference", [&] { return fma_reference(iters); });
  auto results = std::make_shared<std::vector<float>>(static_cast<std::size_t>(threads) * 16);
  Trial t;
  t.run = [=] {
#pragma omp parallel num_threads(threads)
    (*results)[static_cast<std::size_t>(omp_get_thread_num()) * 16] = fma_chains(iters, 1.0f);
  };
  t.check = [=] {
    auto close = [](double got, double want) { return std::fabs(got - want) <= 1e-4 * std::fabs(want); };
    for (int th = 0; th < threads; ++th) {
      const double got = (*results)[static_cast<std::size_t>(th) * 16];
      if (!close(got, ref.fused) && !close(got, ref.unfused))
        return fmt::format("thread {}: sum {} matches neither scalar reference ({} fused, {} unfused)",
                           th, got, ref.fused, ref.unfused);
    }
    return std::string();
  };
  t.work = {0, 0, 2.0 * kChains * kLanes * static_cast<double>(iters) * threads};
  return t;
}

// A writer thread fills a chunk; a reader thread on another core copies it out. The chunk
// moves between the cores' caches (or through memory, when larger than the caches).
struct Handoff {
  std::size_t bytes;
  int rounds;
  std::vector<char> shared, out;
  std::atomic<int> turn{0};  // even: writer's turn, odd: reader's
  std::uint64_t reader_sum = 0, expected_sum = 0;
};

Trial thread_copy_trial(const Params& p) {
  const auto chunk = static_cast<std::size_t>(param_int(p, "chunk"));
  const std::size_t total = std::size_t{256} << 20;
  auto h = std::make_shared<Handoff>();
  h->bytes = chunk;
  h->rounds = static_cast<int>(std::max<std::size_t>(4, total / chunk));
  h->shared.assign(chunk, 0);
  h->out.assign(chunk, 0);
  Trial t;
  t.run = [h] {
    h->turn.store(0);
    h->reader_sum = h->expected_sum = 0;
    std::thread writer([h] {
      for (int r = 0; r < h->rounds; ++r) {
        while (h->turn.load(std::memory_order_acquire) != 2 * r) {}
        std::memset(h->shared.data(), r & 0x7f, h->bytes);
        h->expected_sum += static_cast<std::uint64_t>(r & 0x7f);
        h->turn.store(2 * r + 1, std::memory_order_release);
      }
    });
    for (int r = 0; r < h->rounds; ++r) {
      while (h->turn.load(std::memory_order_acquire) != 2 * r + 1) {}
      std::memcpy(h->out.data(), h->shared.data(), h->bytes);
      h->reader_sum += static_cast<std::uint64_t>(static_cast<unsigned char>(h->out[h->bytes / 2]));
      h->turn.store(2 * r + 2, std::memory_order_release);
    }
    writer.join();
  };
  t.check = [h] {
    return h->reader_sum == h->expected_sum
               ? std::string()
               : fmt::format("reader saw checksum {}, writer wrote {}", h->reader_sum, h->expected_sum);
  };
  t.work = {static_cast<double>(h->rounds), static_cast<double>(chunk) * h->rounds, 0};
  return t;
}

Axis threads_axis() { return {"threads", thread_counts_up_to_cores(), {}, AxisKind::count}; }

const bool registered = [] {
  register_chapter({kCalibrationChapter, "Calibration: this machine's measured ceilings"});
  const Figure bw_speedup{.id = "speedup", .title = "Memory bandwidth: speedup vs threads",
                          .kind = FigureKind::speedup, .series = ""};
  const Figure bw{.id = "bandwidth", .title = "Memory bandwidth vs threads", .kind = FigureKind::lines,
                  .y = "bytes_per_s", .series = ""};
  register_experiment({.id = "calibrate/mem_copy", .chapter = kCalibrationChapter,
                       .title = "Memory bandwidth, copy (c = a), arrays >= 4x LLC",
                       .axes = {threads_axis()}, .baseline = {{"threads", "1"}},
                       .ceiling = Ceiling::mem_bandwidth, .interleave = {"threads"},
                       .prepare = [](const Params& p, GroupCache& c) { return mem_trial(p, c, false); },
                       .figures = {bw_speedup, bw}});
  register_experiment({.id = "calibrate/mem_triad", .chapter = kCalibrationChapter,
                       .title = "Memory bandwidth, triad (a = b + s c), arrays >= 4x LLC",
                       .axes = {threads_axis()}, .baseline = {{"threads", "1"}},
                       .ceiling = Ceiling::mem_bandwidth, .interleave = {"threads"},
                       .prepare = [](const Params& p, GroupCache& c) { return mem_trial(p, c, true); },
                       .figures = {bw_speedup, bw}});
  register_experiment({.id = "calibrate/fma_peak", .chapter = kCalibrationChapter,
                       .title = "Peak FLOP/s: independent FMA chains in registers",
                       .axes = {threads_axis(),
                                {"iterations", {"20000000"}, {"4000000"}, AxisKind::size}},
                       .baseline = {{"threads", "1"}}, .ceiling = Ceiling::peak_flops,
                       .interleave = {"threads"},
                       .prepare = [](const Params& p, GroupCache& c) { return fma_trial(p, c); },
                       .figures = {{.id = "speedup", .title = "Peak FLOP/s: speedup vs threads",
                                    .kind = FigureKind::speedup, .series = ""},
                                   {.id = "flops", .title = "FMA throughput vs threads",
                                    .y = "flops_per_s", .series = ""}}});
  register_experiment({.id = "calibrate/thread_copy", .chapter = kCalibrationChapter,
                       .title = "Thread-to-thread copy bandwidth (writer -> reader handoff)",
                       .axes = {{"chunk", {"64K", "1M", "16M"}, {"1M"}, AxisKind::size}},
                       .interleave = {"chunk"},
                       .prepare = [](const Params& p, GroupCache&) { return thread_copy_trial(p); },
                       .figures = {{.id = "bandwidth", .title = "Thread-to-thread copy bandwidth",
                                    .kind = FigureKind::bars, .x = "chunk", .y = "bytes_per_s",
                                    .series = ""}}});
  return true;
}();

double best(const std::vector<Record>& records, const std::string& id, const char* metric,
            nlohmann::json* per_thread = nullptr) {
  double b = 0;
  for (const Record& r : records) {
    if (r.experiment != id || !r.valid) continue;
    auto it = r.derived.find(metric);
    if (it == r.derived.end()) continue;
    b = std::max(b, it->second);
    if (per_thread) {
      auto th = r.params.find("threads");
      (*per_thread)[th != r.params.end() ? th->second : describe(r.params)] = it->second;
    }
  }
  return b;
}

}  // namespace

Calibration calibration_from_records(const std::vector<Record>& records) {
  Calibration c;
  nlohmann::json copy = nlohmann::json::object(), triad = nlohmann::json::object(),
                 fma = nlohmann::json::object();
  c.mem_bandwidth_bytes_per_s = std::max(best(records, "calibrate/mem_copy", "bytes_per_s", &copy),
                                         best(records, "calibrate/mem_triad", "bytes_per_s", &triad));
  c.peak_flops = best(records, "calibrate/fma_peak", "flops_per_s", &fma);
  for (const Record& r : records)
    if (r.experiment == "calibrate/fma_peak" && r.valid && r.params.count("threads") &&
        r.params.at("threads") == "1" && r.derived.count("flops_per_s"))
      c.peak_flops_1core = r.derived.at("flops_per_s");
  c.thread_copy_bytes_per_s = best(records, "calibrate/thread_copy", "bytes_per_s");
  c.detail = {{"mem_copy_bytes_per_s_by_threads", copy},
              {"mem_triad_bytes_per_s_by_threads", triad},
              {"fma_flops_per_s_by_threads", fma},
              {"array_bytes", array_elements() * sizeof(double)},
              {"last_level_cache_bytes", last_level_cache_bytes()}};
  return c;
}

}  // namespace concurdl
