// Exercises: classify a student's attempt by running the chapter's test binary on the
// exercise's tests and reading GoogleTest's JSON report.
#include "concurdl/harness/exercise.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "concurdl/harness/stats.hpp"

namespace concurdl {

namespace fs = std::filesystem;

namespace {
std::vector<Exercise>& exercise_list() {
  static std::vector<Exercise> list;
  return list;
}
int exercise_timeout_s() {
  if (const char* v = std::getenv("CONCURDL_EXERCISE_TIMEOUT")) {
    const int s = std::atoi(v);
    if (s > 0) return s;
  }
  return 300;
}

}  // namespace

Experiment exercise_timing(ExerciseTiming t) {
  Experiment e;
  e.title = std::move(t.title);
  e.axes.push_back({"impl", {"reference", "student"}});
  if (!t.threads_axis.empty())
    e.axes.push_back({t.threads_axis, {exercise_threads()}, {}, AxisKind::count, kMaxThreads});
  for (Axis& a : t.axes) e.axes.push_back(std::move(a));
  e.metric = std::move(t.metric);
  e.unit = std::move(t.unit);
  e.lower_is_better = t.lower_is_better;
  e.metrics = std::move(t.metrics);
  e.interleave = {"impl"};
  e.repetitions = t.repetitions > 0 ? t.repetitions : kExerciseRepetitions;
  if (t.prepare)
    e.prepare = [prepare = std::move(t.prepare)](const Params& p, GroupCache& cache) {
      return prepare(param_str(p, "impl") == "student" ? Impl::student : Impl::reference, p, cache);
    };
  return e;
}

std::string fill_question(std::string question, const std::map<std::string, std::string>& values) {
  for (const auto& [name, value] : values) {
    const std::string key = "{" + name + "}";
    for (std::size_t pos = 0; (pos = question.find(key, pos)) != std::string::npos;
         pos += value.size())
      question.replace(pos, key.size(), value);
  }
  return question;
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::not_attempted:
      return "not attempted";
    case Verdict::wrong:
      return "WRONG";
    case Verdict::error:
      return "could not be checked";
    case Verdict::correct:
      return "correct";
    case Verdict::correct_but_slow:
      return "CORRECT BUT SLOW";
    case Verdict::inconclusive:
      return "INCONCLUSIVE";
    case Verdict::done:
      return "done";
  }
  return "?";
}

bool verdict_passes(Verdict v) { return v == Verdict::done || v == Verdict::correct; }

TimingVerdict judge_timing(const std::vector<double>& student, const std::vector<double>& reference,
                           bool lower_is_better, double target) {
  const Ratio r =
      lower_is_better ? ratio_of_medians(student, reference) : ratio_of_medians(reference, student);
  TimingVerdict out{Verdict::inconclusive, r.value, r.lo, r.hi};
  if (r.lo > target)
    out.verdict = Verdict::correct_but_slow;
  else if (r.hi <= target)
    out.verdict = Verdict::done;
  return out;
}

Verdict worst_timing(const std::vector<TimingVerdict>& v) {
  Verdict worst = Verdict::done;
  for (const TimingVerdict& t : v) {
    if (t.verdict == Verdict::correct_but_slow) return Verdict::correct_but_slow;
    if (t.verdict == Verdict::inconclusive) worst = Verdict::inconclusive;
  }
  return worst;
}

bool register_exercise(Exercise e) {
  auto& list = exercise_list();
  for (const auto& x : list)
    if (x.id == e.id) throw std::logic_error("exercise " + e.id + " registered twice");
  if (!(e.target >= 1) || !std::isfinite(e.target))
    throw std::logic_error("exercise " + e.id + ": its target must be a finite ratio >= 1");
  if (e.timing.prepare) {
    // "02-locks" + "2.2" -> "ch02/exercise_2.2"
    if (e.timing.id.empty())
      e.timing.id = "ch" + e.chapter.substr(0, e.chapter.find('-')) + "/exercise_" + e.id;
    if (e.timing.chapter.empty()) e.timing.chapter = e.chapter;
    const bool has_impl = std::any_of(e.timing.axes.begin(), e.timing.axes.end(),
                                      [](const Axis& a) { return a.name == "impl"; });
    if (!has_impl) throw std::logic_error("exercise " + e.id + ": its timing has no 'impl' axis");
  }
  list.push_back(std::move(e));
  return true;
}

const std::vector<Exercise>& exercises() { return exercise_list(); }

std::vector<const Exercise*> exercises_of(const std::string& chapter) {
  std::vector<const Exercise*> mine;
  for (const auto& x : exercise_list())
    if (x.chapter == chapter) mine.push_back(&x);
  // In exercise order: "1.2" before "1.10" (registration order depends on the link order).
  auto numbers = [](const std::string& id) {
    std::vector<long> v;
    std::size_t start = 0;
    while (start <= id.size()) {
      const std::size_t dot = std::min(id.find('.', start), id.size());
      const std::string part = id.substr(start, dot - start);
      const bool digits = !part.empty() && part.size() < 10 &&
                          part.find_first_not_of("0123456789") == std::string::npos;
      v.push_back(digits ? std::stol(part) : 0);
      start = dot + 1;
    }
    return v;
  };
  std::stable_sort(mine.begin(), mine.end(), [&](const Exercise* x, const Exercise* y) {
    return numbers(x->id) < numbers(y->id);
  });
  return mine;
}

std::string exercise_threads() {
  return std::to_string(
      std::min(std::max(2u, hardware_threads()), static_cast<unsigned>(kMaxThreads)));
}

std::optional<fs::path> source_newer_than(const fs::path& program, const fs::path& sources) {
  std::error_code ec;
  const auto built = fs::last_write_time(program, ec);
  if (ec || !fs::is_directory(sources, ec)) return std::nullopt;
  std::optional<fs::path> newest;
  fs::file_time_type newest_time = built;
  for (auto it = fs::recursive_directory_iterator(
           sources, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    static const std::set<std::string> code = {".hpp", ".h", ".cpp", ".cc", ".cu", ".cuh", ".txt"};
    if (!code.count(it->path().extension().string())) continue;  // not notes or a README
    const auto t = it->last_write_time(ec);
    if (!ec && t > newest_time) {
      newest_time = t;
      newest = it->path();
    }
  }
  return newest;
}

ExerciseOutcome check_exercise(const Exercise& e, const fs::path& bin_dir) {
  ExerciseOutcome out;
  out.exercise = &e;
  const fs::path binary = bin_dir / e.test_binary;
  if (!fs::exists(binary)) {
    out.detail = fmt::format("test program {} not found (build the tests: cmake --build build)",
                             binary.string());
    return out;
  }
  char tmpl[] = "/tmp/concurdl-exercise-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) {
    out.detail = "cannot create a temporary file";
    return out;
  }
  ::close(fd);
  const std::string report = tmpl;
  const std::string console = report + ".out";
  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  const std::string filter = "--gtest_filter=" + e.test_filter;
  const std::string output = "--gtest_output=json:" + report;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::unlink(report.c_str());
    out.detail = fmt::format("cannot start {}: {}", e.test_binary, std::strerror(errno));
    return out;
  }
  if (pid == 0) {
    // The JSON report has the verdicts; the console output has the skip messages ("exercise
    // 2.3 ticket lock not attempted"), which GoogleTest 1.12 leaves out of the JSON.
    const int fd_out = ::open(console.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd_out >= 0) {
      ::dup2(fd_out, STDOUT_FILENO);
      ::dup2(fd_out, STDERR_FILENO);
    }
    ::execl(binary.c_str(), binary.c_str(), filter.c_str(), output.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // A student's lock that deadlocks must not hang the command: wait with a deadline.
  const int limit_s = exercise_timeout_s();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  int status = 0;
  bool timed_out = false;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (timed_out) {
    ::unlink(report.c_str());
    ::unlink(console.c_str());
    out.state = ExerciseState::wrong;
    out.detail = fmt::format(
        "{} did not finish within {} s (a deadlock or an endless loop?); "
        "set CONCURDL_EXERCISE_TIMEOUT to allow more",
        e.test_binary, limit_s);
    return out;
  }
  std::string skip_message;
  {
    std::ifstream log(console);
    std::string line;
    while (skip_message.empty() && std::getline(log, line))
      if (line.find("not attempted") != std::string::npos) skip_message = line;
  }
  ::unlink(console.c_str());
  std::ifstream in(report);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception&) {
    ::unlink(report.c_str());
    if (WIFSIGNALED(status)) {  // the student's code crashed the tests: a wrong attempt
      out.state = ExerciseState::wrong;
      out.detail = fmt::format("{} crashed (signal {}) before writing its report", e.test_binary,
                               WTERMSIG(status));
    } else {  // exec failed, or the binary is not a GoogleTest program: nothing was checked
      out.state = ExerciseState::error;
      out.detail = fmt::format("{} wrote no report (exit {})", e.test_binary, WEXITSTATUS(status));
    }
    return out;
  }
  ::unlink(report.c_str());
  std::string first_failure, first_skip;
  for (const auto& suite : j.value("testsuites", nlohmann::json::array())) {
    for (const auto& test : suite.value("testsuite", nlohmann::json::array())) {
      const std::string name = suite.value("name", "") + "." + test.value("name", "");
      const auto failures = test.value("failures", nlohmann::json::array());
      if (!failures.empty()) {
        ++out.tests_failed;
        if (first_failure.empty()) {
          // "file:line\nExpected equality of these values:\n  a\n    Which is: 1\n ..." on one
          // line.
          std::string msg = failures[0].value("failure", "");
          std::replace(msg.begin(), msg.end(), '\n', ' ');
          msg.erase(std::unique(msg.begin(), msg.end(),
                                [](char a, char b) { return a == ' ' && b == ' '; }),
                    msg.end());
          if (msg.size() > 300) msg = msg.substr(0, 300) + "...";
          first_failure = fmt::format("{}: {}", name, msg);
        }
      } else if (test.value("result", "") == "SKIPPED") {
        ++out.tests_skipped;
        if (first_skip.empty())
          first_skip = skip_message.empty() ? name + " skipped" : skip_message;
      } else {
        ++out.tests_passed;
      }
    }
  }
  if (out.tests_failed > 0) {
    out.state = ExerciseState::wrong;
    out.detail = first_failure;
  } else if (out.tests_skipped > 0) {
    out.state = ExerciseState::not_attempted;
    out.detail = first_skip;
  } else if (out.tests_passed > 0) {
    out.state = ExerciseState::correct;
  } else {
    out.detail = fmt::format("no test in {} matches '{}'", e.test_binary, e.test_filter);
  }
  return out;
}

}  // namespace concurdl
