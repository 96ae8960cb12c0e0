// How busy the machine is besides us: from /proc/stat (all CPUs) and /proc/self/stat (this
// process). A timing taken while another program burns a core, or while the hypervisor steals
// time from the guest, is a different measurement from a quiet one; the run says so.
#pragma once

#include <optional>
#include <string>

namespace concurdl {

struct CpuTimes {
  double total = 0;  // every CPU's jiffies, all states
  double busy = 0;   // user, nice, system, irq, softirq (not idle, iowait, steal)
  double steal = 0;  // taken by the hypervisor for other guests
  double self = 0;   // this process's user + system jiffies
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

// Watches the machine for `seconds` while this process sleeps. "" when it is quiet, else one
// line saying what is busy: "the machine is not quiet: other processes used 0.98 of 2 CPUs and
// the hypervisor stole 0.02 over 0.3 s; timings will be noisier than a quiet run's".
std::string quiet_check(double seconds, Activity* measured = nullptr);

}  // namespace concurdl
