// Exercises: student stubs call CDL_TODO (errors.hpp). `concurdl exercise CHAPTER` runs the
// chapter's test binary on each exercise's tests (not attempted / wrong: which test / correct),
// then times student against reference in one process, interleaved, and prints the ratio.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"

namespace concurdl {

struct Exercise {
  std::string id;           // "2.3"
  std::string chapter;      // "02-locks"
  std::string title;        // "ticket lock"
  std::string test_binary;  // "ch02_tests" (in the directory of the concurdl program)
  std::string test_filter;  // gtest filter selecting this exercise's student tests
  // Timing: an experiment whose "impl" axis is {"reference", "student"}, built by
  // exercise_timing() below. Empty `timing.prepare` means the exercise has no timing part.
  Experiment timing;
  // The performance target: the student's cost (time, or 1 / throughput) at most `target`
  // times the reference's, judged on the 95% interval of the ratio of medians (CS149's rule,
  // 1.2, by default). An attempt is done only when it is correct and meets it.
  double target = 1.2;
  // 2-4 questions handed in with the attempt: what the student measured and the mechanism
  // behind it. `concurdl exercise --out` writes them to answers.md with the student's own
  // numbers filled in where a question names them: {cost}, {cost_ci} ("[0.97, 1.04]"),
  // {student} and {reference} (the medians with their unit), {configuration}
  // ("n=4M, threads=2"), {threads}, {machine}. Model answers: docs/instructors/.
  std::vector<std::string> questions;
};

// A question with the attempt's numbers in place of its {names}; a name the attempt has no
// value for is left as it is.
std::string fill_question(std::string question, const std::map<std::string, std::string>& values);

// Which implementation a timing configuration runs: the chapter's or the student's.
enum class Impl { reference, student };

// What an exercise's timing needs from its chapter; exercise_timing() builds the Experiment
// around it: the "impl" axis {reference, student}, measured interleaved ({"impl"}), the
// exercise's thread count and the chapter's own axes.
struct ExerciseTiming {
  std::string title;  // "ticket lock, student vs v4_ticket"
  // The axis that carries the thread count, with the one value exercise_threads(); empty: the
  // exercise has none (one thread, or its concurrency is another axis such as a queue depth).
  std::string threads_axis = "threads";
  std::vector<Axis> axes;  // the exercise's other axes: sizes, a critical section, ...
  std::string metric = "time";
  std::string unit = "s";
  bool lower_is_better = true;
  std::vector<Metric> metrics;  // named metrics the trials' samples carry (Experiment::metrics)
  // 0: kExerciseRepetitions. More than a run's default: the verdict rests on the interval of a
  // ratio of medians, which five repetitions of a 1 ms trial leave wide enough to straddle the
  // target with the reference's own code in the stub (measured: 0.99x [0.52, 1.95]).
  int repetitions = 0;
  std::function<Trial(Impl, const Params&, GroupCache&)> prepare;
};
inline constexpr int kExerciseRepetitions = 15;
// The timing Experiment. Its id and chapter are filled in by register_exercise:
// "ch02/exercise_2.2" and the exercise's chapter.
Experiment exercise_timing(ExerciseTiming t);

// Throws std::logic_error on a duplicate id, or a timing without the "impl" axis.
bool register_exercise(Exercise e);

// The thread count an exercise timing runs at, as axis text: every hardware thread (up to
// kMaxThreads), and never fewer than two (a lock, a pool or false sharing shows nothing with
// one thread running).
std::string exercise_threads();
const std::vector<Exercise>& exercises();
// One chapter's exercises in exercise order ("1.2" before "1.10"), whatever the link order.
std::vector<const Exercise*> exercises_of(const std::string& chapter);

enum class ExerciseState { not_attempted, wrong, correct, error };

// The grade of an attempt: its tests, then its timing against the target.
enum class Verdict {
  not_attempted,     // CDL_TODO still in place
  wrong,             // a test failed (or never returned)
  error,             // the tests could not be run
  correct,           // tests pass; not timed (--no-timing, or the exercise has no timing)
  correct_but_slow,  // tests pass; the cost ratio's interval lies above the target
  inconclusive,      // tests pass; the interval straddles the target: measure again
  done,              // tests pass; the interval lies at or below the target
};
const char* to_string(Verdict v);  // "not attempted", "WRONG", ..., "CORRECT BUT SLOW", "done"
// What `concurdl exercise` accepts: done, or correct when nothing is timed.
bool verdict_passes(Verdict v);

// One configuration's timing: the student's cost over the reference's (time: student /
// reference; a throughput: reference / student) with its 95% bootstrap interval, and the
// verdict against `target`.
struct TimingVerdict {
  Verdict verdict = Verdict::inconclusive;
  double cost = 0, lo = 0, hi = 0;
};
TimingVerdict judge_timing(const std::vector<double>& student, const std::vector<double>& reference,
                           bool lower_is_better, double target);
// Several configurations: the worst of their verdicts (slow before inconclusive before done).
Verdict worst_timing(const std::vector<TimingVerdict>& v);

struct ExerciseOutcome {
  const Exercise* exercise = nullptr;
  ExerciseState state = ExerciseState::error;
  std::string detail;  // failing test and its message, or why it could not run
  int tests_passed = 0, tests_failed = 0, tests_skipped = 0;
};

// Run the gtest binary on the exercise's filter and classify the outcome from its JSON report.
ExerciseOutcome check_exercise(const Exercise& e, const std::filesystem::path& bin_dir);

// The newest code file under `sources` (recursively: C++, CUDA and CMakeLists.txt, not notes)
// modified after `program` was, if any: a test
// program older than the code it tests would grade what the student wrote before. Nothing when
// either is missing (an installed program far from its sources).
std::optional<std::filesystem::path> source_newer_than(const std::filesystem::path& program,
                                                       const std::filesystem::path& sources);

}  // namespace concurdl
