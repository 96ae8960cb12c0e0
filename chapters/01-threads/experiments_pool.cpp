// What a task costs: the same batch of independent tasks run by a std::thread per task, the
// chapter's thread pool, oneTBB's task_group and OpenMP tasks. With tiny (empty) tasks the
// time is all overhead, so tasks/s is the inverse of the cost of one task; with medium tasks
// (about 10 us of arithmetic each) the overhead is amortised and the question is scaling.
//   concurdl run ch01/task_overhead   figures
//   ch01_task_overhead_{tiny_rate,medium_rate,medium_speedup} concurdl exercise ch01 exercise 1.3
//   (exercises/student_pool.hpp), timed here too
// Variants, one row each in kPoolVariants:
//   v0_inline           the tasks called in a plain loop: no concurrency, the floor
//   v1_thread_per_task  a std::thread created and joined per task, in waves of `threads`
//   v2_pool             the reference ThreadPool: submit each task, then wait_all()
//   v3_tbb_task_group   oneTBB task_group::run, then wait(), in an arena of `threads`
//   v4_omp_tasks        #pragma omp task from one thread of a team of `threads`, then taskwait
//   v5_stealing_pool    the chapter's StealingPool of `threads`: post each task, then wait_all()
//                       (lanes per thread, steal half, no future, spin before sleep)
//   v6_stealing_pool_mutex  the same pool with std::mutex lanes instead of its spinning lock
#include <fmt/format.h>
#include <omp.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/threads/stealing_pool.hpp"
#include "concurdl/threads/thread_pool.hpp"
#include "exercises/student_pool.hpp"

namespace {

using namespace concurdl;
using concurdl::threads::StealingPool;
using concurdl::threads::StudentPool;
using concurdl::threads::ThreadPool;

// Medium tasks: a dependent chain of xorshift-multiply steps (no memory traffic, nothing to
// vectorise: each step needs the previous one). 6144 steps took about 10 us on the 2-vCPU EPYC
// reference machine (1.6 ns a step); the exact time does not matter, only that it is the same
// for every variant and large against the per-task overhead.
constexpr int kMediumSteps = 6144;

enum class TaskSize { tiny, medium };

std::uint64_t task_value(TaskSize size, std::size_t i) {
  std::uint64_t x = i + 1;
  if (size == TaskSize::medium) {
    for (int k = 0; k < kMediumSteps; ++k) {
      x ^= x >> 29;
      x *= 0x9E3779B97F4A7C15ull;
    }
  }
  return x;
}

// One batch of `n` tasks. Task i writes its value to out[i] and counts itself in hits[i], so the
// check can tell a task lost (0) or run twice (2) from one that ran once. Both are cleared before
// every run (untimed), so each check proves that this run did all the work.
struct Batch {
  TaskSize size = TaskSize::tiny;
  std::size_t n = 0;
  std::vector<std::uint64_t> out;
  std::vector<std::uint32_t> hits;
  int team = 0;  // OpenMP's team size, for the check; 0 for the other variants

  void run_task(std::size_t i) {
    out[i] = task_value(size, i);
    ++hits[i];
  }
  void clear() {
    std::fill(out.begin(), out.end(), 0);
    std::fill(hits.begin(), hits.end(), 0);
    team = 0;
  }
};

std::string check_batch(const Batch& b, const std::vector<std::uint64_t>& expected) {
  std::size_t lost = 0, repeated = 0, wrong = 0;
  for (std::size_t i = 0; i < b.n; ++i) {
    lost += b.hits[i] == 0;
    repeated += b.hits[i] > 1;
    wrong += b.hits[i] == 1 && b.out[i] != expected[i];
  }
  if (lost + repeated + wrong == 0) return "";
  return fmt::format("of {} tasks, {} never ran, {} ran more than once, {} gave a wrong value", b.n,
                     lost, repeated, wrong);
}

// Submit every task of the batch, then wait for all of them. The futures are discarded:
// wait_all() is the completion signal, as in a fork-join framework. The pool still pays for
// each future's shared state (packaged_task), which is part of its per-task cost.
template <class Pool>
void run_on_pool(Pool& pool, Batch& b) {
  for (std::size_t i = 0; i < b.n; ++i) static_cast<void>(pool.submit([&b, i] { b.run_task(i); }));
  pool.wait_all();
}

// oneTBB starts at most (hardware threads - 1) workers unless told otherwise, so an arena of 8 on
// 2 cores would quietly run 2 threads. Raise the process-wide limit to the largest thread count
// asked for (only ever raised; kept for the life of the program).
void allow_tbb_threads(unsigned threads) {
  static std::mutex mu;
  static std::unique_ptr<tbb::global_control> limit;
  std::lock_guard lock(mu);
  if (limit &&
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism) >= threads)
    return;
  limit.reset();
  limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                std::max<std::size_t>(threads, hardware_threads()));
}

// Runs one whole batch on `threads` threads. Made once per configuration outside the timing, so
// a pool's or an arena's threads exist before the clock starts; what is timed is dispatch.
using BatchRunner = std::function<void(Batch&)>;

// Post every task to a stealing pool (no future), then wait_all(): v5 and v6.
template <class Pool>
BatchRunner run_on_stealing_pool(std::shared_ptr<Pool> pool) {
  return [pool](Batch& b) {
    for (std::size_t i = 0; i < b.n; ++i) pool->post([&b, i] { b.run_task(i); });
    pool->wait_all();
  };
}

struct PoolVariant : VariantInfo {
  BatchRunner (*make)(unsigned threads);
};

const PoolVariant kPoolRows[] = {
    {{"v0_inline",
      "no concurrency: the tasks as plain calls on one thread; the floor every other row pays "
      "on top of"},
     [](unsigned) -> BatchRunner {
       return [](Batch& b) {
         for (std::size_t i = 0; i < b.n; ++i) b.run_task(i);
       };
     }},
    {{"v1_thread_per_task",
      "a std::thread per task (created, joined, in waves of `threads`): tens of microseconds of "
      "kernel work per task, so tiny tasks crawl"},
     [](unsigned threads) -> BatchRunner {
       return [threads](Batch& b) {
         std::vector<std::jthread> wave;
         wave.reserve(threads);
         for (std::size_t start = 0; start < b.n; start += threads) {
           const std::size_t end = std::min(b.n, start + threads);
           for (std::size_t i = start; i < end; ++i) wave.emplace_back([&b, i] { b.run_task(i); });
           wave.clear();  // jthread joins on destruction
         }
       };
     }},
    {{"v2_pool",
      "threads started once and reused: a task is a queue push under one mutex plus a wake-up; "
      "orders of magnitude cheaper than a thread, but every task crosses one lock"},
     [](unsigned threads) -> BatchRunner {
       auto pool = std::make_shared<ThreadPool>(threads);
       return [pool](Batch& b) { run_on_pool(*pool, b); };
     }},
    {{"v3_tbb_task_group",
      "work stealing: each thread pushes to its own deque without a lock, idle threads steal, "
      "and the waiting thread runs tasks itself: the pool's shared lock is gone"},
     [](unsigned threads) -> BatchRunner {
       allow_tbb_threads(threads);
       auto arena = std::make_shared<tbb::task_arena>(static_cast<int>(threads));
       arena->initialize();
       return [arena](Batch& b) {
         arena->execute([&b] {
           tbb::task_group group;
           for (std::size_t i = 0; i < b.n; ++i) group.run([&b, i] { b.run_task(i); });
           group.wait();
         });
       };
     }},
    {{"v4_omp_tasks",
      "the compiler's runtime: one thread of the team creates the tasks, the others (and, at "
      "taskwait, the creator) run them; the team is kept between parallel regions"},
     [](unsigned threads) -> BatchRunner {
       return [threads](Batch& b) {
#pragma omp parallel num_threads(static_cast <int>(threads))
#pragma omp single
         {
           b.team = omp_get_num_threads();
           for (std::size_t i = 0; i < b.n; ++i) {
#pragma omp task firstprivate(i) shared(b)
             b.run_task(i);
           }
#pragma omp taskwait
         }
       };
     }},
    {{"v5_stealing_pool",
      "v2 rebuilt the way v3 works: a lane per thread, thieves take half, no future per task, "
      "idle threads spin before they sleep and the waiting thread runs tasks: a task is an "
      "uncontended lock and a deque push"},
     [](unsigned threads) -> BatchRunner {
       return run_on_stealing_pool(std::make_shared<StealingPool>(threads));
     }},
    {{"v6_stealing_pool_mutex",
      "v5 with a std::mutex per lane instead of its spinning lock: a contended mutex sleeps in "
      "the kernel and is woken by a system call, for a critical section of a few deque "
      "operations"},
     [](unsigned threads) -> BatchRunner {
       return run_on_stealing_pool(
           std::make_shared<threads::BasicStealingPool<std::mutex>>(threads));
     }},
};
const VariantTable kPoolVariants{kPoolRows};

// The most tasks a batch takes: v1 starts a thread per task, tens of microseconds each, so 16M
// of them take minutes.
constexpr std::int64_t kMaxTasks = std::int64_t{1} << 24;

TaskSize parse_task_size(const Params& p) {
  const std::string& s = param_str(p, "task");
  if (s == "tiny") return TaskSize::tiny;
  if (s == "medium") return TaskSize::medium;
  throw UsageError(fmt::format("parameter 'task': '{}' is neither tiny nor medium", s));
}

// The pieces every trial of this file shares: a batch, its reference values (computed serially
// once per group), the reset and the check.
struct BatchTrial {
  std::shared_ptr<Batch> batch;
  std::shared_ptr<const std::vector<std::uint64_t>> expected;
};

BatchTrial make_batch(const Params& p, GroupCache& cache) {
  const TaskSize size = parse_task_size(p);
  const auto n = static_cast<std::size_t>(param_int(p, "tasks"));
  auto& expected = cache.get<std::shared_ptr<const std::vector<std::uint64_t>>>("expected", [&] {
    auto v = std::make_shared<std::vector<std::uint64_t>>(n);
    for (std::size_t i = 0; i < n; ++i) (*v)[i] = task_value(size, i);
    return std::shared_ptr<const std::vector<std::uint64_t>>(std::move(v));
  });
  auto b = std::make_shared<Batch>();
  b->size = size;
  b->n = n;
  b->out.assign(n, 0);
  b->hits.assign(n, 0);
  return {b, expected};
}

Trial task_overhead_trial(const Params& p, GroupCache& cache) {
  const PoolVariant& v = kPoolVariants.find(p);
  // v0_inline has no thread count (Experiment::inapplicable): it runs on the calling thread.
  const auto threads =
      has_param(p, "threads") ? static_cast<unsigned>(param_int(p, "threads")) : 1u;
  const BatchTrial bt = make_batch(p, cache);
  BatchRunner run = v.make(threads);
  const bool omp = v.name == "v4_omp_tasks";
  Trial t;
  t.reset = [b = bt.batch] { b->clear(); };
  t.run = [run, b = bt.batch] { run(*b); };
  t.check = [b = bt.batch, e = bt.expected, threads, omp]() -> std::string {
    if (omp && b->team != static_cast<int>(threads))
      return fmt::format("OpenMP ran {} threads, not {} (OMP_DYNAMIC or a thread limit?)", b->team,
                         threads);
    return check_batch(*b, *e);
  };
  // items = tasks: items_per_s is tasks/s, and 1e9 / items_per_s the wall time per task in ns.
  t.work = {static_cast<double>(bt.batch->n)};
  return t;
}

// Exercise 1.3: the student's pool against the reference on a batch of tiny tasks, where the
// time is all submit, dispatch and wait_all.
Trial exercise_pool_trial(Impl impl, const Params& p, GroupCache& cache) {
  const bool student = impl == Impl::student;
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  const BatchTrial bt = make_batch(p, cache);
  BatchRunner run;
  if (student) {
    auto pool = std::make_shared<StudentPool>(threads);
    run = [pool](Batch& b) { run_on_pool(*pool, b); };
  } else {
    auto pool = std::make_shared<ThreadPool>(threads);
    run = [pool](Batch& b) { run_on_pool(*pool, b); };
  }
  Trial t;
  t.reset = [b = bt.batch] { b->clear(); };
  t.run = [run, b = bt.batch] { run(*b); };
  t.check = [b = bt.batch, e = bt.expected] { return check_batch(*b, *e); };
  t.work = {static_cast<double>(bt.batch->n)};
  return t;
}

const bool registered = [] {
  register_experiment({
      .id = "ch01/task_overhead",
      .chapter = "01-threads",
      .title = "Per-task overhead (tiny tasks) and throughput (medium tasks): thread per task, "
               "thread pool, oneTBB task_group, OpenMP tasks",
      .axes = {kPoolVariants.axis("ch01/task_overhead"),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"task", {"tiny", "medium"}},
               // Long enough batches that waking the sleeping workers at the start (tens of
               // microseconds, once per batch) does not pass for a per-task cost.
               {"tasks", {"50K"}, {"10K"}, AxisKind::size, kMaxTasks}},
      // Speedup against running the same tasks inline on one thread: overhead counts against
      // every variant, so tiny tasks show speedups far below 1.
      .baseline = {{"variant", "v0_inline"}, {"threads", "1"}},
      // The inline loop runs on the calling thread whatever the count: measured once.
      .inapplicable = kPoolVariants.inapplicable(
          [](const PoolVariant& v) { return v.name == "v0_inline"; }, {"threads"}),
      .prepare = task_overhead_trial,
      .figures = {{.id = "tiny_rate",
                   .title = "Tiny (empty) tasks: tasks/s; 1e9 / rate = ns per task",
                   .kind = FigureKind::bars,
                   .y = "items_per_s",
                   .where = {{"task", "tiny"}},
                   .log_y = true,
                   .y_label = "tasks/s (log)"},
                  {.id = "medium_rate",
                   .title = "Medium (~10 us) tasks: tasks/s",
                   .kind = FigureKind::bars,
                   .y = "items_per_s",
                   .where = {{"task", "medium"}},
                   .log_y = true,
                   .y_label = "tasks/s (log)"},
                  {.id = "medium_speedup",
                   .title = "Medium (~10 us) tasks: speedup over the inline loop on 1 thread",
                   .kind = FigureKind::speedup,
                   .where = {{"task", "medium"}}}},
      .claims = {{.id = "stealing_pool_near_tbb",
                  // Magnitude: against oneTBB's own scheduler, and decided by how fast an idle
                  // thread wakes (0.41-1.5x over the committed runs).
                  .statement =
                      "How fast the chapter's StealingPool runs tiny tasks at 2 threads against "
                      "oneTBB task_group (oneTBB's time per task over ours)",
                  .select = {{"variant", "v5_stealing_pool"}, {"threads", "2"}, {"task", "tiny"}},
                  .versus = {{"variant", "v3_tbb_task_group"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::peer_kernels, ClaimCause::wakeup_latency},
                  .unit = "×",
                  .min_cpus = 2},
                 {.id = "stealing_pool_beats_thread_pool",
                  // A magnitude: the mutex's and the futures' cost on each machine (2.4-12.9x on
                  // the committed guests).
                  .statement = "How many times cheaper per tiny task the StealingPool (per-thread "
                               "lanes, stealing, no future per task) is than the simple one-mutex "
                               "ThreadPool at 2 threads",
                  .select = {{"variant", "v5_stealing_pool"}, {"threads", "2"}, {"task", "tiny"}},
                  .versus = {{"variant", "v2_pool"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::wakeup_latency, ClaimCause::cores_and_smt},
                  .unit = "×",
                  .min_cpus = 2}},
  });

  return true;
}();

}  // namespace

// The timed half of exercise 1.3 (exercise_timings.hpp).
namespace concurdl::threads::exercise_timings {

Experiment pool() {
  return exercise_timing(
      {.title = "thread pool: student vs reference, a batch of tiny tasks",
       .axes = {{"task", {"tiny"}}, {"tasks", {"20K"}, {"5K"}, AxisKind::size, kMaxTasks}},
       .prepare = exercise_pool_trial});
}

}  // namespace concurdl::threads::exercise_timings
