// How many threads the compute kernels use: the suite's own OpenMP kernels (GEMM v4, the
// element-wise ops) and OpenBLAS alike. One setting, so that "--threads 2" means two threads
// for every kernel a training step calls, and so that a run is reproducible: every kernel's
// work split depends only on this count, never on timing.
#pragma once

namespace concurdl::kernels {

// n >= 1. Also sets OpenBLAS's thread count. Not thread-safe against kernels running at the
// same time: set it between steps.
void set_compute_threads(int n);
// The current setting; initially the hardware threads of this process (its affinity mask).
int compute_threads();

// The compute-thread count set for a scope and restored at its end: a trainer whose workers
// are threads of this process runs each on one compute thread (N workers, N cores).
class ComputeThreadsScope {
 public:
  explicit ComputeThreadsScope(int n) : was_(compute_threads()) { set_compute_threads(n); }
  ~ComputeThreadsScope() { set_compute_threads(was_); }
  ComputeThreadsScope(const ComputeThreadsScope&) = delete;
  ComputeThreadsScope& operator=(const ComputeThreadsScope&) = delete;

 private:
  int was_;
};

// Measuring OpenBLAS right after the suite's OpenMP kernels, or the other way round: the
// runtime that ran last keeps its workers spinning after its call (OpenBLAS for 2^28 cycles,
// about 0.1 s; libgomp briefly), and on a machine with few cores they take the cores from the
// one measured next (seen: OpenBLAS at n = 256 on 2 threads at 13 instead of 130 GFLOP/s right
// after GEMM v4). Experiments call this, untimed, before each run: when the runtime differs from
// the one used last, it sleeps long enough for the other's workers to stop spinning.
// `pool`: threads of the suite's own (a pool, a graph executor) after OpenBLAS ran on several:
// its spinning workers would take the cores from them just the same.
enum class ThreadRuntime { openmp, openblas, pool };
void settle_runtime(ThreadRuntime next);

}  // namespace concurdl::kernels
