// Machine activity from /proc (noise.hpp).
#include "concurdl/harness/noise.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
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
  // /proc/self/stat: fields 14 and 15 are utime and stime, after "pid (comm) state ...";
  // comm may hold spaces, so count from the closing parenthesis.
  std::ifstream self("/proc/self/stat");
  std::string s;
  if (std::getline(self, s)) {
    const auto close = s.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(s.substr(close + 1));
      std::string field;
      double utime = 0, stime = 0;
      for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stod(field);
        if (i == 15) stime = std::stod(field);
      }
      t->self = utime + stime;
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
  // A quarter of a CPU busy elsewhere, or 5% of one stolen, changes timings measurably.
  if (act.others_cpus < 0.25 && act.steal_cpus < 0.05) return "";
  return fmt::format(
      "the machine is not quiet: other processes used {:.2f} of {} CPUs and the hypervisor "
      "stole {:.2f} over {:.1f} s; timings will be noisier than a quiet run's",
      act.others_cpus, hardware_threads(), act.steal_cpus, act.seconds);
}

}  // namespace concurdl
