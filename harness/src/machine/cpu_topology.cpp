// Which CPU pairs give each thread placement (cpu_topology.hpp): the pure choice over captured
// lists, and the reading of this machine's lists from sysfs.
#include "concurdl/harness/cpu_topology.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>

namespace concurdl::cpu_topology {

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<int> parse_int(std::string_view s) {
  s = trim(s);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  text = trim(text);
  std::set<int> cpus;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    const auto dash = item.find('-');
    const auto first = parse_int(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parse_int(item.substr(dash + 1));
    // A bound on the range keeps a corrupt list from filling memory.
    if (!first || !last || *first < 0 || *last < *first || *last - *first > (1 << 20))
      return std::nullopt;
    for (int c = *first; c <= *last; ++c) cpus.insert(c);
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

namespace {

using Sharing = std::map<int, std::set<int>>;

// The lists that parse, as sets; a CPU whose list does not parse is left out (shares nothing
// known), as cpu_info::sharing_groups treats it.
Sharing parse_lists(const std::map<int, std::string>& lists) {
  Sharing out;
  for (const auto& [cpu, text] : lists)
    if (const auto parsed = parse_cpu_list(text); parsed && !parsed->empty())
      out[cpu] = std::set<int>(parsed->begin(), parsed->end());
  return out;
}

bool lists(const Sharing& s, int cpu, int other) {
  const auto it = s.find(cpu);
  return it != s.end() && it->second.count(other) > 0;
}

// The kernel's lists are symmetric; a captured or partly unreadable set may not be.
bool linked(const Sharing& s, int a, int b) { return lists(s, a, b) || lists(s, b, a); }

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

}  // namespace

std::optional<CpuPair> PlacementPairs::pair(std::string_view name) const {
  if (name == "smt_siblings") return smt_siblings;
  if (name == "same_l3") return same_l3;
  if (name == "other_l3") return other_l3;
  return std::nullopt;
}

PlacementPairs placement_pairs(const std::vector<int>& cpus_in,
                               const std::map<int, std::string>& thread_siblings,
                               const std::map<int, std::string>& l3_shared) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  const Sharing core = parse_lists(thread_siblings);
  const Sharing l3 = parse_lists(l3_shared);

  PlacementPairs out;
  bool two_cores = false;  // some pair of allowed CPUs is on different cores
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    for (std::size_t j = i + 1; j < cpus.size(); ++j) {
      const int a = cpus[i], b = cpus[j];
      if (linked(core, a, b)) {
        if (!out.smt_siblings) out.smt_siblings = CpuPair{a, b};
        continue;
      }
      two_cores = true;
      if (linked(l3, a, b)) {
        if (!out.same_l3) out.same_l3 = CpuPair{a, b};
      } else if (l3.count(a) && l3.count(b)) {
        if (!out.other_l3) out.other_l3 = CpuPair{a, b};
      }
      if (out.smt_siblings && out.same_l3 && out.other_l3) return out;
    }
  }

  if (cpus.size() < 2) {
    const std::string why = fmt::format("the affinity mask has {} CPU{}, not two", cpus.size(),
                                        cpus.size() == 1 ? "" : "s");
    for (std::string_view p : kPlacements) out.why_missing[std::string(p)] = why;
    return out;
  }
  if (!out.smt_siblings)
    out.why_missing["smt_siblings"] =
        core.empty() ? "no thread_siblings_list in sysfs: which CPUs share a core is unknown"
                     : "no SMT siblings in the affinity mask (one hardware thread per core, or "
                       "the siblings are outside the mask)";
  const char* no_l3 = "no level-3 cache in sysfs: which cores share one is unknown";
  if (!out.same_l3)
    out.why_missing["same_l3"] = l3.empty()   ? no_l3
                                 : !two_cores ? "the affinity mask holds one core only"
                                              : "no two cores in the affinity mask share an L3";
  if (!out.other_l3)
    out.why_missing["other_l3"] =
        l3.empty()   ? no_l3
        : !two_cores ? "the affinity mask holds one core only"
                     : "every core in the affinity mask shares one L3 (one CCD or socket)";
  return out;
}

PlacementPairs placement_pairs(const CpuSharing& sharing) {
  return placement_pairs(sharing.cpus, sharing.thread_siblings, sharing.l3_shared);
}

CpuSharing read_cpu_sharing() {
  CpuSharing out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.cpus.push_back(c);
  for (int cpu : out.cpus) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu{}", cpu);
    if (std::string s = read_line(dir + "/topology/thread_siblings_list"); !s.empty())
      out.thread_siblings[cpu] = s;
    for (int i = 0; i < 16; ++i) {
      const std::string index = fmt::format("{}/cache/index{}", dir, i);
      const std::string level = read_line(index + "/level");
      if (level.empty()) break;
      if ((level != "2" && level != "3") || read_line(index + "/type") == "Instruction") continue;
      if (std::string s = read_line(index + "/shared_cpu_list"); !s.empty())
        (level == "2" ? out.l2_shared : out.l3_shared).emplace(cpu, s);
    }
  }
  return out;
}

}  // namespace concurdl::cpu_topology
