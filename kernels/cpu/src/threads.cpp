#include "concurdl/kernels/threads.hpp"

#include <cblas.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace concurdl::kernels {

namespace {
int affinity_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

std::atomic<int>& setting() {
  static std::atomic<int> n{[] {
    const int hw = affinity_threads();
    openblas_set_num_threads(hw);
    return hw;
  }()};
  return n;
}
}  // namespace

void set_compute_threads(int n) {
  if (n < 1)
    throw std::invalid_argument("set_compute_threads: " + std::to_string(n) +
                                " is not a thread count (need >= 1)");
  setting().store(n, std::memory_order_relaxed);
  openblas_set_num_threads(n);
}

int compute_threads() { return setting().load(std::memory_order_relaxed); }

namespace {
std::atomic<bool> g_after_openblas{false};
}

void note_gemm_runtime(ThreadRuntime r) {
  const bool openblas = r == ThreadRuntime::openblas;
  if (g_after_openblas.load(std::memory_order_relaxed) != openblas)
    g_after_openblas.store(openblas, std::memory_order_relaxed);
}

bool after_openblas_gemm() { return g_after_openblas.load(std::memory_order_relaxed); }

void settle_runtime(ThreadRuntime next) {
  static std::atomic<int> last{-1};
  const int was = last.exchange(static_cast<int>(next));
  // 2^28 cycles is 0.13 s at 2 GHz: OpenBLAS's default THREAD_TIMEOUT before a worker sleeps.
  if (was != -1 && was != static_cast<int>(next))
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
}

}  // namespace concurdl::kernels
