// Chapter 01's exercises (exercises/exercises.md), graded by `concurdl exercise ch01 [1.1 ...]`:
// the tests first, then the student's code timed against the reference row in one process,
// interleaved. Each timing is built beside the experiment that measures its reference row
// (exercise_timings.hpp):
//   1.1 parallel sum with std::thread   student_thread_sum vs v7_local_sums
//   1.2 fix the false sharing           student_padded_sum vs v3_padded_partials
//   1.3 thread pool                     StudentThreadPool vs ThreadPool, a batch of tiny tasks
#include "concurdl/harness/exercise.hpp"
#include "exercise_timings.hpp"

namespace concurdl::threads {

namespace {

const bool registered = [] {
  register_exercise(
      {.id = "1.1",
       .chapter = "01-threads",
       .title = "parallel sum with std::thread",
       .test_binary = "ch01_tests",
       .test_filter = "ReductionEx1_1/*",
       .timing = exercise_timings::thread_sum(),
       .questions = {"Your std::thread sum took {student} against v7_local_sums' {reference} at "
                     "{configuration}: a cost of {cost}, 95% interval {cost_ci}. If you are "
                     "slower, what does your version do per call or per element that v7 does not "
                     "(extra threads, a shared or adjacent accumulator, copies)?",
                     "Run `concurdl run ch01/sum_compute_bound --threads 1,2,4` and quote "
                     "v7_local_sums' speedup at 2 and at 4 threads. Why does it stop growing once "
                     "threads outnumber the CPUs of {machine}?",
                     "Why must each thread add into a variable of its own rather than `+=` into "
                     "one shared double, when the tests may pass either way? Say what "
                     "ThreadSanitizer reports and what the shared version can lose."}});
  register_exercise(
      {.id = "1.2",
       .chapter = "01-threads",
       .title = "fix the false sharing",
       .test_binary = "ch01_tests",
       .test_filter = "ReductionEx1_2/*",
       .timing = exercise_timings::padded_sum(),
       .questions = {
           "Your padded sum took {student} against v3_padded_partials' {reference} at "
           "{configuration} ({cost}, interval {cost_ci}). What are sizeof(StudentSlot) and "
           "alignof(StudentSlot) now, and how many threads' slots share one 64-byte line?",
           "Run `concurdl run ch01/false_sharing --threads 2,4` and quote v3_padded_partials' "
           "speedup over v2_adjacent_partials at 2 and at 4 threads. Explain the 2-thread number "
           "with cache-line ownership (MESI): what must happen to the line before a core can write "
           "its slot when the other core wrote last?",
           "Why does the gap change when threads outnumber cores (4 threads on 2 CPUs)? Run "
           "`concurdl run ch01/false_sharing_placement`: which placements does {machine} offer "
           "(the records' placements_unavailable note says why one is missing), and what is "
           "v3's speedup over v2 in each? Explain the difference with where the line has to "
           "go (one core's L1, a shared L3, another L3)."}});
  register_exercise({
      .id = "1.3",
      .chapter = "01-threads",
      .title = "thread pool: submit and wait_all",
      .test_binary = "ch01_tests",
      .test_filter = "PoolTyped/student.*",
      .timing = exercise_timings::pool(),
      .questions =
          {"Your pool ran the batch of tiny tasks in {student} against the reference's {reference} "
           "at {configuration} ({cost}, interval {cost_ci}). Divide by the number of tasks: how "
           "many nanoseconds per task, and where do they go (the mutex, the condition-variable "
           "wake-up, the packaged_task and its future)?",
           "Run `concurdl run ch01/task_overhead --threads 2` and quote the time per tiny task of "
           "v1_thread_per_task, v2_pool and v5_stealing_pool (the time of the 10K tasks / 10K). "
           "Why is creating a thread per task so much dearer than handing a task to a running "
           "worker, and what does the StealingPool remove from v2's path?",
           "Why does wait_all() wait for pending_ == 0 and not for an empty queue, and why does "
           "submit() call notify_one after unlocking mu_?"},
  });
  return true;
}();

}  // namespace

}  // namespace concurdl::threads
