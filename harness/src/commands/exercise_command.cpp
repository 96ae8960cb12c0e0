// `concurdl exercise CHAPTER [ID ...]`: each exercise's tests (not attempted / wrong / correct),
// then its timing against the reference, interleaved in one process, graded against its target:
// done, correct but slow, or inconclusive. Exit 0 only when every attempted exercise passes.
// With --out DIR the attempt is saved as a run (results.json with an `exercises` section), which
// `concurdl report` merges with other students' into one table per exercise.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "cli_detail.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/harness/cpu_info.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/provenance.hpp"
#include "concurdl/harness/stats.hpp"

namespace concurdl::cli_detail {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct Attempt {
  const Exercise* exercise = nullptr;
  ExerciseOutcome tests;
  Verdict verdict = Verdict::error;
  std::vector<TimingVerdict> timings;  // one per timed configuration
  std::vector<std::string> configurations;
  std::vector<std::string> student_medians, reference_medians;  // "0.0105 s"
  std::vector<Record> records;
  // The configuration that stands for the exercise: the one with the highest cost.
  std::size_t worst() const {
    std::size_t w = 0;
    for (std::size_t i = 1; i < timings.size(); ++i)
      if (timings[i].cost > timings[w].cost) w = i;
    return w;
  }
};

Verdict from_tests(ExerciseState s) {
  switch (s) {
    case ExerciseState::not_attempted:
      return Verdict::not_attempted;
    case ExerciseState::wrong:
      return Verdict::wrong;
    case ExerciseState::error:
      return Verdict::error;
    case ExerciseState::correct:
      return Verdict::correct;
  }
  return Verdict::error;
}

// Times a correct attempt; prints a line per configuration and returns the timing verdicts.
// One round of timing: every configuration, student and reference interleaved, each record's
// samples added to those of the earlier rounds (`pooled`, by parameters), and the verdict judged
// on all of them.
void time_round(Attempt& at, const RunOptions& opt, std::map<Params, std::vector<double>>& pooled) {
  const Exercise& x = *at.exercise;
  at.records = run_configs(expand({&x.timing}, opt), opt, {});
  for (Record& r : at.records) {
    std::vector<double>& all = pooled[r.params];
    all.insert(all.end(), r.samples.begin(), r.samples.end());
    r.samples = all;
    r.stats.median = median(all);
    r.stats.n = all.size();
  }
  at.timings.clear();
  at.configurations.clear();
  at.student_medians.clear();
  at.reference_medians.clear();
  for (const Record& s : at.records) {
    if (s.params.at("impl") != "student") continue;
    Params ref_params = s.params;
    ref_params["impl"] = "reference";
    auto ref = std::find_if(at.records.begin(), at.records.end(),
                            [&](const Record& r) { return r.params == ref_params; });
    if (ref == at.records.end()) continue;
    Params shown = s.params;
    shown.erase("impl");
    if (!s.valid || !ref->valid) {
      fmt::print("    {}: INVALID: {}\n", describe(shown),
                 s.valid ? ref->validation : s.validation);
      at.verdict = Verdict::wrong;
      return;
    }
    const TimingVerdict t = judge_timing(s.samples, ref->samples, s.lower_is_better, x.target);
    at.timings.push_back(t);
    at.configurations.push_back(describe(shown));
    at.student_medians.push_back(fmt::format("{:.3g} {}", s.stats.median, s.unit));
    at.reference_medians.push_back(fmt::format("{:.3g} {}", ref->stats.median, ref->unit));
    fmt::print(
        "    {}: student {:.3g} {} vs reference {:.3g} {}: cost {:.2f}x [{:.2f}, {:.2f}], target "
        "{:.2g}x -> {}\n",
        describe(shown), s.stats.median, s.unit, ref->stats.median, ref->unit, t.cost, t.lo, t.hi,
        x.target, to_string(t.verdict));
  }
  at.verdict = at.timings.empty() ? Verdict::correct : worst_timing(at.timings);
}

// The timing, repeated while its interval straddles the target: each round adds the same number
// of repetitions to the pooled samples, until the verdict is decided or kTimingBudget of timing
// has been spent (then it stays inconclusive, and says so). With --repeat N, one round of N.
constexpr double kTimingBudgetSeconds = 60;
void time_attempt(Attempt& at, const RunOptions& opt) {
  std::map<Params, std::vector<double>> pooled;
  const auto start = std::chrono::steady_clock::now();
  const auto spent = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  time_round(at, opt, pooled);
  int rounds = 1;
  while (!opt.repeat && at.verdict == Verdict::inconclusive) {
    // Another round only if it fits in what is left of the budget.
    if (spent() * (rounds + 1) / rounds > kTimingBudgetSeconds) {
      fmt::print(
          "    still inconclusive after {} rounds ({:.0f} s of timing, the budget is {:.0f} "
          "s): the two are too close to the target, or the machine too noisy, to tell\n",
          rounds, spent(), kTimingBudgetSeconds);
      break;
    }
    ++rounds;
    fmt::print(
        "    the interval straddles the target: measuring again (round {}, the samples "
        "pooled)\n",
        rounds);
    time_round(at, opt, pooled);
  }
}

json to_json(const Attempt& at) {
  const Exercise& x = *at.exercise;
  json j = {{"id", x.id},
            {"title", x.title},
            {"chapter", x.chapter},
            {"verdict", to_string(at.verdict)},
            {"passes", verdict_passes(at.verdict)},
            {"tests_passed", at.tests.tests_passed},
            {"tests_failed", at.tests.tests_failed},
            {"tests_skipped", at.tests.tests_skipped},
            {"target", x.target}};
  if (!at.tests.detail.empty()) j["detail"] = at.tests.detail;
  // The worst configuration's cost ratio stands for the exercise.
  if (!at.timings.empty()) {
    const std::size_t worst = at.worst();
    j["cost"] = at.timings[worst].cost;
    j["cost_ci95"] = {at.timings[worst].lo, at.timings[worst].hi};
    j["configuration"] = at.configurations[worst];
  }
  return j;
}

// The student's numbers the questions may quote.
std::map<std::string, std::string> question_values(const Attempt& at, const std::string& machine) {
  std::map<std::string, std::string> v = {{"machine", machine}};
  if (at.timings.empty()) {  // not attempted, wrong, or not timed: nothing to quote yet
    for (const char* name : {"cost", "cost_ci", "student", "reference", "configuration", "threads"})
      v[name] = "(not measured)";
    return v;
  }
  const std::size_t w = at.worst();
  v["cost"] = fmt::format("{:.2f}×", at.timings[w].cost);
  v["cost_ci"] = fmt::format("[{:.2f}, {:.2f}]", at.timings[w].lo, at.timings[w].hi);
  v["student"] = at.student_medians[w];
  v["reference"] = at.reference_medians[w];
  v["configuration"] = at.configurations[w];
  for (const Record& r : at.records)
    if (auto it = r.params.find("threads"); it != r.params.end()) v["threads"] = it->second;
  return v;
}

// answers.md: each exercise's verdict and its questions, the student's numbers filled in, with
// room for the answers.
std::string answers_markdown(const std::vector<Attempt>& attempts, const std::string& chapter,
                             const std::string& machine) {
  std::string md = fmt::format("# Chapter {}: answers\n\nMachine: {}\n\n", chapter, machine);
  for (const Attempt& at : attempts) {
    const Exercise& x = *at.exercise;
    md +=
        fmt::format("## Exercise {}: {}\n\nVerdict: **{}**", x.id, x.title, to_string(at.verdict));
    const auto values = question_values(at, machine);
    if (!at.timings.empty())
      md += fmt::format(" (cost {} {} at {}; target {:.2g}×; you {}, the reference {})",
                        values.at("cost"), values.at("cost_ci"), values.at("configuration"),
                        x.target, values.at("student"), values.at("reference"));
    md += ".\n\n";
    for (std::size_t i = 0; i < x.questions.size(); ++i)
      md += fmt::format("{}. {}\n\n   *Your answer:*\n\n", i + 1,
                        fill_question(x.questions[i], values));
  }
  return md;
}

// Runs `argv` with its output in `log`; its exit status (127: it could not start).
int run_logged(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string last_lines(const std::string& path, std::size_t n) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += lines[i] + "\n";
  return out;
}

// The student's code is compiled into the chapter's test program (the tests) and into this
// program (the timing), so both must be newer than it. Where this program runs from its build
// tree, both are rebuilt first (cmake --build DIR --target ...); when that relinked this
// program, the new one is started in its place (told so by CONCURDL_EXERCISE_BUILT). Elsewhere, or
// with --no-build, a program older than a file of the chapter's sources is refused: it would grade
// the code as it was. Returns an exit status when the exercise cannot be graded.
std::optional<int> bring_up_to_date(const Args& a, const std::vector<const Exercise*>& mine,
                                    const ChapterInfo& c) {
  if (const char* built = std::getenv("CONCURDL_EXERCISE_BUILT"); built && *built)
    return std::nullopt;  // started again by the rebuild below: everything is new
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  std::vector<std::string> targets;
  for (const Exercise* x : mine)
    if (std::find(targets.begin(), targets.end(), x->test_binary) == targets.end())
      targets.push_back(x->test_binary);
  targets.push_back(self.filename().string());
  const fs::path tree = build::binary_dir;
  const bool in_tree = fs::exists(tree / "CMakeCache.txt", ec) &&
                       fs::equivalent(self.parent_path(), tree / "bin", ec);
  if (!a.no_build && in_tree) {
    struct stat before {};
    ::stat("/proc/self/exe", &before);
    std::vector<std::string> cmd = {build::cmake_command, "--build", tree.string(), "--target"};
    cmd.insert(cmd.end(), targets.begin(), targets.end());
    if (!a.run.quiet)
      std::fprintf(stderr, "concurdl: bringing %s up to date (cmake --build %s)\n",
                   fmt::format("{}", fmt::join(targets, ", ")).c_str(), tree.string().c_str());
    const std::string log = (fs::temp_directory_path() / "concurdl-exercise-build.log").string();
    if (const int rc = run_logged(cmd, log); rc != 0) {
      std::fprintf(stderr, "%s", last_lines(log, 40).c_str());
      std::fprintf(stderr,
                   "concurdl: the build failed (exit %d): the chapter's code does not compile as "
                   "it is; the compiler's last lines are above, the whole log is %s\n",
                   rc, log.c_str());
      return 1;
    }
    struct stat after {};
    if (::stat(self.c_str(), &after) == 0 &&
        (after.st_ino != before.st_ino || after.st_mtime != before.st_mtime)) {
      std::vector<std::string> again = a.argv;
      ::setenv("CONCURDL_EXERCISE_BUILT", "1", 1);
      std::vector<char*> args;
      for (std::string& s : again) args.push_back(s.data());
      args.push_back(nullptr);
      std::fflush(nullptr);
      ::execv(self.c_str(), args.data());
      std::fprintf(stderr, "concurdl: cannot start the rebuilt %s: %s\n", self.c_str(),
                   std::strerror(errno));
      return 1;
    }
    return std::nullopt;
  }
  const fs::path sources = fs::path(build::source_dir) / "chapters" / c.folder;
  for (const std::string& t : targets) {
    const fs::path program = self.parent_path() / t;
    if (const auto newer = source_newer_than(program, sources)) {
      std::fprintf(stderr,
                   "concurdl: %s is older than %s: it would grade the code as it was before; "
                   "rebuild first (cmake --build %s), or run concurdl exercise from the build "
                   "tree without --no-build\n",
                   program.c_str(), newer->c_str(), tree.c_str());
      return 2;
    }
  }
  return std::nullopt;
}

}  // namespace

int cmd_exercise(const Args& a) {
  if (a.targets.empty())
    throw UsageError("exercise: give one chapter, e.g. concurdl exercise ch02 (then exercise ids)");
  const ChapterInfo* c = find_chapter(a.targets[0]);
  if (!c)
    throw UsageError(fmt::format("unknown chapter '{}' (concurdl list shows them)", a.targets[0]));
  std::vector<const Exercise*> mine = exercises_of(c->folder);
  if (mine.empty()) throw UsageError(fmt::format("chapter {} has no exercises", c->folder));
  if (a.targets.size() > 1) {  // only the exercises named
    std::vector<const Exercise*> named;
    for (std::size_t i = 1; i < a.targets.size(); ++i) {
      auto it = std::find_if(mine.begin(), mine.end(),
                             [&](const Exercise* x) { return x->id == a.targets[i]; });
      if (it == mine.end())
        throw UsageError(fmt::format("chapter {} has no exercise '{}'", c->folder, a.targets[i]));
      named.push_back(*it);
    }
    mine = named;
  }
  if (const auto stop = bring_up_to_date(a, mine, *c)) return *stop;
  const RunRequest req = parse_run_request(a.run);
  RunOptions opt = req.options;
  const std::string rerun =
      fmt::format("concurdl exercise {} --repeat 20", fmt::join(a.targets, " "));
  std::vector<Attempt> attempts;
  for (const Exercise* x : mine) {
    Attempt at{x, check_exercise(*x, program_dir())};
    const ExerciseOutcome& o = at.tests;
    at.verdict = from_tests(o.state);
    switch (o.state) {
      case ExerciseState::not_attempted:
        fmt::print(
            "exercise {} {}: not attempted ({} of {} tests skipped: CDL_TODO still in place)\n",
            x->id, x->title, o.tests_skipped, o.tests_skipped + o.tests_passed);
        break;
      case ExerciseState::wrong:
        fmt::print("exercise {} {}: WRONG, {} of {} tests failed; first: {}\n", x->id, x->title,
                   o.tests_failed, o.tests_failed + o.tests_passed + o.tests_skipped, o.detail);
        break;
      case ExerciseState::error:
        fmt::print("exercise {} {}: could not be checked: {}\n", x->id, x->title, o.detail);
        break;
      case ExerciseState::correct:
        fmt::print("exercise {} {}: correct ({} tests passed)\n", x->id, x->title, o.tests_passed);
        if (x->timing.prepare && !a.no_timing && x->timing.unavailable) {
          // Chapter 04's exercises are timed on a GPU: without one, the tests (the CPU's side)
          // are the grade, and the student learns why there is no timing.
          if (const std::string why = x->timing.unavailable(); !why.empty()) {
            fmt::print(
                "  -> exercise {}: correct, not timed: its timing needs what this machine "
                "lacks: {}\n",
                x->id, why);
            break;
          }
        }
        if (x->timing.prepare && !a.no_timing) {
          time_attempt(at, opt);
          std::string why;
          if (at.verdict == Verdict::correct_but_slow)
            why = fmt::format(": correct, but more than {:.2g}x the reference's cost", x->target);
          else if (at.verdict == Verdict::inconclusive)
            why = opt.repeat ? fmt::format(
                                   ": the interval straddles the {:.2g}x target after one round "
                                   "of {}; without --repeat the timing goes on until it decides",
                                   x->target, *opt.repeat)
                             : fmt::format(
                                   ": the interval straddles the {:.2g}x target after the timing "
                                   "budget; on a quieter machine, or with more repetitions: {}",
                                   x->target, rerun);
          else if (at.verdict == Verdict::done)
            why = fmt::format(": correct and within {:.2g}x the reference's cost", x->target);
          fmt::print("  -> exercise {}: {}{}\n", x->id, to_string(at.verdict), why);
        }
        break;
    }
    attempts.push_back(std::move(at));
  }
  // Not attempted is not a failure; anything attempted must pass.
  bool ok = true;
  std::map<Verdict, int> counts;
  for (const Attempt& at : attempts) {
    ++counts[at.verdict];
    if (at.verdict != Verdict::not_attempted && !verdict_passes(at.verdict)) ok = false;
  }
  std::vector<std::string> summary;
  for (const auto& [v, n] : counts) summary.push_back(fmt::format("{} {}", n, to_string(v)));
  fmt::print("{}: {}\n", c->folder, fmt::join(summary, ", "));
  std::size_t questions = 0;
  for (const Attempt& at : attempts) questions += at.exercise->questions.size();
  if (questions > 0 && a.out.empty())
    fmt::print(
        "{} questions to answer from your own numbers: concurdl exercise {} --out DIR writes them "
        "to DIR/.../answers.md with your numbers filled in\n",
        questions, a.targets.front());

  if (!a.out.empty()) {  // the attempt, saved as a run for the instructor's class report
    RunFile f;
    f.concurdl_version = build::version;
    f.command = {"concurdl", "exercise"};
    f.command.insert(f.command.end(), a.targets.begin(), a.targets.end());
    f.provenance = collect_provenance();
    f.provenance["profile"] = profile_name(opt.profile);
    f.provenance["finished"] = utc_now_iso();
    f.exercises = json::array();
    for (Attempt& at : attempts) {
      f.exercises.push_back(to_json(at));
      for (Record& r : at.records) f.records.push_back(std::move(r));
    }
    ensure_directory(a.out, "--out");
    const auto dir = make_run_dir(a.out, f.provenance["host"].get<std::string>(), short_commit());
    write_run(dir, f);
    std::string machine = cpu_info::machine_summary(f.provenance);
    if (machine.empty()) machine = f.provenance["host"].get<std::string>();
    write_file_atomic(dir / "answers.md", answers_markdown(attempts, c->folder, machine));
    std::cout << dir.string() << std::endl;
  }
  return ok ? 0 : 1;
}

}  // namespace concurdl::cli_detail
