// The `concurdl` command line: list, run, calibrate, report, check, compare, exercise.
// Exit codes: 0 success; 1 an experiment or a validation failed; 2 bad usage or bad input
// (one line on stderr naming what was wrong). Progress on stderr, the output path last on stdout.
#include "concurdl/harness/cli.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "commands/cli_detail.hpp"
#include "commands/list.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/commands.hpp"
#include "concurdl/harness/openblas_env.hpp"

namespace concurdl {

namespace cli_detail {

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
    if (*list) return list_main(a.targets, a.markdown);
    if (*run) {
      if (!a.resume.empty()) {
        std::vector<std::string> again = resume_command(a, argc);
        std::vector<char*> args;
        for (auto& s : again) args.push_back(s.data());
        args.push_back(nullptr);
        return cli_main(static_cast<int>(again.size()), args.data());
      }
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
