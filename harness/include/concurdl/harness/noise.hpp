// How busy the machine is besides us: from /proc/stat (all CPUs) and /proc/self/stat (this
// process). A timing taken while another program burns a core, or while the hypervisor steals
// time from the guest, is a different measurement from a quiet one; the run says so.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace concurdl {

// Above either, a machine is "not quiet" (before a run) and a configuration "noisy" (its timed
// repetitions): a quarter of a CPU busy elsewhere, or 5% of one stolen, changes timings
// measurably.
inline constexpr double kNoisyOthersCpus = 0.25;
inline constexpr double kNoisyStealCpus = 0.05;

struct CpuTimes {
  double total = 0;  // every CPU's jiffies, all states
  double busy = 0;   // user, nice, system, irq, softirq (not idle, iowait, steal)
  double steal = 0;  // taken by the hypervisor for other guests
  double self = 0;   // this process's user + system jiffies: all its threads, and its
                     // children once waited for
};

// Parses /proc/stat's "cpu" line and /proc/self/stat; nullopt where /proc cannot be read.
std::optional<CpuTimes> read_cpu_times();
// From the first line of /proc/stat's text ("cpu  user nice system idle iowait irq softirq
// steal ..."); nullopt when it is not such a line.
std::optional<CpuTimes> parse_proc_stat(const std::string& text);

// Between two readings, in CPUs' worth (1.0 = one CPU fully used): what other processes used
// and what the hypervisor stole.
struct Activity {
  double others_cpus = 0;
  double steal_cpus = 0;
  double seconds = 0;
};
Activity activity_between(const CpuTimes& a, const CpuTimes& b, double seconds);

// Above kNoisyOthersCpus or kNoisyStealCpus.
bool is_noisy(const Activity& a);

// What a run's provenance says other processes and the hypervisor took before it started
// (provenance.activity_before_run); zeros where it says nothing.
Activity activity_before_run(const nlohmann::json& provenance);
// That activity at or above kNoisyOthersCpus or kNoisyStealCpus: the run started beside other work.
bool started_busy(const Activity& before);

// Watches the machine for `seconds` while this process sleeps. "" when it is quiet, else one
// line saying what is busy: "the machine is not quiet: other processes used 0.98 of 2 CPUs and
// the hypervisor stole 0.02 over 0.3 s; timings will be noisier than a quiet run's".
std::string quiet_check(double seconds, Activity* measured = nullptr);

// The activity of other processes over a set of windows (a configuration's timed repetitions):
// start() and stop() around each, outside the timed region (a reading costs ~10 us). The
// windows' jiffies and seconds are summed, so average() weighs each window by its length.
//
// The counters tick in jiffies (1/CLK_TCK s, 10 ms), so each window's counts are off by up to a
// jiffy, and over n windows the error grows like sqrt(n) jiffies. judged() is true only where
// that error is at most a tenth of a CPU: seconds >= 10 sqrt(n) / CLK_TCK (0.22 s for 5
// windows) and >= kMinNoiseSeconds. A window shorter than kMinWindowSeconds stops the meter
// altogether (nothing is judged): repetitions that short could never add up to a judgement,
// and reading /proc between them would disturb the caches more than it tells.
class NoiseMeter {
 public:
  static constexpr double kMinNoiseSeconds = 0.05;
  static constexpr double kMinWindowSeconds = 1e-3;

  void start();  // no-op once the meter is off
  void stop();   // after start(): adds the window
  // The arithmetic, for a window whose readings are given.
  void add(const CpuTimes& a, const CpuTimes& b, double seconds);

  bool off() const { return off_; }
  int windows() const { return windows_; }
  double seconds() const { return seconds_; }
  Activity average() const;
  bool judged() const;
  // "" unless judged() and noisy; else the record's note: "other processes used 0.97 CPUs and
  // the hypervisor stole 0.00 during the timed repetitions (1.2 s; flagged at 0.25 / 0.05):
  // the timing is likely slower and noisier than a quiet run's".
  std::string note(const char* during = "the timed repetitions") const;

 private:
  std::optional<CpuTimes> start_;
  std::chrono::steady_clock::time_point t0_;
  double others_jiffies_ = 0, steal_jiffies_ = 0, seconds_ = 0;
  int windows_ = 0;
  bool off_ = false;
};

}  // namespace concurdl
