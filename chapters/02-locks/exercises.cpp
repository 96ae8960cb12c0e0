// Chapter 02's exercises (exercises/exercises.md), graded by `concurdl exercise ch02 [2.1 ...]`:
// the tests first, then the student's code timed against the reference in one process,
// interleaved. Each timing is built beside the experiment that measures its reference row
// (exercise_timings.hpp):
//   2.1 TTAS lock with exponential backoff   vs v3_ttas_backoff
//   2.2 ticket lock                          vs v4_ticket
//   2.3 bounded blocking queue               vs v1_blocking_queue
//   2.4 fix the deadlock                     vs std::scoped_lock
//   2.5 Treiber stack push and pop           vs the reference stack
#include "concurdl/harness/exercise.hpp"
#include "exercise_timings.hpp"

namespace concurdl::locks {

namespace {

const bool registered = [] {
  register_exercise(
      {.id = "2.1",
       .chapter = "02-locks",
       .title = "TTAS lock with exponential backoff",
       .test_binary = "ch02_tests",
       .test_filter = "LockEx2_1/*",
       .timing = exercise_timings::ttas_backoff(),
       .questions = {
           "Your lock made {student} acquisitions against the reference's {reference} at "
           "{configuration}, 100 ns critical sections: a cost of {cost} (the reference's "
           "throughput over yours), interval {cost_ci}. Which of your operations are acquire, "
           "which release, which relaxed, and what breaks if unlock()'s store is relaxed?",
           "Time your lock again with the backoff taken out (plain TTAS) and quote both costs. "
           "What happens at every release without backoff (how many waiters try to take the line "
           "exclusively at once), and what does backoff change?",
           "Run `concurdl run ch02/lock_throughput --set cs=100ns --threads 2,4` and quote the "
           "acquisitions/s of v2_ttas, v3_ttas_backoff and std_mutex at 2 and 4 threads. Why does "
           "spinning cost more once threads outnumber cores, and what does std_mutex do "
           "instead?"}});
  register_exercise(
      {.id = "2.2",
       .chapter = "02-locks",
       .title = "ticket lock",
       .test_binary = "ch02_tests",
       .test_filter = "LockEx2_2/*:TicketFifo/student.*",
       .timing = exercise_timings::ticket(),
       .questions = {
           "Your ticket lock made {student} acquisitions against the reference's {reference} at "
           "{configuration} ({cost}, interval {cost_ci}). Why does unlock() need no "
           "read-modify-write on serving_, and which memory order does its store need?",
           "Run `concurdl run ch02/lock_throughput --set cs=100ns --threads 2,4,8` and quote "
           "v4_ticket's acquisitions/s and Jain's index (the fairness_* charts) at 2 and at 4 "
           "threads. Why is it perfectly fair while every thread has a core?",
           "Why does the ticket lock's throughput collapse once threads outnumber cores (who holds "
           "the next ticket, and where is that thread?), while std_mutex and TTAS do not "
           "collapse?"}});
  register_exercise(
      {.id = "2.3",
       .chapter = "02-locks",
       .title = "bounded blocking queue",
       .test_binary = "ch02_tests",
       .test_filter = "QueueEx2_3/*:BlockingQueueTyped/student.*",
       .timing = exercise_timings::blocking_queue(),
       .questions = {
           "Your queue moved the items in {student} against the reference's {reference} at "
           "{configuration} ({cost}, interval {cost_ci}). At capacity 1024, is the time spent "
           "mostly waiting for room or items, or handing the one mutex back and forth? Say what in "
           "your code tells you.",
           "Why wait with the predicate form of wait() (name both reasons: spurious wake-ups, and "
           "a wake-up whose item another consumer took first), and why must close() notify_all on "
           "both condition variables?",
           "Run `concurdl run ch02/queue_throughput --threads 2,8` and quote v1_blocking_queue and "
           "v2_ring_queue at 2 and at 8 threads. Why does the one-mutex queue slow down with more "
           "threads than cores, and what does the capacity bound do to a producer that outruns the "
           "consumers (back-pressure)?"}});
  register_exercise(
      {.id = "2.4",
       .chapter = "02-locks",
       .title = "fix the deadlock",
       .test_binary = "ch02_tests",
       .test_filter = "TransferEx2_4/*",
       .timing = exercise_timings::transfers(),
       .questions = {"Your transfers took {student} against std::scoped_lock's {reference} at "
                     "{configuration} ({cost}, interval {cost_ci}). Which of the four conditions "
                     "for deadlock (mutual exclusion, hold and wait, no preemption, circular wait) "
                     "does your fix break, and how?",
                     "Run `concurdl run ch02/hazards` and quote the times of deadlock_naive and "
                     "deadlock_scoped_lock. What does the first one measure, and why does it take "
                     "two transfers in opposite directions to deadlock?",
                     "If you ordered the two locks yourself: by what, why does that order not "
                     "depend on the direction of the transfer, and what does it rule out? (If you "
                     "used std::scoped_lock: what does it do when its second lock is busy?)"}});
  register_exercise(
      {.id = "2.5",
       .chapter = "02-locks",
       .title = "Treiber stack push and pop",
       .test_binary = "ch02_tests",
       .test_filter = "StackEx2_5/*",
       .timing = exercise_timings::treiber_stack(),
       .questions = {
           "Your stack took {student} against the reference's {reference} at {configuration} "
           "({cost}, interval {cost_ci}). Why may pop() give the node back to the pool only after "
           "its CAS has won?",
           "What goes wrong if the CAS does not bump the tag? Describe the ABA interleaving step "
           "by step (which thread is preempted where, which node comes back), and say whether the "
           "churn test caught it when you tried.",
           "Run `concurdl run ch02/stack_throughput --threads 1,2,8` and quote treiber_stack and "
           "locked_stack at 1, 2 and 8 threads. Lock-free guarantees progress, not speed: explain "
           "your numbers with what a failed CAS costs on one contended line."}});
  return true;
}();

}  // namespace

}  // namespace concurdl::locks
