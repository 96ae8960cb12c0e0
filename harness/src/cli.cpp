// The `concurdl` command line: list, run, calibrate, report, check, compare, exercise.
// Exit codes: 0 success; 1 an experiment or a validation failed; 2 bad usage or bad input
// (one line on stderr naming what was wrong). Progress on stderr, the output path last on stdout.
#include "concurdl/harness/cli.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "cli_detail.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/compare.hpp"
#include "concurdl/harness/cpu_info.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/noise.hpp"
#include "concurdl/harness/openblas_env.hpp"
#include "concurdl/harness/provenance.hpp"
#include "concurdl/harness/report.hpp"
#include "concurdl/harness/runner.hpp"
#include "list.hpp"
#include "report_detail.hpp"

namespace concurdl {

namespace fs = std::filesystem;

namespace cli_detail {

// A chapter's experiments: those across MPI ranks (Experiment::mpi) with --ranks, the others
// without it.
std::vector<const Experiment*> chapter_experiments(const std::string& folder, bool across_ranks) {
  std::vector<const Experiment*> out;
  for (const auto& e : experiments())
    if (e.chapter == folder && e.mpi == across_ranks) out.push_back(&e);
  return out;
}

// Chapters, chapter numbers ("ch01", "01", "1") and experiment ids; nothing = every chapter.
// With --ranks only the experiments across MPI ranks run, and without it only the others.
std::vector<const Experiment*> select(const std::vector<std::string>& targets, bool across_ranks) {
  std::vector<const Experiment*> out;
  auto add = [&](const Experiment* e) {
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  };
  if (targets.empty()) {
    for (const auto& e : experiments())
      if (e.chapter != kCalibrationChapter && e.recorded_by.empty() && e.mpi == across_ranks)
        add(&e);
    return out;
  }
  for (const auto& t : targets) {
    if (const Experiment* e = find_experiment(t)) {
      if (!e->recorded_by.empty())
        throw UsageError(
            fmt::format("{} is recorded by 'concurdl {}', not measured by run", t, e->recorded_by));
      if (e->mpi && !across_ranks)
        throw UsageError(fmt::format("{} runs across MPI ranks: give --ranks N", t));
      if (!e->mpi && across_ranks)
        throw UsageError(fmt::format("{} does not run across MPI ranks: leave out --ranks", t));
      add(e);
    } else if (const ChapterInfo* c = find_chapter(t)) {
      const auto in_chapter = chapter_experiments(c->folder, across_ranks);
      if (in_chapter.empty() && across_ranks)
        throw UsageError(fmt::format("chapter {} has no experiments across MPI ranks", c->folder));
      for (const Experiment* x : in_chapter)
        if (x->recorded_by.empty()) add(x);
    } else {
      throw UsageError(
          fmt::format("unknown chapter or experiment '{}' (concurdl list shows them)", t));
    }
  }
  return out;
}

fs::path program_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path();
}

void ensure_directory(const fs::path& dir, const char* what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw UsageError(fmt::format("{}: '{}' cannot be created: {}", what, dir.string(),
                                 ec ? ec.message() : "it is not a directory"));
}

bool all_valid(const std::vector<Record>& records) {
  return std::all_of(records.begin(), records.end(), [](const Record& r) { return r.valid; });
}

void print_invalid(const std::vector<Record>& records) {
  for (const auto& r : records)
    if (!r.valid)
      std::fprintf(stderr, "concurdl: INVALID %s {%s}: %s\n", r.experiment.c_str(),
                   describe(r.params).c_str(), r.validation.c_str());
}

void report_run(const RunFile& f, const fs::path& dir) {
  const ReportFiles rep = write_report({f}, {}, dir);
  for (const auto& w : rep.warnings) std::fprintf(stderr, "concurdl: warning: %s\n", w.c_str());
}

int cmd_list(const Args& a) { return list_main(a.targets, a.markdown); }

int cmd_report(const Args& a) {
  if (a.targets.empty()) throw UsageError("report: give at least one run directory");
  std::vector<fs::path> paths(a.targets.begin(), a.targets.end());
  std::vector<std::string> errors;
  std::vector<RunFile> runs = load_runs(paths, errors);
  // One run given twice (DIR and DIR/results.json) would count its records twice.
  std::vector<fs::path> seen;
  std::erase_if(runs, [&](const RunFile& r) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(r.path, ec);
    if (std::find(seen.begin(), seen.end(), canonical) == seen.end()) {
      seen.push_back(canonical);
      return false;
    }
    errors.push_back(fmt::format("{}: given twice; reported once", r.path.string()));
    return true;
  });
  for (const auto& e : errors) std::fprintf(stderr, "concurdl: %s\n", e.c_str());
  if (runs.empty()) return 2;
  if (a.labels.size() > runs.size())
    throw UsageError(fmt::format("--label: {} names for {} runs", a.labels.size(), runs.size()));
  for (std::size_t i = 0; i < a.labels.size(); ++i) runs[i].label = a.labels[i];
  for (const std::string& only : a.only) {
    const auto eq = only.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == only.size())
      throw UsageError(fmt::format("--only: '{}' is not KEY=V1,V2", only));
    const std::string key = only.substr(0, eq);
    std::vector<std::string> keep;
    std::stringstream list(only.substr(eq + 1));
    for (std::string v; std::getline(list, v, ',');) keep.push_back(v);
    std::size_t kept = 0;
    for (RunFile& r : runs) {
      std::erase_if(r.records, [&](const Record& rec) {
        const auto it = rec.params.find(key);
        return it != rec.params.end() &&
               std::find(keep.begin(), keep.end(), it->second) == keep.end();
      });
      for (const Record& rec : r.records) kept += rec.params.count(key);
    }
    if (kept == 0)
      throw UsageError(fmt::format("--only: no record has {} with one of those values", key));
  }
  const bool attempts = std::any_of(runs.begin(), runs.end(),
                                    [](const RunFile& r) { return r.exercises.is_array(); });
  if (a.csv && !attempts)
    throw UsageError(
        "--csv: none of these runs is a saved exercise attempt (concurdl exercise CHAPTER --out "
        "DIR saves one)");
  fs::path out;
  if (!a.out.empty()) {
    out = a.out;
  } else if (paths.size() == 1) {
    out = fs::absolute(runs[0].path).parent_path();
  } else {
    out = make_run_dir("results/reports", "merged", fmt::format("{}runs", runs.size()));
  }
  ensure_directory(out, "report output");
  const ReportFiles rep = write_report(runs, errors, out);
  if (a.csv)
    write_file_atomic(out / "exercises.csv",
                      report_detail::exercises_csv(runs, report_detail::run_labels(runs)));
  for (const auto& w : rep.warnings) std::fprintf(stderr, "concurdl: warning: %s\n", w.c_str());
  std::cout << out.string() << std::endl;
  return errors.empty() ? 0 : 2;
}

int cmd_compare(const Args& a) {
  if (a.targets.size() != 2) throw UsageError("compare: give exactly two run directories, A and B");
  if (!a.out.empty() && fs::is_directory(a.out))
    throw UsageError(fmt::format("--out: '{}' is a directory; give the JSON file to write, e.g. {}",
                                 a.out, (fs::path(a.out) / "a-vs-b.json").string()));
  const RunFile ra = load_run(a.targets[0]);
  const RunFile rb = load_run(a.targets[1]);
  const CompareResult r = compare_runs(ra, rb);
  std::cout << format_table(r);
  fs::path out = a.out;
  if (out.empty()) {
    ensure_directory("results/compare", "compare output");
    out = fs::path("results/compare") / fmt::format("{}-vs-{}.json",
                                                    ra.path.parent_path().filename().string(),
                                                    rb.path.parent_path().filename().string());
  }
  if (out.has_parent_path()) ensure_directory(out.parent_path(), "--out");
  write_file_atomic(out, to_json(r).dump(2) + "\n");
  std::cout << out.string() << std::endl;
  return 0;
}

// `concurdl check RUN [RUN ...]`: the lessons' claims judged on each run's records; 1 when a
// law that applies does not hold in one of them (a magnitude is reported, never failed). With
// several runs, the claims x machines table follows (runs on one machine share a column).
int cmd_check(const Args& a) {
  if (a.targets.empty()) throw UsageError("check: give at least one run directory or results.json");
  std::vector<RunFile> runs;
  for (const std::string& target : a.targets) runs.push_back(load_run(target));
  for (std::size_t i = 0; i < runs.size() && i < a.labels.size(); ++i) runs[i].label = a.labels[i];
  bool failed = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunFile& f = runs[i];
    const std::vector<ClaimResult> claims = evaluate_claims(f);
    std::string machine = cpu_info::machine_summary(f.provenance);
    fmt::print("{}What this run shows: {}{}\n", i == 0 ? "" : "\n", a.targets[i],
               machine.empty() ? "" : " (" + machine + ")");
    if (std::string why = why_not_quiet(f); !why.empty())
      fmt::print("not a quiet run ({}): a failed law may be the machine's load\n", why);
    if (claims.empty()) {
      fmt::print("no experiment of this run makes a claim\n");
      continue;
    }
    fmt::print("{}", claims_text(claims));
    failed = failed || any_failed(claims);
  }
  if (runs.size() > 1)
    fmt::print("\nClaims x machines\n\n{}", claims_by_machine_markdown(group_by_machine(runs)));
  return failed ? 1 : 0;
}

void add_run_flags(CLI::App* app, Args& a) {
  app->add_option("--profile", a.run.profile,
                  "quick (default), full, or smoke (every configuration once, smallest sizes)");
  app->add_option("--threads", a.run.threads, "thread counts to sweep, e.g. 1,2,4,8");
  app->add_option("--repeat", a.run.repeat, "timed repetitions per configuration");
  app->add_option("--set", a.run.set, "override a parameter axis: key=v1,v2 (repeatable)")
      ->allow_extra_args(false);  // one key=value per --set, so targets may follow
  app->add_option("--out", a.out, "parent directory of the run directory (default results/runs)");
  app->add_flag("--quiet", a.run.quiet, "no progress line");
}

}  // namespace cli_detail

using namespace cli_detail;

int cli_main(int argc, char** argv) {
  reexec_for_openblas_kernels(argv);  // OpenBLAS's fair kernels on CPUs it cannot place
  Args a;
  CLI::App app{"concurdl: the concurrency that deep-learning systems are built on, measured"};
  app.require_subcommand(1);
  app.set_version_flag("--version", build::version);

  auto* list = app.add_subcommand("list", "chapters, experiments, figures, exercises");
  list->add_option("chapter", a.targets, "chapters or experiments to list");
  list->add_flag("--markdown", a.markdown,
                 "print the variant tables as the chapter READMEs' generated Markdown blocks");

  auto* run = app.add_subcommand(
      "run", "run chapters or experiments (default: every chapter, quick), then the report");
  run->add_option("targets", a.targets,
                  "chapters (ch01, 01-threads) or experiment ids (ch01/sum_memory_bound)");
  add_run_flags(run, a);
  run->add_option("--ranks", a.run.ranks,
                  "run the experiments across MPI ranks under mpirun: rank counts to sweep, e.g. 2 "
                  "or 1,2,4 (mpirun starts the largest)");
  run->add_option("--hostfile", a.run.hostfile, "MPI hostfile for multi-node runs (with --ranks)");
  run->add_option("--transport", a.run.transport,
                  "how MPI ranks on one machine talk (with --ranks): auto (Open MPI's choice), "
                  "shm (shared memory) or tcp (the network stack, as between machines)");
  run->add_flag("--no-calibrate", a.no_calibrate, "skip measuring the machine's ceilings first");
  run->add_flag("--no-report", a.no_report, "write results.json only");
  run->add_flag("--trace", a.trace,
                "timelines: each configuration's last repetition as Chrome trace JSON "
                "(traces/EXPERIMENT/CONFIG.json, for Perfetto) and a Gantt chart beside it");
  run->add_option("--resume", a.resume,
                  "go on with an interrupted run in DIR: its own command line, only the "
                  "configurations it has not recorded");
  run->add_option("--continue-run", a.continue_run)->group("");  // set by --resume

  auto* calibrate =
      app.add_subcommand("calibrate", "measure this machine's ceilings (bandwidth, FLOP/s)");
  add_run_flags(calibrate, a);
  calibrate->add_flag("--no-report", a.no_report, "write results.json only");

  auto* report = app.add_subcommand("report", "charts and report for one run, or several merged");
  report->add_option("runs", a.targets, "run directories or results.json files")->required();
  report->add_option(
      "--out", a.out,
      "where to write (default: the run directory, or results/reports/... for several)");
  report->add_option("--label", a.labels,
                     "a name for each run in turn (its series and columns), instead of its "
                     "machine (\"Zen 5, 2 CPUs\"); repeat the flag");
  report->add_option("--only", a.only,
                     "KEY=V1,V2: keep only the records whose parameter KEY is one of these "
                     "(variant=v1_naive,v4_register), so that a chart shows the series chosen; "
                     "repeat for several keys");
  report->add_flag("--csv", a.csv,
                   "also write exercises.csv: a row per saved exercise attempt (concurdl "
                   "exercise --out) and exercise");

  auto* check = app.add_subcommand(
      "check",
      "judge the lessons' claims on runs: exit 1 when a law that applies does not hold; with "
      "several runs, a claims x machines table");
  check->add_option("runs", a.targets, "run directories or results.json files")->required();
  check->add_option("--label", a.labels,
                    "a name for each run in turn, instead of its machine (repeat the flag)");

  auto* compare =
      app.add_subcommand("compare", "ratio, CI and verdict per configuration of two runs");
  compare->add_option("runs", a.targets, "RUN_A RUN_B")->required();
  compare->add_option("--out", a.out, "JSON output file (default results/compare/A-vs-B.json)");

  auto* exercise = app.add_subcommand(
      "exercise", "check a chapter's exercises, then time them against the reference");
  exercise
      ->add_option("chapter", a.targets,
                   "the chapter, e.g. ch02, then only these exercises, e.g. 2.1 2.3")
      ->required();
  exercise->add_option("--out", a.out,
                       "save the attempt as a run under DIR (tests, verdicts, ratios, machine) "
                       "for the class report");
  exercise->add_option("--repeat", a.run.repeat, "timed repetitions");
  exercise->add_option("--profile", a.run.profile, "quick (default), full or smoke");
  exercise->add_flag("--no-timing", a.no_timing, "tests only");
  exercise->add_flag("--no-build", a.no_build,
                     "do not rebuild the chapter's tests and concurdl first (a program older "
                     "than the chapter's sources is then refused)");
  exercise->add_flag("--quiet", a.run.quiet, "no progress line");

  // Registered commands parse their own arguments: everything after the name, --help included.
  std::vector<std::pair<const Command*, CLI::App*>> extra;
  for (const Command& c : commands()) {
    auto* sub = app.add_subcommand(c.name, c.summary);
    sub->prefix_command();
    sub->set_help_flag();
    extra.emplace_back(&c, sub);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "concurdl: %s (concurdl --help shows the usage)\n", e.what());
    return 2;
  }

  std::vector<std::string> command(argv, argv + argc);
  a.argv = command;
  command[0] = "concurdl";
  try {
    if (*list) return cmd_list(a);
    if (*run) {
      if (!a.resume.empty()) return resume_run(a, argc);
      const RunRequest req = parse_run_request(a.run);
      if (auto launched = launch_ranks(a, req, argc, argv)) return *launched;
      return measure(command, select(a.targets, ranks::initialized()), a, req, !a.no_calibrate);
    }
    if (*calibrate)
      return measure(command, chapter_experiments(kCalibrationChapter, false), a,
                     parse_run_request(a.run), false);
    if (*report) return cmd_report(a);
    if (*check) return cmd_check(a);
    if (*compare) return cmd_compare(a);
    if (*exercise) return cmd_exercise(a);
    for (auto& [c, sub] : extra)
      if (*sub) return c->run(sub->remaining());
  } catch (const UsageError& e) {
    std::fprintf(stderr, "concurdl: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "concurdl: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "concurdl: error: an exception that is not a std::exception\n");
    return 1;
  }
  return 2;
}

}  // namespace concurdl
