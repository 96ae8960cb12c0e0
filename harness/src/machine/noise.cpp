// Machine activity from /proc (noise.hpp).
#include "concurdl/harness/noise.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "concurdl/harness/experiment.hpp"

namespace concurdl {

std::optional<CpuTimes> parse_proc_stat(const std::string& text) {
  std::istringstream in(text);
  std::string label;
  if (!(in >> label) || label != "cpu") return std::nullopt;
  double v[8] = {};
  for (double& x : v)
    if (!(in >> x)) return std::nullopt;
  // user nice system idle iowait irq softirq steal
  CpuTimes t;
  t.busy = v[0] + v[1] + v[2] + v[5] + v[6];
  t.steal = v[7];
  t.total = t.busy + v[3] + v[4] + v[7];
  return t;
}

std::optional<CpuTimes> read_cpu_times() {
  std::ifstream stat("/proc/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  auto t = parse_proc_stat(line);
  if (!t) return std::nullopt;
  // /proc/self/stat: fields 14 to 17 are utime, stime, cutime and cstime (children waited
  // for: a fork-based experiment's workers are its own work, not another program's), after
  // "pid (comm) state ..."; comm may hold spaces, so count from the closing parenthesis.
  std::ifstream self("/proc/self/stat");
  std::string s;
  if (std::getline(self, s)) {
    const auto close = s.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(s.substr(close + 1));
      std::string field;
      double jiffies = 0;
      for (int i = 3; i <= 17 && rest >> field; ++i)
        if (i >= 14) jiffies += std::stod(field);
      t->self = jiffies;
    }
  }
  return t;
}

Activity activity_between(const CpuTimes& a, const CpuTimes& b, double seconds) {
  Activity out;
  out.seconds = seconds;
  if (b.total - a.total <= 0 || seconds <= 0) return out;
  // The kernel counts every CPU's time in jiffies of 1/CLK_TCK s: per second, one jiffy-second
  // per CPU. So jiffies / (seconds x CLK_TCK) is a number of CPUs kept busy.
  const double scale = 1.0 / (seconds * static_cast<double>(sysconf(_SC_CLK_TCK)));
  out.others_cpus = std::max(0.0, (b.busy - a.busy) - (b.self - a.self)) * scale;
  out.steal_cpus = std::max(0.0, b.steal - a.steal) * scale;
  return out;
}

bool is_noisy(const Activity& a) {
  return a.others_cpus >= kNoisyOthersCpus || a.steal_cpus >= kNoisyStealCpus;
}

std::string quiet_check(double seconds, Activity* measured) {
  const auto a = read_cpu_times();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto b = read_cpu_times();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a || !b) return "";
  const Activity act = activity_between(*a, *b, elapsed);
  if (measured) *measured = act;
  if (!is_noisy(act)) return "";
  return fmt::format(
      "the machine is not quiet: other processes used {:.2f} of {} CPUs and the hypervisor "
      "stole {:.2f} over {:.1f} s; timings will be noisier than a quiet run's",
      act.others_cpus, hardware_threads(), act.steal_cpus, act.seconds);
}

void NoiseMeter::start() {
  if (off_) return;
  start_ = read_cpu_times();
  t0_ = std::chrono::steady_clock::now();
}

void NoiseMeter::stop() {
  if (off_ || !start_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const auto end = read_cpu_times();
  if (!end) {
    off_ = true;  // /proc went away: say nothing rather than something wrong
    return;
  }
  add(*start_, *end, seconds);
  start_.reset();
}

void NoiseMeter::add(const CpuTimes& a, const CpuTimes& b, double seconds) {
  if (off_) return;
  if (seconds < kMinWindowSeconds) {
    off_ = true;
    return;
  }
  // Summed with their signs: a window's counts may be a jiffy under or over, and clamping each
  // at zero would turn that rounding into activity.
  others_jiffies_ += (b.busy - a.busy) - (b.self - a.self);
  steal_jiffies_ += b.steal - a.steal;
  seconds_ += seconds;
  ++windows_;
}

Activity NoiseMeter::average() const {
  Activity out;
  out.seconds = seconds_;
  if (seconds_ <= 0) return out;
  const double scale = 1.0 / (seconds_ * static_cast<double>(sysconf(_SC_CLK_TCK)));
  out.others_cpus = std::max(0.0, others_jiffies_) * scale;
  out.steal_cpus = std::max(0.0, steal_jiffies_) * scale;
  return out;
}

bool NoiseMeter::judged() const {
  if (off_ || windows_ == 0) return false;
  const double jiffy = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return seconds_ >= kMinNoiseSeconds && seconds_ >= 10 * std::sqrt(windows_) * jiffy;
}

std::string NoiseMeter::note(const char* during) const {
  if (!judged()) return "";
  const Activity act = average();
  if (!is_noisy(act)) return "";
  return fmt::format(
      "other processes used {:.2f} CPUs and the hypervisor stole {:.2f} during {} ({:.2f} s; "
      "flagged at {} / {}): the timing is likely slower and noisier than a quiet run's",
      act.others_cpus, act.steal_cpus, during, act.seconds, kNoisyOthersCpus, kNoisyStealCpus);
}

Activity activity_before_run(const nlohmann::json& provenance) {
  Activity a;
  if (!provenance.is_object() || !provenance.contains("activity_before_run")) return a;
  const nlohmann::json& j = provenance.at("activity_before_run");
  auto number = [&](const char* key) {
    return j.is_object() && j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>()
                                                                     : 0.0;
  };
  a.others_cpus = number("other_processes_cpus");
  a.steal_cpus = number("steal_cpus");
  a.seconds = number("seconds");
  return a;
}

bool started_busy(const Activity& before) {
  return before.others_cpus >= kNoisyOthersCpus || before.steal_cpus >= kNoisyStealCpus;
}

}  // namespace concurdl
