// The command line, end to end: exit codes and one-line errors for bad input, a real
// calibration run with records and charts, reports that survive a bad file, compare, and the
// exercise workflow's bad input (test_cli_exercise.cpp has the rest; test_cli_train.cpp has
// `concurdl train`'s). Drives `concurdl-selftest`,
// which is `concurdl` plus the toy chapter in tests/selftest.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_fixture.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/openblas_env.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/trace_files.hpp"

namespace fs = std::filesystem;
using concurdl::load_run;
using concurdl::RunFile;
using namespace cli_test;

// `concurdl check RUN`: the claims judged on a run; 0 when every claim that applies holds, 1 when
// one does not, 2 for a run that cannot be read.
TEST_F(Cli, CheckJudgesTheClaimsOfARun) {
  const Result good = run("run ch99/sum --profile smoke --no-calibrate --quiet --out good");
  ASSERT_EQ(good.rc, 0) << good.err;
  Result c = run("check " + good.last_line());
  EXPECT_EQ(c.rc, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("held      ch99/sum: The toy sum is right at one thread"), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("needs a GPU; this run had none"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("smoke profile"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("1 held, 0 not held, 2 not applicable"), std::string::npos) << c.out;
  // The run kept them too, and said them when it finished.
  const std::string results = slurp(dir_ / good.last_line() / "results.json");
  EXPECT_NE(results.find("\"claims\""), std::string::npos);

  const Result bad =
      run("run ch99/sum --profile smoke --no-calibrate --quiet --set broken=1 --out bad");
  ASSERT_EQ(bad.rc, 1) << bad.err;
  c = run("check " + bad.last_line());
  EXPECT_EQ(c.rc, 1) << c.out << c.err;
  EXPECT_NE(c.out.find("NOT HELD  ch99/sum: The toy sum is right at one thread"), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("is invalid"), std::string::npos) << c.out;

  expect_usage_error(run("check no-such-run"), "no-such-run");
}

// Several runs: each judged, then the claims x machines table; merged reports name runs as the
// user says (--label) and keep only the records asked for (--only).
TEST_F(Cli, SeveralRunsAreCheckedAndReportedByLabel) {
  const Result a = run("run ch99/sum --profile smoke --threads 1,2 --no-calibrate --quiet --out a");
  const Result b = run("run ch99/sum --profile smoke --threads 1,2 --no-calibrate --quiet --out b");
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_EQ(b.rc, 0) << b.err;
  const Result c = run("check " + a.last_line() + " " + b.last_line());
  EXPECT_EQ(c.rc, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("Claims x machines"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("(2 quiet runs)"), std::string::npos) << c.out;

  const Result r = run("report " + a.last_line() + " " + b.last_line() +
                       " --label lab-a --label lab-b --only threads=1 --out merged");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string md = slurp(dir_ / "merged" / "report.md");
  EXPECT_NE(md.find("lab-a"), std::string::npos);
  EXPECT_NE(md.find("lab-b"), std::string::npos);
  EXPECT_EQ(md.find("threads=2`"), std::string::npos) << "--only threads=1 kept a 2-thread record";
  EXPECT_NE(md.find("threads=1`"), std::string::npos) << md;

  expect_usage_error(run("report " + a.last_line() + " --label x --label y"), "--label");
  expect_usage_error(run("report " + a.last_line() + " --only nosuch=1"), "--only");
  expect_usage_error(run("report " + a.last_line() + " --only threads"), "--only");
}

TEST_F(Cli, ZeroThreadsIsAUsageError) { expect_usage_error(run("run --threads 0"), "--threads"); }
TEST_F(Cli, NegativeRepeatIsAUsageError) {
  expect_usage_error(run("run --repeat -1"), "--repeat: '-1' is not a count");
}
TEST_F(Cli, HugeChapterNumberIsAUsageError) {
  expect_usage_error(run("list 99999999999999999999"), "99999999999999999999");
}
TEST_F(Cli, UncreatableOutputIsAUsageError) {
  std::ofstream(dir_ / "a-file") << "x";
  expect_usage_error(run("run ch99/sum --no-calibrate --out a-file/runs"), "a-file/runs");
}
TEST_F(Cli, UnknownExperimentIsAUsageError) {
  expect_usage_error(run("run ch99/nope"), "ch99/nope");
}
TEST_F(Cli, OverflowingSizeIsAUsageError) {
  expect_usage_error(run("run ch99/sum --set n=99999999999999999999"), "'n'");
}
TEST_F(Cli, UnknownParameterIsAUsageError) {
  expect_usage_error(run("run ch99/sum --set bogus=1"), "bogus");
}
TEST_F(Cli, UnknownProfileIsAUsageError) { expect_usage_error(run("run --profile huge"), "huge"); }
TEST_F(Cli, UnknownFlagIsAUsageError) { expect_usage_error(run("run --frobnicate"), "frobnicate"); }
TEST_F(Cli, MissingRunDirectoryIsAUsageError) {
  expect_usage_error(run("report no-such-run"), "no-such-run");
}
// Values past what an experiment or a flag takes: exit 2 and one line naming the axis or the
// flag and the limit, before anything is measured or written. Every axis's limit is checked
// through expand() in test_axis_limits.cpp; this is the command line end to end.
TEST_F(Cli, AbsurdValuesAreUsageErrorsNamingTheLimit) {
  const Result n =
      run("run ch01/false_sharing --no-calibrate --set n=999999999999999", CONCURDL_BIN);
  expect_usage_error(n, "parameter 'n': '999999999999999' is more than 8589934592");
  expect_usage_error(run("run ch02/rw_lock --no-calibrate --set read_pct=-5", CONCURDL_BIN),
                     "parameter 'read_pct': '-5' is less than 0");
  expect_usage_error(run("run ch99/sum --no-calibrate --threads 5000"),
                     "--threads: '5000' is more than 4096");
  expect_usage_error(run("run ch99/sum --no-calibrate --threads 99999999999999999999999"),
                     "--threads: '99999999999999999999999' is more than 4096");
  expect_usage_error(run("run ch99/sum --no-calibrate --repeat 999999999"), "--repeat");
  expect_usage_error(run("run ch99/sum --no-calibrate --threads 2 --set threads=4"),
                     "--threads and --set threads");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}
// A text value no axis takes is refused in one line before the machine is calibrated (that
// would print "calibrating this machine" first): a closed list, a variant table's rows, and an
// open axis's own parse.
TEST_F(Cli, UnknownTextValuesAreRefusedBeforeCalibrating) {
  expect_usage_error(
      run("run ch06/pipeline --set schedule=zigzag", CONCURDL_BIN),
      "parameter 'schedule': unknown schedule 'zigzag' (known: naive, gpipe, 1f1b, zb-h1)");
  expect_usage_error(run("run ch01/sum_memory_bound --set variant=v99", CONCURDL_BIN),
                     "parameter 'variant': unknown variant 'v99'");
  expect_usage_error(run("run ch07/training --set straggler=3y", CONCURDL_BIN),
                     "parameter 'straggler': '3y' is not none or a factor like 4x");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}
TEST_F(Cli, AResultsFileThatIsADirectoryIsNamed) {
  fs::create_directories(dir_ / "run" / "results.json");
  expect_usage_error(run("report run"), "run/results.json: is a directory, not a results file");
  expect_usage_error(run("compare run run"), "run/results.json: is a directory");
}
TEST_F(Cli, BadUsageWritesNoRunDirectory) {
  run("run --threads 0");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

TEST_F(Cli, ListShowsChaptersExperimentsAndExercises) {
  const Result r = run("list");
  EXPECT_EQ(r.rc, 0);
  for (const char* s :
       {"00-calibration", "calibrate/mem_triad", "99-selftest", "ch99/sum", "exercise 99.2"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  EXPECT_EQ(run("list ch42").rc, 2);
}

TEST_F(Cli, ARegisteredCommandGetsItsArgumentsHelpIncluded) {
  const Result r = run("toy-echo a --help --x=1");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "a\n--help\n--x=1\n");
  EXPECT_EQ(run("toy-echo exit3").rc, 3);
  expect_usage_error(run("toy-echo fail"), "'fail' was asked for");
}

TEST_F(Cli, AnExperimentRecordedByACommandIsListedButNotRun) {
  const Result l = run("list 99");
  EXPECT_NE(l.out.find("recorded by 'concurdl toy-echo'"), std::string::npos) << l.out;
  expect_usage_error(run("run ch99/recorded"), "recorded by 'concurdl toy-echo'");
}

// --ranks starts mpirun; every rank measures, rank 0 alone writes one run whose samples are the
// max over the ranks (rank 1 sleeps twice as long as rank 0).
TEST_F(Cli, RanksLaunchMpirunAndRankZeroWritesTheMaxOverRanks) {
  if (!concurdl::build::have_mpi) GTEST_SKIP() << "built without MPI";
  const Result r =
      run("run --ranks 2 ch99/ranks_sleep --no-calibrate --no-report --quiet --out runs");
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(std::distance(fs::directory_iterator(dir_ / "runs"), fs::directory_iterator{}), 1)
      << "one results directory, written by rank 0 alone";
  const RunFile f = load_run(dir_ / r.last_line());
  EXPECT_EQ(f.provenance.at("mpi_world_size"), 2);
  ASSERT_EQ(f.records.size(), 2u);
  for (const auto& rec : f.records) {
    ASSERT_TRUE(rec.valid) << rec.validation;
    EXPECT_EQ(rec.params.at("ranks"), "2");
    ASSERT_EQ(rec.samples.size(), 3u);
    if (rec.params.at("variant") == "timed") {
      EXPECT_EQ(rec.timer, "max_over_ranks(host)");
      for (double s : rec.samples) EXPECT_GE(s, 0.010) << "rank 1's 10 ms, not rank 0's 5 ms";
    } else {
      for (double s : rec.samples) EXPECT_DOUBLE_EQ(s, 0.010);
    }
  }
}

TEST_F(Cli, RanksAndTheExperimentsMustAgree) {
  expect_usage_error(run("run ch99/ranks_sleep"), "give --ranks N");
  expect_usage_error(run("run --hostfile nowhere ch99/sum"), "--hostfile");
  expect_usage_error(run("run --transport tcp ch99/sum"), "--transport: only with --ranks");
  expect_usage_error(run("run --ranks 2 --transport udp ch99/sum"), "--transport: 'udp'");
  if (!concurdl::build::have_mpi) {
    expect_usage_error(run("run --ranks 2 ch99/ranks_sleep"), "without MPI");
    return;
  }
  expect_usage_error(run("run --ranks 2 ch99/sum"), "leave out --ranks");
  expect_usage_error(run("run --ranks 0 ch99/ranks_sleep"), "--ranks");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

// Ctrl-C mid-run (SIGINT, raised by the runner itself after the first group here) leaves every
// finished group on disk and says how to resume; --resume measures only what is missing, and the
// file then holds every configuration exactly once, as an uninterrupted run's does.
TEST_F(Cli, InterruptedRunResumesToTheSameConfigurations) {
  const std::string args = "run ch99/sum --set n=1M,2M,3M --no-calibrate --no-report --quiet";
  const Result cut =
      run(args + " --out cut", CONCURDL_SELFTEST_BIN, "CONCURDL_INTERRUPT_AFTER_GROUPS=1");
  ASSERT_EQ(cut.rc, 130) << cut.err;
  EXPECT_NE(cut.err.find("--resume"), std::string::npos) << cut.err;
  ASSERT_EQ(std::distance(fs::directory_iterator(dir_ / "cut"), fs::directory_iterator{}), 1);
  const fs::path cut_dir = fs::directory_iterator(dir_ / "cut")->path();
  const RunFile partial = load_run(cut_dir);
  EXPECT_EQ(partial.records.size(), 2u) << "the first group: n=1M at 1 and 2 threads";
  EXPECT_FALSE(partial.provenance.contains("finished"));

  const Result whole = run(args + " --out whole");
  ASSERT_EQ(whole.rc, 0) << whole.err;
  const RunFile uninterrupted = load_run(dir_ / whole.last_line());

  const Result resumed = run("run --resume " + cut_dir.string());
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  const RunFile full = load_run(cut_dir);
  auto keys = [](const RunFile& f) {
    std::vector<std::string> k;
    for (const auto& r : f.records) k.push_back(r.experiment + " " + concurdl::describe(r.params));
    return k;
  };
  EXPECT_EQ(keys(full), keys(uninterrupted)) << "every configuration once, in the same order";
  EXPECT_TRUE(full.provenance.contains("finished"));
  EXPECT_TRUE(full.provenance.contains("resumed"));
  for (const auto& r : full.records) {
    if (r.params.at("threads") == "2") {
      EXPECT_TRUE(r.derived.count("speedup")) << r.params.at("n");
    }
  }

  expect_usage_error(run("run --resume " + cut_dir.string()), "nothing to resume");
  expect_usage_error(run("run --resume " + cut_dir.string() + " --quiet"), "nothing else");

  // A set of Google Benchmark micro-benchmarks is one configuration whose records carry
  // parameters of their own: once recorded, a resumed run does not measure it again.
  const std::string mixed =
      "run ch99/atomic_increment ch99/sum --set n=1M,2M --no-calibrate --no-report --quiet";
  const Result cut2 =
      run(mixed + " --out cut2", CONCURDL_SELFTEST_BIN, "CONCURDL_INTERRUPT_AFTER_GROUPS=1");
  ASSERT_EQ(cut2.rc, 130) << cut2.err;
  const fs::path cut2_dir = fs::directory_iterator(dir_ / "cut2")->path();
  ASSERT_EQ(run("run --resume " + cut2_dir.string()).rc, 0);
  const Result whole2 = run(mixed + " --out whole2");
  ASSERT_EQ(whole2.rc, 0) << whole2.err;
  const auto resumed2 = keys(load_run(cut2_dir)),
             uninterrupted2 = keys(load_run(dir_ / whole2.last_line()));
  EXPECT_EQ(std::set<std::string>(resumed2.begin(), resumed2.end()).size(), resumed2.size())
      << "a configuration recorded twice";
  // (The bridge may order a set's benchmarks differently from one run to the next.)
  EXPECT_EQ(std::set<std::string>(resumed2.begin(), resumed2.end()),
            std::set<std::string>(uninterrupted2.begin(), uninterrupted2.end()));
  EXPECT_TRUE(std::any_of(resumed2.begin(), resumed2.end(), [](const std::string& k) {
    return k.rfind("ch99/atomic_increment", 0) == 0;
  }));
  expect_usage_error(run("run --resume no-such-dir"), "no-such-dir");
}

TEST_F(Cli, CalibrateYieldsValidRecordsAndCharts) {
  const Result r = run("calibrate --profile quick --out runs", CONCURDL_BIN);
  ASSERT_EQ(r.rc, 0) << r.err;
  const fs::path run_dir = dir_ / r.last_line();
  const RunFile f = load_run(run_dir);
  EXPECT_EQ(f.schema_version, concurdl::kSchemaVersion);
  for (const char* k :
       {"cpu_model", "compiler", "git_commit", "cores", "started", "finished", "libraries"})
    EXPECT_TRUE(f.provenance.contains(k)) << k;
  EXPECT_GT(f.calibration.mem_bandwidth_bytes_per_s, 0);
  EXPECT_GT(f.calibration.peak_flops, 0);
  EXPECT_GT(f.calibration.thread_copy_bytes_per_s, 0);
  std::set<std::string> experiments;
  for (const auto& rec : f.records) {
    EXPECT_TRUE(rec.valid) << rec.experiment << ": " << rec.validation;
    EXPECT_GE(rec.samples.size(), 5u);
    experiments.insert(rec.experiment);
  }
  EXPECT_EQ(experiments.size(), 4u);
  const fs::path fig = run_dir / "figures";
  for (const char* ext : {".dat", ".gp", ".svg", ".png"}) {
    EXPECT_TRUE(fs::exists(fig / (std::string("calibrate_fma_peak_speedup") + ext))) << ext;
  }
  const std::string gp = slurp(fig / "calibrate_fma_peak_speedup.gp");
  EXPECT_NE(gp.find("ideal"), std::string::npos);
  EXPECT_NE(gp.find("Amdahl"), std::string::npos);
  EXPECT_NE(slurp(run_dir / "report.html").find("<svg"), std::string::npos);
  EXPECT_TRUE(fs::exists(run_dir / "report.md"));
  // OpenBLAS runs kernels for this CPU's instruction set, not the generic fallback it picks on
  // virtual machines that hide the CPU model (openblas_env.hpp).
  if (concurdl::openblas_core_for_this_cpu() && !std::getenv("OPENBLAS_CORETYPE")) {
    const std::string blas = f.provenance.at("libraries").at("openblas").get<std::string>();
    EXPECT_EQ(blas.find("Prescott"), std::string::npos) << blas;
  }
}

TEST_F(Cli, RunMeasuresSpeedupAndAFailedValidationExitsOne) {
  Result r = run("run ch99/sum --threads 1,2 --repeat 3 --no-calibrate --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.last_line().rfind("results/runs/", 0) == 0) << r.out;
  const RunFile f = load_run(dir_ / r.last_line());
  ASSERT_EQ(f.records.size(), 2u);
  for (const auto& rec : f.records) EXPECT_TRUE(rec.derived.count("speedup")) << rec.experiment;
  EXPECT_EQ(f.command.at(1), "run");

  r = run("run ch99/sum --threads 1 --repeat 3 --no-calibrate --quiet --set broken=1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("INVALID ch99/sum"), std::string::npos) << r.err;
  const RunFile g = load_run(dir_ / r.last_line());  // the failed run is still recorded
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_FALSE(g.records[0].valid);
}

// --trace: each configuration's last repetition as Chrome trace JSON under traces/, with the
// title its Gantt chart takes, and the chart (.dat and .gp, the pictures where gnuplot runs)
// drawn beside it once the run is measured.
TEST_F(Cli, TraceWritesEachConfigurationsSpansAndTheirGanttChart) {
  Result r = run("run ch99/sum --threads 1 --repeat 2 --no-calibrate --no-report --quiet --trace");
  ASSERT_EQ(r.rc, 0) << r.err;
  const fs::path traces = dir_ / r.last_line() / "traces" / "ch99_sum";
  std::vector<fs::path> json;
  for (const auto& e : fs::directory_iterator(traces))
    if (e.path().extension() == ".json") json.push_back(e.path());
  ASSERT_EQ(json.size(), 1u) << traces;
  std::map<std::string, std::string> meta;
  const auto events = concurdl::trace::read_chrome_trace(json[0], &meta);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].name, "sum");
  EXPECT_EQ(meta.at("experiment"), "ch99/sum");
  EXPECT_NE(meta.at("title").find("threads=1"), std::string::npos) << meta.at("title");
  fs::path gp = json[0];
  gp.replace_extension(".gp");
  std::ifstream in(gp);
  ASSERT_TRUE(in) << gp;
  const std::string script((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(script.find("ch99/sum"), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::path(gp).replace_extension(".dat")));
}

TEST_F(Cli, MicroBenchmarksBecomeRecords) {
  Result r = run("run ch99/atomic_increment --repeat 3 --no-calibrate --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  const RunFile f = load_run(dir_ / r.last_line());
  ASSERT_EQ(f.records.size(), 2u);  // 1 and 2 threads
  for (const auto& rec : f.records) {
    EXPECT_EQ(rec.samples.size(), 3u);
    EXPECT_GT(rec.derived.at("items_per_s"), 0);
  }
  r = run("run ch99/cpu_time_threads --repeat 2 --no-calibrate --quiet");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("UseRealTime"), std::string::npos) << r.err;
}

TEST_F(Cli, ReportNamesATruncatedFileAndRendersTheOthers) {
  const Result a = run("run ch99/sum --threads 1,2 --repeat 3 --no-calibrate --no-report --quiet");
  ASSERT_EQ(a.rc, 0) << a.err;
  const fs::path good = dir_ / a.last_line();
  const fs::path bad = dir_ / "results/runs/broken-run";
  fs::create_directories(bad);
  const std::string text = slurp(good / "results.json");
  std::ofstream(bad / "results.json") << text.substr(0, text.size() / 3);

  const Result r = run("report '" + good.string() + "' '" + bad.string() + "' --out merged");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("broken-run/results.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_NE(slurp(dir_ / "merged/report.md").find("broken-run"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "merged/figures/ch99_sum_speedup.svg"));
  EXPECT_NE(slurp(dir_ / "merged/report.html").find("<svg"), std::string::npos);

  // A single good run reports into its own directory, also when named by its results.json.
  const Result single = run("report '" + good.string() + "'");
  EXPECT_EQ(single.rc, 0) << single.err;
  EXPECT_TRUE(fs::exists(good / "report.html"));
  fs::remove(good / "report.html");
  const Result by_file = run("report " + a.last_line() + "/results.json");
  EXPECT_EQ(by_file.rc, 0) << by_file.err;
  EXPECT_TRUE(fs::exists(good / "report.html"));

  // One run named twice is reported once, and the second name is an error.
  const Result twice =
      run("report " + a.last_line() + " " + a.last_line() + "/results.json --out twice");
  EXPECT_EQ(twice.rc, 2);
  EXPECT_EQ(twice.err_lines(), 1) << twice.err;
  EXPECT_NE(twice.err.find("given twice"), std::string::npos) << twice.err;
  EXPECT_TRUE(fs::exists(dir_ / "twice/report.md"));
}

TEST_F(Cli, CompareWritesATableAndJson) {
  const Result a = run("run ch99/sum --threads 1 --repeat 5 --no-calibrate --no-report --quiet");
  const Result b = run("run ch99/sum --threads 1 --repeat 5 --no-calibrate --no-report --quiet");
  ASSERT_EQ(a.rc, 0);
  ASSERT_EQ(b.rc, 0);
  const Result r = run("compare " + a.last_line() + " " + b.last_line() + " --out cmp.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("ch99/sum"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(dir_ / "cmp.json"));
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_TRUE(j["rows"][0].contains("verdict"));
  expect_usage_error(run("compare " + a.last_line()), "two run directories");
  fs::create_directories(dir_ / "a-dir");
  expect_usage_error(run("compare " + a.last_line() + " " + b.last_line() + " --out a-dir"),
                     "--out: 'a-dir' is a directory");
  EXPECT_TRUE(fs::is_empty(dir_ / "a-dir"));
}
