// Calibration: this machine's ceilings, measured by ordinary registered experiments so that they
// get the same repetitions, statistics, records and charts as everything else.
//   calibrate/mem_copy     c[i] = a[i]            2 arrays counted (BabelStream's Copy)
//   calibrate/mem_triad    a[i] = b[i] + s*c[i]   3 arrays counted (BabelStream's Triad)
//   calibrate/fma_peak     independent FMA chains in registers, no memory traffic
//   calibrate/thread_copy  one thread writes a chunk, another copies it out: cache-to-cache
// Arrays are >= 4x the last-level cache so that the memory, not the cache, is measured.
// Bytes are counted as STREAM and BabelStream count them, without the read of each stored line
// that ordinary stores make first (write-allocate): on the bus the copy moves 3 arrays for the 2
// it counts and the triad 4 for 3. So a kernel that only reads can pass the calibrated bandwidth
// (the best of the two): up to 4/3 of a triad's figure, 3/2 of a copy's, and more where memory
// serves reads alone faster than a mix (docs/methodology.md, "A measurement above its ceiling").
// GCC 12 compiled both loops to ordinary vector stores (vmovupd; no non-temporal store, no
// memcpy call) in an objdump of the default build that no test repeats, so the factors above
// hold for them on a CPU whose stores write-allocate.
#include "concurdl/harness/calibrate.hpp"

#include <fmt/format.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "concurdl/harness/cores_probe.hpp"
#include "concurdl/harness/experiment.hpp"

namespace concurdl {

// The last-level caches of the whole machine: every distinct instance of the highest cache
// level, summed (a multi-socket or multi-chiplet CPU has several, and arrays that fit in their
// sum would measure cache, not memory).
std::size_t last_level_cache_bytes() {
  namespace fs = std::filesystem;
  std::map<std::string, std::size_t> instances;  // shared_cpu_list -> size, at the top level
  int top_level = 0;
  std::error_code ec;
  for (const auto& cpu : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = cpu.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 ||
        !std::isdigit(static_cast<unsigned char>(name[3])))
      continue;
    for (int idx = 0; idx < 16; ++idx) {
      const fs::path dir = cpu.path() / "cache" / fmt::format("index{}", idx);
      std::ifstream size_in(dir / "size"), level_in(dir / "level"),
          shared_in(dir / "shared_cpu_list");
      std::string size, shared;
      int level = 0;
      if (!(size_in >> size) || !(level_in >> level) || size.empty()) continue;
      std::getline(shared_in, shared);
      std::size_t bytes = std::stoull(size);
      if (size.back() == 'K') bytes <<= 10;
      if (size.back() == 'M') bytes <<= 20;
      if (level > top_level) {
        top_level = level;
        instances.clear();
      }
      if (level == top_level) instances[shared.empty() ? name : shared] = bytes;
    }
  }
  std::size_t total = 0;
  for (const auto& [cpus, bytes] : instances) total += bytes;
  return total ? total : std::size_t{32} << 20;
}

std::size_t calibration_array_elements() {
  return std::max<std::size_t>(4 * last_level_cache_bytes(), std::size_t{32} << 20) /
         sizeof(double);
}

namespace {

using Doubles = std::unique_ptr<double[]>;

struct Arrays {
  std::size_t n = 0;
  Doubles a, b, c;
};

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

// OpenMP may give fewer threads than asked (OMP_DYNAMIC, OMP_THREAD_LIMIT): then the
// configuration is not what it says, and the check fails rather than mislabel the number.
std::string team_check(int team, int threads) {
  return team == threads
             ? std::string()
             : fmt::format("OpenMP ran {} threads, not {} (OMP_DYNAMIC or a thread limit?)", team,
                           threads);
}

Trial mem_trial(const Params& p, GroupCache& cache, bool triad) {
  const int threads = static_cast<int>(param_int(p, "threads"));
  const std::size_t n = calibration_array_elements();
  auto& x = cache.get<Arrays>("arrays", [&] { return make_arrays(n); });
  auto team = std::make_shared<int>(0);
  Trial t;
  // reset (untimed) clears the output and sets the inputs, so the check after each run proves
  // that this run wrote every element.
  t.reset = [&x, threads, triad] {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < x.n; ++i) {
      if (triad) {
        x.a[i] = 0.0;
        x.c[i] = 1.0;
      } else {
        x.a[i] = 1.0;
        x.c[i] = 0.0;
      }
    }
  };
  if (triad) {
    // a = b + 3c with b = 2, c = 1: every a[i] must be 5.
    t.run = [&x, threads, team] {
      double* __restrict a = x.a.get();
      const double* __restrict b = x.b.get();
      const double* __restrict c = x.c.get();
#pragma omp parallel num_threads(threads)
      {
#pragma omp single nowait
        *team = omp_get_num_threads();
#pragma omp for schedule(static)
        for (std::size_t i = 0; i < x.n; ++i) a[i] = b[i] + 3.0 * c[i];
      }
    };
    t.check = [&x, threads, team] {
      const std::string t = team_check(*team, threads);
      return t.empty() ? check_all(x.a.get(), x.n, 5.0, "a") : t;
    };
    t.work = {static_cast<double>(n), 3.0 * sizeof(double) * n, 2.0 * n};
  } else {
    t.run = [&x, threads, team] {
      const double* __restrict a = x.a.get();
      double* __restrict c = x.c.get();
#pragma omp parallel num_threads(threads)
      {
#pragma omp single nowait
        *team = omp_get_num_threads();
#pragma omp for schedule(static)
        for (std::size_t i = 0; i < x.n; ++i) c[i] = a[i];
      }
    };
    t.check = [&x, threads, team] {
      const std::string t = team_check(*team, threads);
      return t.empty() ? check_all(x.c.get(), x.n, 1.0, "c") : t;
    };
    t.work = {static_cast<double>(n), 2.0 * sizeof(double) * n, 0};
  }
  return t;
}

// The FMA kernel and its constants are the cores probe's (cores_probe.hpp): kFmaChains (12)
// chains of one vector register each, kFmaLanes floats a vector: 16 (512 bits) where the build
// targets AVX-512, 8 (256 bits) otherwise. One register per chain, as wide as the build allows:
// narrower chains on a CPU with 512-bit FMA units would report half its peak, and a GEMM that
// uses the full width would sit above it. 2 x 12 x kFmaLanes FLOP a thread and iteration.
constexpr int kChains = kFmaChains;
constexpr int kLanes = kFmaLanes;

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
  const FmaReference ref =
      cache.get<FmaReference>("reference", [&] { return fma_reference(iters); });
  // One slot per thread, a cache line apart so that the stores do not false-share.
  auto results = std::make_shared<std::vector<float>>(static_cast<std::size_t>(threads) * 16);
  auto team = std::make_shared<int>(0);
  Trial t;
  t.reset = [=] { std::fill(results->begin(), results->end(), 0.0f); };
  t.run = [=] {
#pragma omp parallel num_threads(threads)
    {
#pragma omp single nowait
      *team = omp_get_num_threads();
      (*results)[static_cast<std::size_t>(omp_get_thread_num()) * 16] = fma_chains(iters, 1.0f);
    }
  };
  t.check = [=] {
    if (std::string e = team_check(*team, threads); !e.empty()) return e;
    auto close = [](double got, double want) {
      return std::fabs(got - want) <= 1e-4 * std::fabs(want);
    };
    for (int th = 0; th < threads; ++th) {
      const double got = (*results)[static_cast<std::size_t>(th) * 16];
      if (!close(got, ref.fused) && !close(got, ref.unfused))
        return fmt::format(
            "thread {}: sum {} matches neither scalar reference ({} fused, {} unfused)", th, got,
            ref.fused, ref.unfused);
    }
    return std::string();
  };
  t.work = {0, 0, 2.0 * kChains * kLanes * static_cast<double>(iters) * threads};
  return t;
}

// A writer thread fills a chunk; a reader thread on another CPU copies it out. The chunk moves
// between the cores' caches (or through memory, when larger than the caches). Each side spins a
// little, then sleeps on the atomic (C++20 wait/notify), so an oversubscribed or single-CPU
// machine measures slowly rather than spinning a whole time slice away.
struct Handoff {
  std::size_t bytes;
  int rounds;
  std::vector<char> shared, out;
  std::atomic<int> turn{0};  // 2r: the writer's turn in round r; 2r+1: the reader's
  std::uint64_t reader_sum = 0, expected_sum = 0;

  void await(int target) {
    int seen = turn.load(std::memory_order_acquire);
    for (int spins = 0; seen != target; seen = turn.load(std::memory_order_acquire))
      if (++spins > 4096) turn.wait(seen, std::memory_order_acquire);
  }
  void pass(int next) {
    turn.store(next, std::memory_order_release);
    turn.notify_one();
  }
};

// The first two CPUs this process may use (the same one twice on a single-CPU machine).
std::pair<int, int> two_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) return {-1, -1};
  return {cpus.front(), cpus.back()};
}

void pin_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);  // best effort: a hint, not a need
}

Trial thread_copy_trial(const Params& p) {
  const auto chunk = static_cast<std::size_t>(param_int(p, "chunk"));
  const std::size_t total = std::size_t{256} << 20;
  auto h = std::make_shared<Handoff>();
  h->bytes = chunk;
  h->rounds = static_cast<int>(std::max<std::size_t>(4, total / chunk));
  h->shared.assign(chunk, 0);
  h->out.assign(chunk, 0);
  const std::pair<int, int> cpus = two_cpus();  // plain ints: clang 14 cannot capture bindings
  const int writer_cpu = cpus.first, reader_cpu = cpus.second;
  Trial t;
  t.run = [h, writer_cpu, reader_cpu] {
    h->turn.store(0);
    h->reader_sum = h->expected_sum = 0;
    std::thread writer([h, writer_cpu] {
      pin_to(writer_cpu);
      for (int r = 0; r < h->rounds; ++r) {
        h->await(2 * r);
        std::memset(h->shared.data(), r & 0x7f, h->bytes);
        h->expected_sum += static_cast<std::uint64_t>(r & 0x7f);
        h->pass(2 * r + 1);
      }
    });
    std::thread reader([h, reader_cpu] {
      pin_to(reader_cpu);
      for (int r = 0; r < h->rounds; ++r) {
        h->await(2 * r + 1);
        std::memcpy(h->out.data(), h->shared.data(), h->bytes);
        h->reader_sum +=
            static_cast<std::uint64_t>(static_cast<unsigned char>(h->out[h->bytes / 2]));
        h->pass(2 * r + 2);
      }
    });
    writer.join();
    reader.join();
  };
  t.check = [h] {
    return h->reader_sum == h->expected_sum ? std::string()
                                            : fmt::format("reader saw checksum {}, writer wrote {}",
                                                          h->reader_sum, h->expected_sum);
  };
  t.work = {static_cast<double>(h->rounds), static_cast<double>(chunk) * h->rounds, 0};
  return t;
}

Axis threads_axis() {
  return {"threads", thread_counts_up_to_cores(), {}, AxisKind::count, kMaxThreads};
}

const bool registered = [] {
  register_chapter({kCalibrationChapter, "Calibration: this machine's measured ceilings"});
  const Figure bw_speedup{.id = "speedup",
                          .title = "Memory bandwidth: speedup vs threads",
                          .kind = FigureKind::speedup,
                          .series = ""};
  const Figure bw{.id = "bandwidth",
                  .title = "Memory bandwidth vs threads",
                  .kind = FigureKind::lines,
                  .y = "bytes_per_s",
                  .series = ""};
  register_experiment(
      {.id = "calibrate/mem_copy",
       .chapter = kCalibrationChapter,
       .title = "Memory bandwidth, copy (c = a), arrays >= 4x LLC",
       .axes = {threads_axis()},
       .baseline = {{"threads", "1"}},
       .ceiling = Ceiling::mem_bandwidth,
       .interleave = {"threads"},
       .prepare = [](const Params& p, GroupCache& c) { return mem_trial(p, c, false); },
       .figures = {bw_speedup, bw}});
  register_experiment(
      {.id = "calibrate/mem_triad",
       .chapter = kCalibrationChapter,
       .title = "Memory bandwidth, triad (a = b + s c), arrays >= 4x LLC",
       .axes = {threads_axis()},
       .baseline = {{"threads", "1"}},
       .ceiling = Ceiling::mem_bandwidth,
       .interleave = {"threads"},
       .prepare = [](const Params& p, GroupCache& c) { return mem_trial(p, c, true); },
       .figures = {bw_speedup, bw}});
  register_experiment(
      {.id = "calibrate/fma_peak",
       .chapter = kCalibrationChapter,
       .title = "Peak FLOP/s: independent FMA chains in registers",
       // At most 2^32 iterations, 200 times the full profile's: the serial reference alone
       // then takes minutes.
       .axes = {threads_axis(),
                {"iterations", {"20000000"}, {"4000000"}, AxisKind::size, std::int64_t{1} << 32}},
       .baseline = {{"threads", "1"}},
       .ceiling = Ceiling::peak_flops,
       .interleave = {"threads"},
       .prepare = [](const Params& p, GroupCache& c) { return fma_trial(p, c); },
       .figures = {{.id = "speedup",
                    .title = "Peak FLOP/s: speedup vs threads",
                    .kind = FigureKind::speedup,
                    .series = ""},
                   {.id = "flops",
                    .title = "FMA throughput vs threads",
                    .y = "flops_per_s",
                    .series = ""}}});
  register_experiment(
      {.id = "calibrate/thread_copy",
       .chapter = kCalibrationChapter,
       .title = "Thread-to-thread copy bandwidth (writer -> reader handoff)",
       // Two buffers of a chunk each (the writer's, the reader's): 32 GiB.
       .axes = {{"chunk", {"64K", "1M", "16M"}, {"1M"}, AxisKind::size, max_elements(2)}},
       .interleave = {"chunk"},
       .prepare = [](const Params& p, GroupCache&) { return thread_copy_trial(p); },
       .figures = {{.id = "bandwidth",
                    .title = "Thread-to-thread copy bandwidth",
                    .kind = FigureKind::bars,
                    .x = "chunk",
                    .y = "bytes_per_s",
                    .series = ""}}});
  return true;
}();

}  // namespace

}  // namespace concurdl
