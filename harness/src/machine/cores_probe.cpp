// The cores probe (cores_probe.hpp).
#include "concurdl/harness/cores_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "concurdl/core/clock.hpp"

namespace concurdl {

namespace {
using Vec = float __attribute__((vector_size(kFmaLanes * sizeof(float))));
using Clock = std::chrono::steady_clock;

}  // namespace

float fma_chains(std::int64_t iterations, float seed) {
  Vec acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c)
    for (int l = 0; l < kFmaLanes; ++l) acc[c][l] = seed + 0.001f * static_cast<float>(c + l);
  const Vec m = Vec{} + 0.999999f, k = Vec{} + 1e-6f;
  for (std::int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = acc[c] * m + k;  // one FMA per lane
  float sum = 0;
  for (int c = 0; c < kFmaChains; ++c)
    for (int l = 0; l < kFmaLanes; ++l) sum += acc[c][l];
  return sum;
}

double cores_probe_ratio(int threads, double seconds, int tries) {
  if (threads < 2) return 1.0;
  // Iterations for `seconds` on one thread, from a short first measurement.
  std::int64_t iters = 2000;
  volatile float sink = 0;
  for (;;) {
    const auto t0 = Clock::now();
    sink = sink + fma_chains(iters, 1.0f);
    const double t = seconds_since(t0);
    if (t >= seconds / 8 || iters > (std::int64_t{1} << 40)) {
      iters = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(static_cast<double>(iters) * seconds / std::max(t, 1e-9)));
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int k = 0; k < tries; ++k) {
    auto t0 = Clock::now();
    sink = sink + fma_chains(iters, 1.0f);
    const double one = seconds_since(t0);
    // All threads released at once by the last to arrive; timed to the last finish.
    std::atomic<int> arrived{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> team;
    team.reserve(static_cast<std::size_t>(threads));
    std::vector<float> sums(static_cast<std::size_t>(threads) * 16, 0.0f);
    for (int th = 0; th < threads; ++th)
      team.emplace_back([&, th] {
        if (arrived.fetch_add(1) + 1 == threads) {
          t0 = Clock::now();
          go.store(true, std::memory_order_release);
        }
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        sums[static_cast<std::size_t>(th) * 16] = fma_chains(iters, 1.0f);
      });
    for (std::thread& t : team) t.join();
    const double all = seconds_since(t0);
    for (int th = 0; th < threads; ++th) sink = sink + sums[static_cast<std::size_t>(th) * 16];
    if (all > 0) best = std::max(best, threads * one / all);
  }
  return best;
}

std::string cores_short_note(double before, double after, int threads) {
  const double floor = kCoresShortFraction * threads;
  if (before >= floor && after >= floor) return "";
  return fmt::format(
      "{} threads ran the FMA probe at {:.2f}x one thread's rate before its group and {:.2f}x "
      "after (below {:.2g}x): the CPUs were not a core each for some of it (a VM's host gave "
      "two vCPUs one core), so its multi-threaded timings are likely slower than the machine's",
      threads, before, after, floor);
}

}  // namespace concurdl
