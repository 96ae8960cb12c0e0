// Where two threads can be put on this machine, for experiments that pin them: on the two
// hardware threads of one core (SMT siblings: one L1 and L2 between them), on two cores that
// share a last-level cache (L3), or on two cores whose L3s differ (another CCD or socket). The
// choice is a pure function of the CPU lists the kernel publishes, so that the tests can hand it
// topologies captured elsewhere; read_cpu_sharing() reads them from this machine's sysfs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace concurdl::cpu_topology {

// A kernel CPU list ("0-3,8,10-11") as sorted CPU numbers; nullopt if malformed.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);
// The text of a /proc or /sys field without its surrounding blanks and newline.
std::string_view trim(std::string_view s);
// "26" or "0xd4f" (surrounding blanks allowed); nullopt for anything else.
std::optional<int> parse_int(std::string_view s);

// The placements, in the order a lesson compares them (most sharing first).
inline constexpr std::string_view kPlacements[] = {"smt_siblings", "same_l3", "other_l3"};

using CpuPair = std::pair<int, int>;  // first < second

// For each placement, the lowest-numbered pair of allowed CPUs that has it (pairs ordered by
// their first CPU, then their second), or nullopt with the reason in `why_missing`.
struct PlacementPairs {
  std::optional<CpuPair> smt_siblings;  // two hardware threads of one core
  std::optional<CpuPair> same_l3;       // two different cores under one L3
  std::optional<CpuPair> other_l3;      // two different cores under different L3s
  // placement name -> why this machine has no such pair, for each missing placement.
  std::map<std::string, std::string> why_missing;

  // The pair of the placement named `name` (one of kPlacements); nullopt for any other name.
  std::optional<CpuPair> pair(std::string_view name) const;
};

// The CPUs this process may run on and, per CPU, the kernel's sharing lists as sysfs writes them
// ("0-1", "0,64"): topology/thread_siblings_list and the shared_cpu_list of its level-2 and
// level-3 data or unified caches. A CPU missing from a map (or whose list does not parse) shares
// nothing known. provenance.cpu.topology (cpu_info) groups the CPUs by the same lists.
struct CpuSharing {
  std::vector<int> cpus;
  std::map<int, std::string> thread_siblings;
  std::map<int, std::string> l2_shared;
  std::map<int, std::string> l3_shared;
};

// Two CPUs are one core when either lists the other as a thread sibling, and share an L3 when
// either lists the other in its L3's shared_cpu_list. A pair is other_l3 only when both CPUs'
// L3 lists are known: without them nothing says that two cores do not share one.
PlacementPairs placement_pairs(const std::vector<int>& cpus,
                               const std::map<int, std::string>& thread_siblings,
                               const std::map<int, std::string>& l3_shared);
PlacementPairs placement_pairs(const CpuSharing& sharing);

// This process's affinity mask (sched_getaffinity) and the lists of each CPU in it, from
// /sys/devices/system/cpu/cpuN/{topology/thread_siblings_list, cache/indexK} (the indexes whose
// level is 2 or 3 and type is not Instruction). Missing files leave the maps without those CPUs.
CpuSharing read_cpu_sharing();

}  // namespace concurdl::cpu_topology
