// Exercises: student stubs call CDL_TODO (errors.hpp). `concurdl exercise CHAPTER` runs the
// chapter's test binary on each exercise's tests (not attempted / wrong: which test / correct),
// then times student against reference in one process, interleaved, and prints the ratio.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"

namespace concurdl {

struct Exercise {
  std::string id;          // "2.3"
  std::string chapter;     // "02-locks"
  std::string title;       // "ticket lock"
  std::string test_binary; // "ch02_tests" (in the directory of the concurdl program)
  std::string test_filter; // gtest filter selecting this exercise's student tests
  // Timing: an experiment whose "impl" axis is {"reference", "student"}; other axes as the
  // exercise needs. Empty `timing.prepare` means the exercise has no timing part.
  Experiment timing;
};

bool register_exercise(Exercise e);

// The thread count an exercise timing runs at, as axis text: every hardware thread, and never
// fewer than two (a lock, a pool or false sharing shows nothing with one thread running).
std::string exercise_threads();
const std::vector<Exercise>& exercises();
// One chapter's exercises in exercise order ("1.2" before "1.10"), whatever the link order.
std::vector<const Exercise*> exercises_of(const std::string& chapter);

enum class ExerciseState { not_attempted, wrong, correct, error };

struct ExerciseOutcome {
  const Exercise* exercise = nullptr;
  ExerciseState state = ExerciseState::error;
  std::string detail;  // failing test and its message, or why it could not run
  int tests_passed = 0, tests_failed = 0, tests_skipped = 0;
};

// Run the gtest binary on the exercise's filter and classify the outcome from its JSON report.
ExerciseOutcome check_exercise(const Exercise& e, const std::filesystem::path& bin_dir);

}  // namespace concurdl
