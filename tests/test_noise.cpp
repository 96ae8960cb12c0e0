// Machine activity from /proc: the parser, a busy process beside us is seen as such (before a
// run, and in the record of a configuration timed beside it), and calibration takes a figure
// again until two takes agree.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/cores_probe.hpp"
#include "concurdl/harness/noise.hpp"
#include "concurdl/harness/runner.hpp"

using namespace concurdl;

TEST(Noise, ParsesTheCpuLineOfProcStat) {
  const auto t = parse_proc_stat("cpu  100 20 30 1000 5 6 7 8 0 0");
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->busy, 100 + 20 + 30 + 6 + 7);
  EXPECT_DOUBLE_EQ(t->steal, 8);
  EXPECT_DOUBLE_EQ(t->total, 163 + 1000 + 5 + 8);
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8"));
  EXPECT_FALSE(parse_proc_stat("intr 1 2 3"));
  EXPECT_FALSE(parse_proc_stat("cpu 1 2"));
}

TEST(Noise, ActivityIsOtherProcessesCpuTimeInCpus) {
  const long tck = sysconf(_SC_CLK_TCK);
  CpuTimes a, b;
  b.total = 2.0 * tck;  // two CPUs for one second
  b.busy = 1.5 * tck;   // one and a half of them busy...
  b.self = 0.5 * tck;   // ...half a CPU of it ours
  b.steal = 0.1 * tck;
  const Activity act = activity_between(a, b, 1.0);
  EXPECT_NEAR(act.others_cpus, 1.0, 1e-9);
  EXPECT_NEAR(act.steal_cpus, 0.1, 1e-9);
}

// A child that burns a CPU for as long as it lives: the check must call the machine busy.
TEST(Noise, ABusyProcessBesideUsIsReported) {
  if (!read_cpu_times()) GTEST_SKIP() << "/proc/stat cannot be read here";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile unsigned long x = 0;
    for (;;) x = x + 1;
  }
  Activity act;
  const std::string line = quiet_check(0.5, &act);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_GE(act.others_cpus, 0.5) << "the spinning child used about one CPU";
  EXPECT_NE(line.find("the machine is not quiet"), std::string::npos) << line;
}

// The meter's arithmetic: windows' jiffies summed with their signs, averaged over their seconds,
// judged only where the jiffy counters can say something.
TEST(Noise, TheMeterAveragesOtherProcessesOverItsWindows) {
  const double tck = static_cast<double>(sysconf(_SC_CLK_TCK));
  NoiseMeter m;
  EXPECT_FALSE(m.judged());
  EXPECT_EQ(m.note(), "");
  CpuTimes a, b;
  // Window 1: 0.2 s, 0.3 CPU-seconds busy of which 0.1 ours: others 0.2 CPU-s.
  b.busy = 0.3 * tck;
  b.self = 0.1 * tck;
  m.add(a, b, 0.2);
  // Window 2: 0.2 s, rounding made ours exceed the busy count by a little: -0.02 CPU-s, kept
  // with its sign rather than clamped to 0.
  CpuTimes c, d;
  d.busy = 0.08 * tck;
  d.self = 0.10 * tck;
  d.steal = 0.04 * tck;
  m.add(c, d, 0.2);
  EXPECT_EQ(m.windows(), 2);
  EXPECT_DOUBLE_EQ(m.seconds(), 0.4);
  const Activity act = m.average();
  EXPECT_NEAR(act.others_cpus, (0.2 - 0.02) / 0.4, 1e-9);
  EXPECT_NEAR(act.steal_cpus, 0.04 / 0.4, 1e-9);
  ASSERT_TRUE(m.judged()) << "0.4 s over 2 windows is enough";
  // 0.45 CPUs busy elsewhere, 0.10 stolen: both over their thresholds.
  const std::string note = m.note();
  EXPECT_NE(note.find("other processes used 0.45 CPUs and the hypervisor stole 0.10 during the "
                      "timed repetitions (0.40 s; flagged at 0.25 / 0.05)"),
            std::string::npos)
      << note;
  EXPECT_TRUE(is_noisy(act));
  EXPECT_FALSE(is_noisy({.others_cpus = kNoisyOthersCpus - 0.01,
                         .steal_cpus = kNoisyStealCpus - 0.01,
                         .seconds = 1}));
  EXPECT_TRUE(is_noisy({.others_cpus = 0, .steal_cpus = kNoisyStealCpus, .seconds = 1}));
}

TEST(Noise, TheMeterJudgesOnlyWhatTheJiffyCountersCanResolve) {
  const double tck = static_cast<double>(sysconf(_SC_CLK_TCK));
  CpuTimes a, busy;
  busy.busy = 0.01 * tck;  // one CPU busy elsewhere for 10 ms
  // 0.04 s in all: under kMinNoiseSeconds, whatever it says.
  NoiseMeter short_total;
  for (int i = 0; i < 4; ++i) short_total.add(a, busy, 0.01);
  EXPECT_FALSE(short_total.judged());
  EXPECT_EQ(short_total.note(), "");
  // 100 windows of 5 ms (0.5 s): each is off by up to a jiffy, and sqrt(100) jiffies over 0.5 s
  // could be 0.2 CPUs of rounding. Needs 10 sqrt(n) jiffies: 1 s.
  NoiseMeter many;
  for (int i = 0; i < 100; ++i) many.add(a, busy, 0.005);
  EXPECT_NEAR(many.average().others_cpus, 2.0, 1e-9);
  EXPECT_FALSE(many.judged());
  // 5 windows of 0.06 s (0.3 s >= 10 sqrt(5) jiffies = 0.22 s): judged.
  NoiseMeter few;
  CpuTimes one;
  one.busy = 0.06 * tck;
  for (int i = 0; i < 5; ++i) few.add(a, one, 0.06);
  EXPECT_TRUE(few.judged());
  EXPECT_NEAR(few.average().others_cpus, 1.0, 1e-9);
  EXPECT_FALSE(few.note().empty());
  // A window under a millisecond turns the meter off for good.
  few.add(a, one, 0.0005);
  EXPECT_TRUE(few.off());
  EXPECT_FALSE(few.judged());
  EXPECT_EQ(few.note(), "");
}

// Two takes agree when every figure is within the tolerance of the larger; calibration takes
// again until two consecutive ones do, at most max_takes times.
TEST(Noise, CalibrationTakesUntilTwoConsecutiveAgree) {
  EXPECT_TRUE(takes_agree({100, 50}, {104, 51}, 0.05));
  EXPECT_FALSE(takes_agree({100, 50}, {104, 60}, 0.05));
  EXPECT_TRUE(takes_agree({0}, {0}, 0.05));
  EXPECT_FALSE(takes_agree({0}, {1}, 0.05));
  EXPECT_FALSE(takes_agree({1}, {1, 1}, 0.05));
  auto scripted = [](std::vector<std::vector<double>> values) {
    auto next = std::make_shared<std::size_t>(0);
    return [values, next] { return values.at((*next)++); };
  };
  // A quiet machine: the second take agrees.
  Takes quiet = agreeing_takes(scripted({{117e9}, {119e9}}), 0.05, 4);
  EXPECT_TRUE(quiet.agreed);
  EXPECT_EQ(quiet.figures.size(), 2u);
  // Disturbed first take: the second and third agree.
  Takes settles = agreeing_takes(scripted({{90e9}, {118e9}, {120e9}}), 0.05, 4);
  EXPECT_TRUE(settles.agreed);
  EXPECT_EQ(settles.figures.size(), 3u);
  // Never two in a row within 5% (117 and 121 are, but not consecutively): four takes, flagged.
  Takes unstable = agreeing_takes(scripted({{117e9}, {150e9}, {121e9}, {149e9}, {150e9}}), 0.05, 4);
  EXPECT_FALSE(unstable.agreed);
  ASSERT_EQ(unstable.figures.size(), 4u);
  EXPECT_DOUBLE_EQ(unstable.figures[3][0], 149e9);
  // Every figure must agree: the second one keeps it going.
  Takes both = agreeing_takes(scripted({{100, 10}, {101, 20}, {100, 21}}), 0.05, 4);
  EXPECT_TRUE(both.agreed);
  EXPECT_EQ(both.figures.size(), 3u);
  // No figures (an experiment that gives none): one take.
  Takes none = agreeing_takes(scripted({{}, {1}}), 0.05, 4);
  EXPECT_TRUE(none.agreed);
  EXPECT_EQ(none.figures.size(), 1u);
}

TEST(Noise, CalibrationFiguresAndTheNotesItGathersIntoItsDetail) {
  auto record = [](const char* id, const char* threads, const char* rate, double v) {
    Record r;
    r.experiment = id;
    r.params = {{"threads", threads}};
    r.derived[rate] = v;
    return r;
  };
  std::vector<Record> fma = {record("calibrate/fma_peak", "1", "flops_per_s", 60e9),
                             record("calibrate/fma_peak", "2", "flops_per_s", 110e9)};
  const auto figures = calibration_figures(fma);
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_DOUBLE_EQ(figures[0].second, 110e9);
  EXPECT_DOUBLE_EQ(figures[1].second, 60e9);
  const auto copy = calibration_figures({record("calibrate/mem_copy", "1", "bytes_per_s", 9e9),
                                         record("calibrate/mem_copy", "2", "bytes_per_s", 12e9)});
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_DOUBLE_EQ(copy[0].second, 12e9);
  EXPECT_TRUE(
      calibration_figures({record("calibrate/thread_copy", "1", "bytes_per_s", 1)}).empty());

  fma[0].notes["unstable"] = "peak FLOP/s, 1 core: takes 6e+10, 8e+10 disagree by more than 5%";
  fma[1].notes["unstable"] = fma[0].notes["unstable"];  // the group's note, on each record
  fma[1].notes["noisy"] = "other processes used 0.97 CPUs ...";
  const Calibration c = calibration_from_records(fma);
  ASSERT_TRUE(c.detail.contains("unstable"));
  ASSERT_EQ(c.detail["unstable"].size(), 1u);
  EXPECT_EQ(c.detail["unstable"][0].get<std::string>(),
            "calibrate/fma_peak: peak FLOP/s, 1 core: takes 6e+10, 8e+10 disagree by more than 5%");
  ASSERT_TRUE(c.detail.contains("noisy"));
  EXPECT_NE(c.detail["noisy"][0].get<std::string>().find("calibrate/fma_peak threads=2"),
            std::string::npos)
      << c.detail["noisy"].dump();
  EXPECT_DOUBLE_EQ(c.peak_flops, 110e9);
  // A quiet, settled calibration has neither key.
  const Calibration quiet =
      calibration_from_records({record("calibrate/fma_peak", "1", "flops_per_s", 60e9)});
  EXPECT_FALSE(quiet.detail.contains("unstable"));
  EXPECT_FALSE(quiet.detail.contains("noisy"));
}

namespace {

// ~0.3 s of timed repetitions that leave the CPUs to whoever else wants them: 5 x 60 ms asleep.
const bool registered = [] {
  register_experiment({
      .id = "test/noise_sleep",
      .chapter = "98-noise-test",
      .title = "60 ms asleep",
      .axes = {{"variant", {"sleep"}}},
      .repetitions = 5,
      .prepare =
          [](const Params&, GroupCache&) {
            Trial t;
            t.run = [] { std::this_thread::sleep_for(std::chrono::milliseconds(60)); };
            return t;
          },
  });
  return true;
}();

// A configuration far too short for the jiffy counters (0.2 ms) interleaved with a long one.
const bool registered_pair = [] {
  register_experiment({
      .id = "test/noise_pair",
      .chapter = "98-noise-test",
      .title = "0.2 ms and 60 ms asleep, interleaved",
      .axes = {{"variant", {"short", "long"}}},
      .repetitions = 5,
      .prepare =
          [](const Params& p, GroupCache&) {
            const auto d = std::chrono::microseconds(p.at("variant") == "short" ? 200 : 60000);
            Trial t;
            t.run = [d] { std::this_thread::sleep_for(d); };
            return t;
          },
  });
  return true;
}();

Record measure_sleep() {
  RunOptions opt;
  opt.progress = false;
  const auto records = run_configs(expand({find_experiment("test/noise_sleep")}, opt), opt, {});
  EXPECT_EQ(records.size(), 1u);
  return records.at(0);
}

// A child process that burns a CPU until it is killed.
class BusyChild {
 public:
  BusyChild() : pid_(fork()) {
    if (pid_ == 0) {
      volatile unsigned long x = 0;
      for (;;) x = x + 1;
    }
  }
  ~BusyChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  BusyChild(const BusyChild&) = delete;
  BusyChild& operator=(const BusyChild&) = delete;

 private:
  pid_t pid_;
};

}  // namespace

// The same configuration measured once with the machine as it is and once with a process
// spinning beside it: the second record carries the note "noisy". (The first is asserted quiet
// only when the machine was quiet before and after it: tests may run in parallel, and a
// neighbour's burst can fit between the two checks, so up to three tries, one of which must
// be quiet throughout and unflagged; a meter that flags everything fails every try.)
// The cores probe sees two threads that share one CPU: pinned to one (the threads it starts
// inherit the mask), two threads reach about one thread's FMA rate, and the note says so. One
// thread is 1 by definition. The probe's one-thread take can be slowed by a neighbouring test on
// the same CPU (ctest -j, TSan), which inflates one take's ratio: the least of five single takes
// must be short; a probe that reads two cores on one CPU fails every take.
TEST(CoresProbe, TwoThreadsOnOneCpuAreCoresShort) {
  EXPECT_EQ(cores_probe_ratio(1), 1.0);
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &saved)) first = c;
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  double shared = 2.0;
  for (int take = 0; take < 5 && shared >= kCoresShortFraction * 2; ++take)
    shared = std::min(shared, cores_probe_ratio(2, 0.004, 1));
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_GT(shared, 0.0);
  EXPECT_LT(shared, kCoresShortFraction * 2) << "two threads on one CPU looked like two cores";
  const std::string note = cores_short_note(shared, 1.98, 2);
  EXPECT_NE(note.find("not a core each"), std::string::npos) << note;
  EXPECT_EQ(cores_short_note(1.96, 1.9, 2), "");
  EXPECT_NE(cores_short_note(1.96, 1.2, 2), "");  // after the group counts as much as before
}

TEST(Noise, AConfigurationTimedBesideABusyProcessIsFlaggedNoisy) {
  if (!read_cpu_times()) GTEST_SKIP() << "/proc/stat cannot be read here";
  bool judged = false, unflagged = false;
  std::string flagged_note;
  for (int attempt = 0; attempt < 3 && !unflagged; ++attempt) {
    const bool quiet_before = quiet_check(0.3).empty();
    const Record quiet = measure_sleep();
    const bool quiet_after = quiet_check(0.3).empty();
    ASSERT_TRUE(quiet.valid) << quiet.validation;
    ASSERT_EQ(quiet.samples.size(), 5u);
    if (!quiet_before || !quiet_after) continue;
    judged = true;
    unflagged = !quiet.notes.count("noisy");
    if (!unflagged) flagged_note = quiet.notes.at("noisy");
  }
  if (judged) {
    EXPECT_TRUE(unflagged) << flagged_note;
  }

  Record busy;
  {
    BusyChild child;
    ASSERT_TRUE(child.started());
    busy = measure_sleep();
  }
  ASSERT_TRUE(busy.valid) << busy.validation;
  ASSERT_TRUE(busy.notes.count("noisy")) << "a spinning child beside the run was not noticed";
  const std::string& note = busy.notes.at("noisy");
  EXPECT_NE(note.find("other processes used"), std::string::npos) << note;
  EXPECT_NE(note.find("during the timed repetitions"), std::string::npos) << note;
}

// A configuration whose repetitions are too short to judge on their own takes the verdict of
// its group's round-robin, which it was interleaved with.
TEST(Noise, AConfigurationTooShortToJudgeTakesItsGroupsVerdict) {
  if (!read_cpu_times()) GTEST_SKIP() << "/proc/stat cannot be read here";
  RunOptions opt;
  opt.progress = false;
  std::vector<Record> records;
  {
    BusyChild child;
    ASSERT_TRUE(child.started());
    records = run_configs(expand({find_experiment("test/noise_pair")}, opt), opt, {});
  }
  ASSERT_EQ(records.size(), 2u);
  for (const Record& r : records) {
    SCOPED_TRACE(describe(r.params));
    ASSERT_TRUE(r.valid) << r.validation;
    ASSERT_TRUE(r.notes.count("noisy")) << "a spinning child beside the run was not noticed";
  }
  const Record& short_one = records[0].params.at("variant") == "short" ? records[0] : records[1];
  EXPECT_NE(short_one.notes.at("noisy").find("of its group"), std::string::npos)
      << short_one.notes.at("noisy");
}
