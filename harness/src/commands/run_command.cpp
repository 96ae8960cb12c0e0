// `concurdl run`'s measuring (cli.cpp parses the command line): the journal after every group,
// Ctrl-C and --resume, and the --ranks launch.
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "cli_detail.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/gantt.hpp"
#include "concurdl/harness/noise.hpp"
#include "concurdl/harness/provenance.hpp"

namespace concurdl::cli_detail {

namespace fs = std::filesystem;

namespace {

// The first Ctrl-C stops the run after the group being measured (everything finished is on
// disk); a second one ends the program at once.
void on_interrupt(int) {
  request_stop();
  std::signal(SIGINT, SIG_DFL);
}

// The key of a configuration in a results file: its experiment and its parameters.
std::string config_key(const std::string& experiment, const Params& p) {
  return experiment + " {" + describe(p) + "}";
}

// Said on stderr as soon as the calibration shows it (and kept in results.json's calibration,
// "cores_short"; the report repeats it): threads that did not get a core each.
void warn_cores_short(const Calibration& c) {
  if (!c.detail.contains("cores_short")) return;
  for (const auto& line : c.detail.at("cores_short"))
    if (line.is_string())
      std::fprintf(stderr, "concurdl: warning: %s\n", line.get<std::string>().c_str());
}

}  // namespace

// run and calibrate share this: measure, save after every group, report, print the path.
// With a.continue_run (from `--resume DIR`) the run goes on in DIR: configurations already
// recorded there are not measured again, and the rest are appended in the same order.
int measure(const std::vector<std::string>& command, const std::vector<const Experiment*>& selected,
            const Args& a, const RunRequest& req, bool calibrate_first) {
  RunOptions opt = req.options;
  const bool across_ranks = ranks::initialized();
  // Under --ranks every rank measures; rank 0 alone shows progress and writes the run.
  const bool writer = ranks::world_rank() == 0;
  if (!writer) opt.progress = false;
  // The cores probe around each group (not on the smoke profile, whose timings mean nothing,
  // nor under --ranks, where the ranks themselves share the cores).
  opt.probe_cores = !across_ranks && opt.profile != Profile::smoke;
  // Experiments this machine cannot run (no GPU): left out, said, and kept in the provenance.
  const auto skipped = unavailable_here(selected);
  std::vector<const Experiment*> runnable;
  for (const Experiment* e : selected)
    if (std::none_of(skipped.begin(), skipped.end(), [e](const auto& s) { return s.first == e; }))
      runnable.push_back(e);
  std::vector<Config> configs = expand(runnable, opt);  // bad input fails before any output
  // Where the ranks run: collective over them all, so before rank 0 goes its own way.
  std::optional<nlohmann::json> placement;
  if (across_ranks) placement = placement_provenance(ranks::placement());
  const bool resuming = !a.continue_run.empty();
  RunFile f;
  fs::path dir;
  if (resuming) {
    dir = a.continue_run;
    f = load_run(dir);
    f.provenance.erase("finished");
    f.provenance["resumed"].push_back(utc_now_iso());
    std::set<std::string> done, experiments_done;
    for (const Record& r : f.records) {
      done.insert(config_key(r.experiment, r.params));
      experiments_done.insert(r.experiment);
    }
    std::erase_if(configs, [&](const Config& c) {
      // A set of micro-benchmarks is one configuration whose records (one per benchmark, with
      // parameters of their own) are saved together once the whole set has run.
      if (!c.experiment->microbenchmark_filter.empty())
        return experiments_done.count(c.experiment->id) > 0;
      return done.count(config_key(c.experiment->id, c.params)) > 0;
    });
    if (opt.progress)
      std::fprintf(stderr, "concurdl: resuming %s: %zu configurations recorded, %zu to measure\n",
                   dir.string().c_str(), f.records.size(), configs.size());
  } else {
    f.concurdl_version = build::version;
    f.command = command;
    f.provenance = collect_provenance();
    if (!req.hostfile.empty()) f.provenance["hostfile"] = fs::absolute(req.hostfile).string();
    if (across_ranks) f.provenance["mpi_world_size"] = ranks::world_size();
    if (placement) f.provenance["mpi_placement"] = *placement;
    f.provenance["profile"] = profile_name(opt.profile);
    const fs::path root = a.out.empty() ? fs::path("results/runs") : fs::path(a.out);
    if (writer) dir = make_run_dir(root, f.provenance["host"].get<std::string>(), short_commit());
  }
  if (!skipped.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [e, why] : skipped) {
      list.push_back({{"experiment", e->id}, {"reason", why}});
      if (writer && !req.quiet)
        std::fprintf(stderr, "concurdl: skipped %s: %s\n", e->id.c_str(), why.c_str());
    }
    f.provenance["skipped_experiments"] = std::move(list);
  }
  // Rows this machine cannot run (a pair of ranks on one host when each rank has a host of its
  // own): left out, said, and kept in the provenance beside the experiments left out.
  opt.on_unavailable = [&](const Config& c, const std::string& why) {
    const std::string row = fmt::format("{} {{{}}}", c.experiment->id, describe(c.params));
    f.provenance["skipped_experiments"].push_back({{"experiment", row}, {"reason", why}});
    if (writer && !req.quiet)
      std::fprintf(stderr, "concurdl: skipped %s: %s\n", row.c_str(), why.c_str());
  };
  if (a.trace && writer) opt.trace_dir = dir / "traces";
  auto save = [&] {
    if (writer) write_run(dir, f);
  };
  save();
  // Is anything else running? Recorded, and said in one line, before anything is measured.
  // (Not across ranks: the other ranks' waiting would count as activity.)
  if (!across_ranks) {
    Activity act;
    const std::string busy = quiet_check(0.2, &act);
    f.provenance["activity_before_run"] = {{"other_processes_cpus", act.others_cpus},
                                           {"steal_cpus", act.steal_cpus},
                                           {"seconds", act.seconds}};
    if (!busy.empty() && opt.progress)
      std::fprintf(stderr, "concurdl: warning: %s\n", busy.c_str());
  }
  std::signal(SIGINT, on_interrupt);
  auto interrupted = [&] {
    if (writer)
      std::fprintf(stderr,
                   "concurdl: interrupted: %zu configurations are saved in %s; 'concurdl run "
                   "--resume %s' measures the rest\n",
                   f.records.size(), dir.string().c_str(), dir.string().c_str());
    return 130;
  };

  const bool selects_calibration =
      std::any_of(selected.begin(), selected.end(),
                  [](const Experiment* e) { return e->chapter == kCalibrationChapter; });
  if (calibrate_first && !selects_calibration && !(resuming && !f.calibration.empty())) {
    RunOptions copt;
    copt.profile = opt.profile == Profile::smoke ? Profile::smoke : Profile::quick;
    copt.progress = opt.progress;
    if (opt.progress) std::fprintf(stderr, "concurdl: calibrating this machine\n");
    std::vector<Record> calib;
    try {
      calib = run_configs(expand(chapter_experiments(kCalibrationChapter, across_ranks), copt),
                          copt, {});
    } catch (const Interrupted&) {
      return interrupted();
    }
    f.calibration = calibration_from_records(calib);
    warn_cores_short(f.calibration);
    f.records.insert(f.records.end(), calib.begin(), calib.end());
    save();
  }
  const std::size_t before = f.records.size();
  std::vector<Record> measured;
  try {
    measured = run_configs(configs, opt, f.calibration, [&](const std::vector<Record>& so_far) {
      f.records.resize(before);
      f.records.insert(f.records.end(), so_far.begin(), so_far.end());
      save();
    });
  } catch (const Interrupted&) {
    return interrupted();
  } catch (const UsageError&) {
    // Bad input found while preparing (an unknown variant given with --set): keep the run
    // directory only if it already holds measurements.
    if (writer && !resuming && f.records.empty()) fs::remove_all(dir);
    throw;
  }
  if (selects_calibration) {
    // The calibration experiments were measured as part of this run: they are the calibration.
    f.calibration = calibration_from_records(measured);
    warn_cores_short(f.calibration);
    derive_metrics(measured, f.calibration, hardware_threads());
  }
  f.records.resize(before);
  f.records.insert(f.records.end(), measured.begin(), measured.end());
  // A resumed experiment's speedups need the records of both sittings.
  if (resuming) derive_metrics(f.records, f.calibration, hardware_threads());
  f.provenance["finished"] = utc_now_iso();
  if (!writer) return all_valid(f.records) ? 0 : 1;  // validity is agreed by every rank
  if (!opt.trace_dir.empty()) {
    std::vector<std::string> warnings;
    trace::render_trace_dir(opt.trace_dir, warnings);
    for (const auto& w : warnings) std::fprintf(stderr, "concurdl: warning: %s\n", w.c_str());
  }
  // What the lessons claim, judged on what was just measured: kept with the run and said.
  const std::vector<ClaimResult> claims = evaluate_claims(f);
  f.claims = claims_json(claims);
  save();
  if (!a.no_report) report_run(f, dir);
  print_invalid(f.records);
  if (!claims.empty() && !req.quiet)
    std::fprintf(stderr, "\nWhat this run shows (the lessons' claims):\n%s\n",
                 claims_text(claims).c_str());
  std::cout << dir.string() << std::endl;
  return all_valid(f.records) ? 0 : 1;
}

// `concurdl run --ranks N`: outside an MPI launch, start one (mpirun -np N concurdl run ...)
// and return its exit status; inside one, join it. Bad input fails here, before mpirun starts.
std::optional<int> launch_ranks(const Args& a, const RunRequest& req, int argc, char** argv) {
  if (req.ranks.empty()) return std::nullopt;
  // Open MPI's byte transfer layers, through its environment (mpirun passes it to every rank,
  // and the provenance records it): tcp forces the network path even between processes of one
  // machine, shm the shared-memory one (vader). Both need the ob1 messaging layer, which uses
  // them (another, such as UCX, would pick its own transport).
  if (req.transport != Transport::automatic) {
    ::setenv("OMPI_MCA_pml", "ob1", 1);
    ::setenv("OMPI_MCA_btl", req.transport == Transport::tcp ? "tcp,self" : "vader,self", 1);
  }
  expand(select(a.targets, true), req.options);  // bad input fails before mpirun starts
  const int most = req.most_ranks();
  if (!ranks::launched_by_mpi())
    return ranks::launch(most, req.hostfile, std::vector<std::string>(argv + 1, argv + argc));
  ranks::init();
  if (ranks::world_size() < most)
    throw UsageError(fmt::format("--ranks {}: this MPI launch has only {} rank(s)", a.run.ranks,
                                 ranks::world_size()));
  return std::nullopt;
}

// `concurdl run --resume DIR`: DIR's own command line, told to go on in DIR.
std::vector<std::string> resume_command(const Args& a, int argc) {
  if (argc != 4)
    throw UsageError(
        "--resume takes a run directory and nothing else: the run's own command line is used");
  fs::path dir = a.resume;
  if (fs::is_regular_file(dir)) dir = dir.parent_path();  // results.json given
  const RunFile f = load_run(dir);
  if (f.command.size() < 2 || f.command[1] != "run")
    throw UsageError(fmt::format("--resume {}: not a run of 'concurdl run'", a.resume));
  if (f.provenance.contains("finished"))
    throw UsageError(fmt::format("--resume {}: this run finished; nothing to resume", a.resume));
  std::vector<std::string> args = f.command;
  args.push_back("--continue-run");
  args.push_back(dir.string());
  return args;
}

}  // namespace concurdl::cli_detail
