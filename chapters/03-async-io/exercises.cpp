// Chapter 03's exercises (exercises/exercises.md), graded by `concurdl exercise ch03 [3.1 ...]`:
// the tests first, then the student's code timed against the reference in one process,
// interleaved. Each timing is built beside the experiment that measures its reference
// (exercise_timings.hpp):
//   3.1 prefetching loader with a bounded queue
//   3.2 batched io_uring read (where liburing was found)
//   3.3 ordered delivery from N workers (reorder buffer)
#include <string>
#include <vector>

#include "concurdl/harness/exercise.hpp"
#include "exercise_timings.hpp"

namespace concurdl::async_io {

namespace {

const bool registered = [] {
  register_exercise(
      {.id = "3.1",
       .chapter = "03-async-io",
       .title = "prefetching loader with a bounded queue",
       .test_binary = "ch03_tests",
       .test_filter = "LoaderTyped/student_prefetch.*",
       .timing = exercise_timings::prefetch(),
       .questions = {
           "Your loader's epoch took {student} against the reference's {reference} at "
           "{configuration} ({cost}, interval {cost_ci}). Run `concurdl run ch03/loader_epoch "
           "--set compute_ratio=1` and quote the sync and prefetch epochs and prefetch's "
           "overlap_efficiency: why is the epoch about max(io, compute) and not io + compute?",
           "Why does produce() make a batch without holding mu_? What would the epoch be if it "
           "held the lock while reading, and why?",
           "What does the bound `prefetch` buy (back-pressure: how far ahead the producer can get, "
           "and so memory)? When would a deeper queue shorten the epoch, and when not?"}});
  std::vector<std::string> uring_questions = {
      "Your batched read took {student} against the reference's {reference} at {configuration} "
      "({cost}, interval {cost_ci}). Run `concurdl run ch03/read_throughput --set request=64K` and "
      "quote uring at qd=8 against pread at qd=1 from the page cache: does depth help there, and "
      "where does the time go when no device is involved?",
      "Quote the same pair from `concurdl run ch03/read_direct --set request=64K` (O_DIRECT: every "
      "read reaches the device). Why do reads in flight pay off when each read waits for the "
      "device, and what bounds the gain?",
      "Why may your function not throw while reads are still in flight, and what must it do with a "
      "short read (0 < res < asked) and with res == 0?"};
#if CONCURDL_HAVE_URING
  register_exercise({.id = "3.2",
                     .chapter = "03-async-io",
                     .title = "batched io_uring read",
                     .test_binary = "ch03_tests",
                     .test_filter = "UringBatch/student.*",
                     .timing = exercise_timings::uring_read(),
                     .questions = uring_questions});
#else
  register_exercise({.id = "3.2",
                     .chapter = "03-async-io",
                     .title = "batched io_uring read (needs liburing; skipped in this build)",
                     .test_binary = "ch03_tests",
                     .test_filter = "UringBatch/student.*",
                     .questions = uring_questions});
#endif
  register_exercise(
      {.id = "3.3",
       .chapter = "03-async-io",
       .title = "ordered delivery from N workers (reorder buffer)",
       .test_binary = "ch03_tests",
       .test_filter = "ReorderTyped/student.*:LoaderTyped/student_ordered.*",
       .timing = exercise_timings::reorder(),
       .questions = {
           "Your ordered loader delivered the epoch in {student} against the reference's "
           "{reference} at {configuration} ({cost}, interval {cost_ci}). Run `concurdl run "
           "ch03/loader_workers --set workers=1,2,4,8` and quote workers_ordered and "
           "workers_unordered at each worker count: why do more workers than CPUs still help here?",
           "Why can the worker holding batch `next` never be blocked by the window, and why does "
           "that rule out a deadlock however the workers are scheduled?",
           "What does ordered delivery cost when one batch in a window is slow (head-of-line "
           "blocking), and what happens to memory and to the workers while the reorder buffer "
           "waits for it?"}});
  return true;
}();

}  // namespace

}  // namespace concurdl::async_io
