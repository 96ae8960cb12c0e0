// The parallel reduction ladder: one sum, computed nine ways, simplest first. It teaches why a
// parallel loop speeds up (independent chunks), what stops it (one shared accumulator, cache
// lines bouncing between cores, memory bandwidth) and what the frameworks do for you (OpenMP
// `reduction`, std::execution::par on oneTBB, a thread pool).
//
//   sum = Σ element(x[i]),  element = x (memory-bound) or a degree-24 polynomial (compute-bound)
//
//   threads:   t0: x[0 .. n/p)   t1: x[n/p .. 2n/p)   ...   (fork)
//                 partial0          partial1                 (how each variant keeps these is
//                      \____________ + ____________/          the whole lesson)
//                                   sum                      (join)
//
// Every variant has the signature double(std::span<const float> x, unsigned threads, SumKind)
// and accumulates in double. They are rows of kSumVariants (bottom of this file), which the
// experiments (experiments_reduction.cpp), the tests (tests/test_reduction.cpp) and the README
// iterate over: a new variant is one function and one row.
// Run:  concurdl run ch01/sum_compute_bound ch01/sum_memory_bound ch01/false_sharing
#pragma once

#include <pthread.h>
#include <sched.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <execution>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "concurdl/core/hardware.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/threads/thread_pool.hpp"

namespace concurdl::threads {

// What is done per element. memory_bound: nothing but the add, so 4 bytes of input per FLOP and
// the memory bus is the limit (arithmetic intensity 0.25 FLOP/byte). compute_bound: a polynomial
// of kPolyDegree multiply-adds per element, about 12 FLOP/byte, far above any machine's ridge
// point, so the cores are the limit and speedup can approach the core count.
enum class SumKind { memory_bound, compute_bound };

inline constexpr int kPolyDegree = 24;
// Horner: one multiply and one add per degree, plus the reduction's own add.
inline constexpr double kFlopsPerElement[] = {1.0, 2.0 * kPolyDegree + 1.0};
inline constexpr double flops_per_element(SumKind k) {
  return kFlopsPerElement[static_cast<int>(k)];
}

// 1 + t + t^2 + ... + t^24 by Horner's rule in double: positive for t >= 0, and no compiler may
// simplify it without -ffast-math.
inline double costly(float x) {
  const double t = x;
  double p = 1.0;
  for (int k = 0; k < kPolyDegree; ++k) p = p * t + 1.0;
  return p;
}

template <SumKind K>
inline double element(float x) {
  if constexpr (K == SumKind::memory_bound) {
    return x;
  } else {
    return costly(x);
  }
}

// Thread t of p gets [n*t/p, n*(t+1)/p): balanced to within one element, empty chunks allowed
// (n < p), and every index in exactly one chunk.
inline std::pair<std::size_t, std::size_t> chunk_bounds(std::size_t n, unsigned parts, unsigned t) {
  return {n * t / parts, n * (t + 1) / parts};
}

// The serial kernel that the good variants run on each chunk. `omp simd reduction` lets the
// compiler keep several partial sums in vector registers; without it, a double sum is one long
// dependency chain of adds (4 cycles each) and a single core could not even keep up with memory.
template <SumKind K>
inline double sum_chunk(const float* x, std::size_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::size_t i = 0; i < n; ++i) s += element<K>(x[i]);
  return s;
}

inline double sum_chunk(std::span<const float> x, SumKind k) {
  return k == SumKind::memory_bound ? sum_chunk<SumKind::memory_bound>(x.data(), x.size())
                                    : sum_chunk<SumKind::compute_bound>(x.data(), x.size());
}

// The reference that every variant is checked against: a plain loop, in order, in double.
inline double serial_reference(std::span<const float> x, SumKind k) {
  double s = 0;
  for (float v : x) s += k == SumKind::memory_bound ? static_cast<double>(v) : costly(v);
  return s;
}

// How far a correct double-precision sum in another order may lie from serial_reference: any
// summation order of n terms is within (n-1)·u·Σ|term| of the exact sum (u = 2^-53), and each
// compute-bound term carries a few more roundings (Horner, fused or not). Twice that, for the
// reference's own error. `sum_abs` is Σ|element(x[i])|.
inline double sum_tolerance(std::size_t n, double sum_abs) {
  return 2.0 * (static_cast<double>(n) + 2.0 * kPolyDegree + 2.0) * 0x1p-53 * sum_abs;
}

// Moves the calling thread onto one CPU; 0 or the pthread error number (EINVAL: not a CPU this
// process may use).
inline int pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Fork-join with plain threads: run body(t) for t = 0..threads-1, one std::jthread each, and
// return when all have finished (jthread joins in its destructor). Creating the threads costs
// tens of microseconds per call; the pool (v6) and OpenMP (v4) keep theirs.
// With `cpus`, thread t first pins itself to cpus[t % cpus.size()], so that an experiment
// chooses which cores share the work (ch01/false_sharing_placement); empty: the scheduler
// places them. A pin that fails is thrown here, after the join, as std::system_error.
template <class Body>
void fork_join(unsigned threads, Body body, std::span<const int> cpus = {}) {
  std::atomic<int> pin_error{0};
  {
    std::vector<std::jthread> team;
    team.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
      // A copy of `body` per thread, as std::jthread(body, t) would make.
      team.emplace_back([body, &pin_error, cpus, t]() mutable {
        if (!cpus.empty())
          if (const int e = pin_current_thread(cpus[t % cpus.size()]); e != 0) {
            pin_error.store(e);
            return;
          }
        body(t);
      });
  }
  if (const int e = pin_error.load(); e != 0)
    throw std::system_error(e, std::generic_category(), "pthread_setaffinity_np");
}

// A slot per thread, aligned to Align bytes. v2 and v3 are the same code with different slots.
template <std::size_t Align>
struct alignas(Align) Slot {
  double value = 0.0;
};

// The cache line to pad to: 64 bytes (concurdl/core/hardware.hpp says why not
// std::hardware_destructive_interference_size).
using concurdl::kCacheLine;

namespace detail {

template <SumKind K>
double v0_serial(std::span<const float> x, unsigned) {
  return sum_chunk<K>(x.data(), x.size());
}

// One accumulator shared by all threads, updated once per element. x86 has no atomic
// floating-point add, so atomic<double>::fetch_add is a compare-exchange loop: read, add, try
// to publish, retry if another thread got there first. Every element now costs a locked
// instruction on a cache line that every core wants: it gets slower, not faster, with threads.
// (v1 to v3 take the CPUs to pin their threads to, as fork_join does: empty in the ladder.)
template <SumKind K>
double v1_atomic(std::span<const float> x, unsigned threads, std::span<const int> cpus) {
  std::atomic<double> total{0.0};
  fork_join(
      threads,
      [&](unsigned t) {
        const auto range = chunk_bounds(x.size(), threads, t);
        for (std::size_t i = range.first; i < range.second; ++i)
          total.fetch_add(element<K>(x[i]), std::memory_order_relaxed);
      },
      cpus);
  return total.load();
}

// Each thread accumulates into its own slot, in memory: `slot += element` every element, as
// `partial[t] += x[i]` in a textbook does. The atomic_ref with relaxed order is a plain load and
// store on x86; it is there so that the compiler must really do them each time (otherwise it
// would keep the running sum in a register and the lesson would vanish with -O2). The slots
// are never contended logically, only physically: with Align = 8 they share cache lines.
// A load and a store per element also rule out vectorising: v2 and v3 are scalar loops, one
// element per store-to-load round trip (about 8 cycles), slower than v0 even with no sharing.
template <SumKind K, std::size_t Align>
double partials_sum(std::span<const float> x, unsigned threads, std::span<const int> cpus = {}) {
  std::vector<Slot<Align>> partial(threads);
  fork_join(
      threads,
      [&](unsigned t) {
        const auto range = chunk_bounds(x.size(), threads, t);
        std::atomic_ref<double> slot(partial[t].value);
        for (std::size_t i = range.first; i < range.second; ++i)
          slot.store(slot.load(std::memory_order_relaxed) + element<K>(x[i]),
                     std::memory_order_relaxed);
      },
      cpus);
  double s = 0;
  for (const auto& p : partial) s += p.value;
  return s;
}

template <SumKind K>
double v2_adjacent_partials(std::span<const float> x, unsigned threads, std::span<const int> cpus) {
  return partials_sum<K, alignof(double)>(x, threads, cpus);
}

template <SumKind K>
double v3_padded_partials(std::span<const float> x, unsigned threads, std::span<const int> cpus) {
  return partials_sum<K, kCacheLine>(x, threads, cpus);
}

// OpenMP splits the loop statically, gives each thread a private copy of `s`, vectorises each
// thread's part (`simd`) and adds the copies at the end. Its team of threads persists between
// parallel regions, so no thread is created per call after the first.
template <SumKind K>
double v4_omp_reduction(std::span<const float> x, unsigned threads) {
  const float* p = x.data();
  const std::size_t n = x.size();
  double s = 0;
#pragma omp parallel for simd num_threads(threads) reduction(+ : s) schedule(static)
  for (std::size_t i = 0; i < n; ++i) s += element<K>(p[i]);
  return s;
}

// The standard library's parallel algorithm. libstdc++ runs std::execution::par on oneTBB
// (its TBB backend, chosen because <tbb/tbb.h> is installed; the program links TBB): a
// parallel_reduce over chunks whose size TBB picks, on TBB's own worker threads, which by
// default number the hardware threads. The threads axis applies through an arena of that
// size; global_control raises TBB's process-wide limit so that an arena may also be
// oversubscribed (more threads than cores), as the other variants can be. (While two calls
// overlap, the smaller of their limits applies to both.) `par` permits threads, not SIMD:
// each chunk is a plain loop of double adds, so per core this is far slower than v0 on the
// compute-bound sum; v8 is the same call with par_unseq.
template <SumKind K>
double v5_std_par(std::span<const float> x, unsigned threads) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  tbb::task_arena arena(static_cast<int>(threads));
  return arena.execute([&] {
    return std::transform_reduce(std::execution::par, x.begin(), x.end(), 0.0, std::plus<>(),
                                 [](float v) { return element<K>(v); });
  });
}

// The same call with std::execution::par_unseq: also allowed to vectorise each chunk. With
// `par`, libstdc++ runs each chunk as a plain loop, and a loop of double adds cannot be
// vectorised without permission to reorder them; `unseq` is that permission.
template <SumKind K>
double v8_std_par_unseq(std::span<const float> x, unsigned threads) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  tbb::task_arena arena(static_cast<int>(threads));
  return arena.execute([&] {
    return std::transform_reduce(std::execution::par_unseq, x.begin(), x.end(), 0.0, std::plus<>(),
                                 [](float v) { return element<K>(v); });
  });
}

}  // namespace detail

// One pool per worker count, created on first use and kept for the life of the program, as a
// framework keeps its pool: the cost of starting threads is paid once, not per reduction.
inline ThreadPool& shared_pool(unsigned workers) {
  static std::mutex mu;
  static std::map<unsigned, std::unique_ptr<ThreadPool>> pools;
  std::lock_guard lock(mu);
  auto& pool = pools[workers];
  if (!pool) pool = std::make_unique<ThreadPool>(workers);
  return *pool;
}

namespace detail {

// One chunk per worker, submitted to the chapter's thread pool; each task returns its chunk's
// sum through a future and the caller adds them. Nothing is shared while the chunks run.
template <SumKind K>
double v6_pool(std::span<const float> x, unsigned threads) {
  ThreadPool& pool = shared_pool(threads);
  std::vector<std::future<double>> parts;
  parts.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    const auto range = chunk_bounds(x.size(), threads, t);
    const std::span<const float> piece = x.subspan(range.first, range.second - range.first);
    parts.push_back(pool.submit([piece] { return sum_chunk<K>(piece.data(), piece.size()); }));
  }
  double s = 0;
  for (auto& f : parts) s += f.get();
  return s;
}

// The fix for false sharing that needs no padding: do not share at all. Each thread sums its
// chunk in a local variable (a register, vectorised) and writes its slot once, at the end.
// This is the reference solution of exercise 1.1.
template <SumKind K>
double v7_local_sums(std::span<const float> x, unsigned threads) {
  std::vector<double> partial(threads, 0.0);
  fork_join(threads, [&](unsigned t) {
    const auto range = chunk_bounds(x.size(), threads, t);
    partial[t] = sum_chunk<K>(x.data() + range.first, range.second - range.first);
  });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

}  // namespace detail

// Not a reduction: the measured ceiling the others are judged against. Every thread sums the
// WHOLE array on its own: `threads` times the work, nothing written in common, nothing to
// combine. The copies are timed together, from one start (all threads ready, then released at
// once) to the last finish: `threads` x n elements in that time is what the machine can do with
// this kernel. On dedicated cores that is `threads` times one core's rate; on a VM whose vCPUs
// are not worth a core each it is less, and it is the most any reduction could reach. With more
// threads than CPUs the copies take turns, and the span grows with them, so the figure stays at
// the CPUs' capacity: timing each thread by its own clock instead (and adding the rates) counts
// threads that waited for a core as if they had run at once, a "ceiling" above the CPUs.
// Compute-bound use only: copies of a memory-bound sum would share cache lines and overstate
// the bandwidth (calibration measures that ceiling instead).
struct IndependentCopies {
  double mean_sum = 0;  // the mean of the copies' sums: a copy gone wrong fails the check
  double seconds = 0;   // from the common start to the last copy's finish
};

inline IndependentCopies independent_copies(std::span<const float> x, unsigned threads,
                                            SumKind kind) {
  using clock = std::chrono::steady_clock;
  IndependentCopies out;
  std::vector<double> sums(threads, 0.0);
  std::vector<clock::time_point> finished(threads);
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  clock::time_point start;
  fork_join(threads, [&](unsigned t) {
    // The last thread to arrive takes the start and releases the others.
    if (ready.fetch_add(1, std::memory_order_acq_rel) + 1 == threads) {
      start = clock::now();
      go.store(true, std::memory_order_release);
    }
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    sums[t] = sum_chunk(x, kind);
    finished[t] = clock::now();
  });
  out.seconds =
      std::chrono::duration<double>(*std::max_element(finished.begin(), finished.end()) - start)
          .count();
  for (double s : sums) out.mean_sum += s / threads;
  return out;
}

namespace detail {
template <SumKind K>
double v9_independent_copies(std::span<const float> x, unsigned threads) {
  return independent_copies(x, threads, K).mean_sum;
}

}  // namespace detail

// The signature every variant (and every student attempt) has: the sum of element(x[i]) in
// double, using `threads` >= 1 threads. Safe to call from several threads at once.
using SumFn = double (*)(std::span<const float> x, unsigned threads, SumKind kind);

// Picks the compiled instantiation for the runtime kind, so the inner loops are specialised.
template <double (*Memory)(std::span<const float>, unsigned),
          double (*Compute)(std::span<const float>, unsigned)>
double dispatch(std::span<const float> x, unsigned threads, SumKind kind) {
  return kind == SumKind::memory_bound ? Memory(x, threads) : Compute(x, threads);
}

// The rows that can pin their threads (v1 to v3) have this form too: thread t runs on
// cpus[t % cpus.size()], or where the scheduler puts it when `cpus` is empty.
using PinnedSumFn = double (*)(std::span<const float> x, unsigned threads, SumKind kind,
                               std::span<const int> cpus);

template <double (*Memory)(std::span<const float>, unsigned, std::span<const int>),
          double (*Compute)(std::span<const float>, unsigned, std::span<const int>)>
double dispatch_pinned(std::span<const float> x, unsigned threads, SumKind kind,
                       std::span<const int> cpus) {
  return kind == SumKind::memory_bound ? Memory(x, threads, cpus) : Compute(x, threads, cpus);
}

// A pinnable row as a SumFn: unpinned.
template <PinnedSumFn Pinned>
double unpinned(std::span<const float> x, unsigned threads, SumKind kind) {
  return Pinned(x, threads, kind, {});
}

#define CDL_SUM_VARIANT(fn) \
  &dispatch<&detail::fn<SumKind::memory_bound>, &detail::fn<SumKind::compute_bound>>
#define CDL_PINNED_SUM_VARIANT(fn) \
  &dispatch_pinned<&detail::fn<SumKind::memory_bound>, &detail::fn<SumKind::compute_bound>>
// A pinnable row's `fn`: its pinned form, given no CPUs.
#define CDL_PINNABLE_SUM_VARIANT(fn) &unpinned<CDL_PINNED_SUM_VARIANT(fn)>

// A row of the ladder. Rows that write shared memory on every element (v1-v3) run 8 to 100
// times slower than the others: the quick profile leaves them out of the two large sums and
// measures them in ch01/false_sharing, on an array that stays in cache.
// Where a row's threads write while they sum: once each at the end, or per element (an atomic,
// or a slot in memory updated every element).
enum class Writes { at_the_end, per_element };
// The work a run does: n elements shared by the threads (a reduction), or all n elements by
// each thread (the capacity row: threads x n, nothing combined).
enum class SumWork { shared, whole_array_per_thread };
struct SumVariant : VariantInfo {
  std::string_view runtime;  // who runs the threads: none, std::thread, OpenMP, oneTBB, ThreadPool
  SumFn fn;
  Writes writes = Writes::at_the_end;
  SumWork work = SumWork::shared;
  // `fn` with its threads pinned to given CPUs (ch01/false_sharing_placement): set on the rows
  // whose cost depends on where two writers sit (v1 to v3), null on the others.
  PinnedSumFn pinned = nullptr;
};

inline constexpr SumVariant kSumRows[] = {
    {{"v0_serial",
      "one thread, one vectorised loop: the baseline every speedup is measured against"},
     "none",
     CDL_SUM_VARIANT(v0_serial)},
    {{"v1_atomic",
      "threads add every element to one shared std::atomic<double> (a CAS loop: x86 has no "
      "floating-point atomic add): correct, and slower with every thread added",
      {},
      /*quick=*/false},
     "std::thread",
     CDL_PINNABLE_SUM_VARIANT(v1_atomic),
     Writes::per_element,
     SumWork::shared,
     CDL_PINNED_SUM_VARIANT(v1_atomic)},
    {{"v2_adjacent_partials",
      "a running sum per thread, updated in memory every element, in adjacent array slots: no "
      "logical sharing, but the slots share a cache line that ping-pongs between cores (false "
      "sharing)",
      {},
      /*quick=*/false},
     "std::thread",
     CDL_PINNABLE_SUM_VARIANT(v2_adjacent_partials),
     Writes::per_element,
     SumWork::shared,
     CDL_PINNED_SUM_VARIANT(v2_adjacent_partials)},
    {{"v3_padded_partials",
      "the same code with each slot alignas(64), on its own cache line: each core keeps its "
      "line, so it scales (still a scalar load-add-store per element)",
      {},
      /*quick=*/false},
     "std::thread",
     CDL_PINNABLE_SUM_VARIANT(v3_padded_partials),
     Writes::per_element,
     SumWork::shared,
     CDL_PINNED_SUM_VARIANT(v3_padded_partials)},
    {{"v4_omp_reduction",
      "#pragma omp parallel for simd reduction(+:s): private vectorised sums, a persistent "
      "team"},
     "OpenMP",
     CDL_SUM_VARIANT(v4_omp_reduction)},
    {{"v5_std_par",
      "std::transform_reduce(std::execution::par) on libstdc++'s oneTBB backend, in an arena of "
      "`threads`: parallel, but each chunk is a scalar loop (par does not permit SIMD)"},
     "oneTBB",
     CDL_SUM_VARIANT(v5_std_par)},
    {{"v6_pool",
      "one chunk per worker submitted to the chapter's ThreadPool, partial sums through "
      "futures"},
     "ThreadPool",
     CDL_SUM_VARIANT(v6_pool)},
    {{"v7_local_sums",
      "std::thread per chunk, the sum kept in a local (register) variable and written to its "
      "slot once: no sharing at all (exercise 1.1's reference)"},
     "std::thread",
     CDL_SUM_VARIANT(v7_local_sums)},
    {{"v8_std_par_unseq",
      "v5 with std::execution::par_unseq: threads and SIMD, the chunks vectorised as v4's are"},
     "oneTBB",
     CDL_SUM_VARIANT(v8_std_par_unseq)},
    {{"v9_independent_copies",
      "not a reduction: the measured ceiling. Each thread sums the whole array alone (threads x "
      "the work, nothing shared or combined) and times itself: the sum of their rates is what "
      "the machine's threads can do with this kernel"},
     "std::thread",
     CDL_SUM_VARIANT(v9_independent_copies),
     Writes::at_the_end,
     SumWork::whole_array_per_thread},
};
inline constexpr VariantTable kSumVariants{kSumRows};

#undef CDL_SUM_VARIANT
#undef CDL_PINNED_SUM_VARIANT
#undef CDL_PINNABLE_SUM_VARIANT

}  // namespace concurdl::threads
