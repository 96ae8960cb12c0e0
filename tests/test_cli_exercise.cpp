// The exercise workflow end to end: each outcome (not attempted, wrong, correct, a deadlock),
// verdicts against the target and the exit code, and a class's saved attempts merged into one
// table and CSV. Drives `concurdl-selftest`'s toy chapter (tests/selftest).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/records.hpp"

using concurdl::load_run;
using namespace cli_test;

TEST_F(Cli, ExerciseReportsEachOutcomeAndTimesTheCorrectOne) {
  // The toy's samples are modelled costs (tests/selftest/experiments.cpp): the verdicts below
  // do not depend on this machine's load.
  const Result r = run("exercise ch99 --repeat 9 --quiet --no-build", CONCURDL_SELFTEST_BIN,
                       "CONCURDL_EXERCISE_TIMEOUT=3");
  EXPECT_EQ(r.rc, 1) << "a wrong attempt must fail the command\n" << r.out << r.err;
  EXPECT_NE(r.out.find("exercise 99.1 untouched stub: not attempted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exercise 99.2 wrong attempt: WRONG"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ToySum/ex99_2."), std::string::npos) << "names the failing test\n" << r.out;
  EXPECT_NE(r.out.find("exercise 99.3 right attempt: correct"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cost"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exercise 99.4 endless loop: WRONG"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("did not finish within 3 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> exercise 99.5: CORRECT BUT SLOW"), std::string::npos) << r.out;
  // Correct, and its timing cannot run here: it says why, and that is no failure of its own.
  EXPECT_NE(r.out.find("exercise 99.6 timed on a device: correct"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> exercise 99.6: correct, not timed: its timing needs what this machine "
                       "lacks: no toy device: this machine has none"),
            std::string::npos)
      << r.out;
  expect_usage_error(run("exercise ch00"), "no exercises");
  expect_usage_error(run("exercise ch99 99.9"), "no exercise '99.9'");
}

// A class's attempts, saved with `exercise --out` on three machines, merge into one table and
// one chart per exercise, and a CSV with a row per attempt and exercise.
TEST_F(Cli, SavedAttemptsFromThreeMachinesMergeIntoAClassTable) {
  const char* hosts[] = {"lab-a", "lab-b", "laptop-c"};
  std::vector<std::string> dirs;
  for (const char* host : hosts) {
    // 15 repetitions, the default (the toy's costs are modelled, so any count gives these
    // verdicts).
    const Result r = run("exercise ch99 99.1 99.3 99.5 --repeat 15 --quiet --no-build --out class");
    ASSERT_EQ(r.rc, 1) << r.out << r.err;  // 99.5 is slow
    const fs::path dir = dir_ / r.last_line();
    ASSERT_TRUE(fs::is_regular_file(dir / "results.json")) << r.out;
    // Each student's own machine: the provenance is the only thing that differs.
    nlohmann::json j = nlohmann::json::parse(slurp(dir / "results.json"));
    ASSERT_EQ(j.at("exercises").size(), 3u);
    // The questions handed in with it, the student's own numbers filled in.
    const std::string answers = slurp(dir / "answers.md");
    EXPECT_NE(
        answers.find("## Exercise 99.5: slow attempt\n\nVerdict: **CORRECT BUT SLOW** (cost "),
        std::string::npos)
        << answers;
    EXPECT_NE(answers.find("1. Your sum took "), std::string::npos) << answers;
    EXPECT_NE(answers.find(" at n=1M ("), std::string::npos) << answers;
    EXPECT_EQ(answers.find("{student}"), std::string::npos) << answers;
    EXPECT_NE(answers.find("Verdict: **not attempted**."), std::string::npos) << answers;
    j["provenance"]["host"] = host;
    std::ofstream(dir / "results.json") << j.dump();
    dirs.push_back(dir.string());
  }
  const Result rep =
      run("report " + dirs[0] + " " + dirs[1] + " " + dirs[2] + " --out class-report --csv");
  ASSERT_EQ(rep.rc, 0) << rep.err;
  const std::string csv = slurp(dir_ / "class-report" / "exercises.csv");
  std::size_t rows = 0;
  for (char c : csv) rows += c == '\n';
  EXPECT_EQ(rows, 1u + 3u * 3u) << csv;  // a header, then 3 attempts x 3 exercises
  for (const char* host : hosts) EXPECT_NE(csv.find(std::string(host) + ","), std::string::npos);
  EXPECT_NE(csv.find(",99.5,slow attempt,CORRECT BUT SLOW,no,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",99.3,right attempt,"), std::string::npos) << csv;
  const std::string md = slurp(dir_ / "class-report" / "report.md");
  EXPECT_NE(md.find("## Class results: exercises"), std::string::npos);
  EXPECT_NE(md.find("### Exercise 99.5: slow attempt"), std::string::npos);
  EXPECT_TRUE(fs::is_regular_file(dir_ / "class-report" / "figures" / "exercise_99_5.dat"));
  // --csv over runs that hold no attempt is a usage error.
  const Result plain = run("run ch99/sum --profile smoke --no-calibrate --quiet --out plain");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  expect_usage_error(run("report " + plain.last_line() + " --csv"), "--csv");
}

// Speed is part of "done": a correct attempt 4x the reference's time is correct but slow
// (exit 1); the reference's own code in the stub's place is done (exit 0); an exercise not
// attempted fails nothing; --no-timing grades correctness alone.
TEST_F(Cli, ExerciseVerdictsWeighTheTargetAndSetTheExitCode) {
  const Result slow = run("exercise ch99 99.5 --repeat 15 --quiet --no-build");
  EXPECT_EQ(slow.rc, 1) << slow.out << slow.err;
  EXPECT_NE(slow.out.find("-> exercise 99.5: CORRECT BUT SLOW: correct, but more than 1.2x"),
            std::string::npos)
      << slow.out;
  const Result done = run("exercise ch99 99.3 --repeat 15 --quiet --no-build");
  EXPECT_EQ(done.rc, 0) << done.out << done.err;
  EXPECT_NE(done.out.find("-> exercise 99.3: done: correct and within 1.2x"), std::string::npos)
      << done.out;
  // An interval that straddles the target is measured again, its samples pooled, until it
  // decides: 99.7's first round is too noisy, its second is not.
  const Result noisy = run("exercise ch99 99.7 --quiet --no-build");
  EXPECT_EQ(noisy.rc, 0) << noisy.out << noisy.err;
  EXPECT_NE(noisy.out.find("measuring again (round 2"), std::string::npos) << noisy.out;
  EXPECT_NE(noisy.out.find("-> exercise 99.7: done"), std::string::npos) << noisy.out;
  // With --repeat N, one round of N: the noisy start stays undecided, and says what to do.
  const Result once = run("exercise ch99 99.7 --repeat 9 --quiet --no-build");
  EXPECT_EQ(once.rc, 1) << once.out << once.err;
  EXPECT_NE(once.out.find("-> exercise 99.7: INCONCLUSIVE"), std::string::npos) << once.out;
  EXPECT_EQ(once.out.find("measuring again"), std::string::npos) << once.out;
  const Result untouched = run("exercise ch99 99.1 --quiet --no-build");
  EXPECT_EQ(untouched.rc, 0) << untouched.out;
  EXPECT_NE(untouched.out.find("1 not attempted"), std::string::npos) << untouched.out;
  const Result untimed = run("exercise ch99 99.5 --no-timing --quiet --no-build");
  EXPECT_EQ(untimed.rc, 0) << untimed.out;
  EXPECT_NE(untimed.out.find("1 correct"), std::string::npos) << untimed.out;
}

// A test program older than a code file of its chapter would grade the code as it was:
// source_newer_than names the newest such file; notes and a README do not count.
TEST(ExerciseSources, ACodeFileNewerThanTheProgramIsNamed) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() /
      ("concurdl-stale-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir / "chapter" / "exercises");
  const fs::path program = dir / "ch09_tests", stub = dir / "chapter/exercises/student.hpp",
                 notes = dir / "chapter/exercises/exercises.md";
  for (const fs::path& f : {program, stub, notes}) std::ofstream(f) << "x";
  const auto built = fs::last_write_time(program);
  fs::last_write_time(stub, built - std::chrono::seconds(10));
  fs::last_write_time(notes, built + std::chrono::seconds(10));
  EXPECT_FALSE(concurdl::source_newer_than(program, dir / "chapter")) << "only notes are newer";
  fs::last_write_time(stub, built + std::chrono::seconds(5));
  EXPECT_EQ(concurdl::source_newer_than(program, dir / "chapter"), stub);
  EXPECT_FALSE(concurdl::source_newer_than(dir / "no-such-program", dir / "chapter"));
  EXPECT_FALSE(concurdl::source_newer_than(program, dir / "no-such-chapter"));
  fs::remove_all(dir);
}
