// How many threads the compute kernels use: the suite's own OpenMP kernels (GEMM v4, the
// element-wise ops) and OpenBLAS alike. One setting, so that "--threads 2" means two threads
// for every kernel a training step calls, and so that a run is reproducible: every kernel's
// work split depends only on this count, never on timing.
#pragma once

#include <cstddef>

#ifdef _OPENMP
#include <omp.h>
#endif

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

// Which threads ran this process's last GEMM (gemm() notes it): OpenBLAS's pool, or OpenMP
// (GEMM v4's team). After OpenBLAS its workers spin on the cores for a while (above), and an
// OpenMP team beside them waits for cores: the MLP's SGD update at 2 threads took 2.65 ms in a
// 2-thread team right after OpenBLAS GEMMs, 27 us on one thread. After GEMM v4 the team is the
// one the GEMM just used, and warm.
void note_gemm_runtime(ThreadRuntime r);
// True when the last GEMM ran on OpenBLAS (false before any GEMM).
bool after_openblas_gemm();

// body(begin, end) over [0, n): on the calling thread unless `parallel` (and more than one
// compute thread, and not right after an OpenBLAS GEMM), else split statically over
// compute_threads(): for element-wise work, where any split gives the same bits. Write the loop as
// a plain loop in `body`, which the compiler vectorises: the same loop inside an OpenMP `parallel
// for simd` whose `if` turned the team off did not vectorise (GCC 12, ReLU' on 16K floats: 7.6 us
// in the region, 0.84 us as a plain loop), and the region's call costs a microsecond besides.
template <class Body>
void for_range(std::size_t n, bool parallel, Body body) {
  const int threads = compute_threads();
  if (!parallel || threads <= 1 || n < 2 || after_openblas_gemm()) {
    body(std::size_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto p = static_cast<std::size_t>(omp_get_num_threads());
#else
    const std::size_t t = 0, p = 1;
#endif
    body(n * t / p, n * (t + 1) / p);
  }
}

}  // namespace concurdl::kernels
