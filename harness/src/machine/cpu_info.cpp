// provenance.cpu: the CPU's identity (vendor, family, model, microarchitecture), the vector
// extensions and hypervisor that change what a number means, and cpu0's caches and the process's
// CPUs' sharing, so that two results from "AMD EPYC" can be told apart. Read from /proc/cpuinfo
// and sysfs; on x86 cross-checked with CPUID. What the identity is called (the tables) is
// cpu_names.cpp's.
#include "concurdl/harness/cpu_info.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#if defined(__x86_64__) || defined(__i386__)
#if __has_include(<cpuid.h>)
#include <cpuid.h>
#define CONCURDL_HAVE_CPUID 1
#endif
#endif

#include "concurdl/harness/cpu_topology.hpp"

namespace concurdl::cpu_info {

using nlohmann::json;

namespace {

using cpu_topology::parse_int;
using cpu_topology::trim;

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string read_line(const std::string& path) { return std::string(trim(read_text(path))); }

#if defined(__x86_64__) || defined(__i386__)
constexpr bool kX86 = true;
#else
constexpr bool kX86 = false;
#endif

// The keys read, x86's and Arm's (Arm has no vendor_id and no `model`; its part number is).
using Setter = void (*)(CpuinfoFields&, std::string_view);
const std::map<std::string_view, Setter> kCpuinfoKeys = {
    {"vendor_id", [](CpuinfoFields& c, std::string_view v) { c.vendor = v; }},
    {"model name", [](CpuinfoFields& c, std::string_view v) { c.model_name = v; }},
    {"cpu family", [](CpuinfoFields& c, std::string_view v) { c.family = parse_int(v); }},
    {"model", [](CpuinfoFields& c, std::string_view v) { c.model = parse_int(v); }},
    {"stepping", [](CpuinfoFields& c, std::string_view v) { c.stepping = parse_int(v); }},
    {"flags", [](CpuinfoFields& c, std::string_view v) { c.flags = words(v); }},
    {"Features", [](CpuinfoFields& c, std::string_view v) { c.flags = words(v); }},
    {"CPU implementer", [](CpuinfoFields& c, std::string_view v) { c.implementer = v; }},
    {"CPU part", [](CpuinfoFields& c, std::string_view v) { c.part = v; }},
    {"CPU architecture", [](CpuinfoFields& c, std::string_view v) { c.family = parse_int(v); }},
    {"CPU revision", [](CpuinfoFields& c, std::string_view v) { c.stepping = parse_int(v); }},
};
}  // namespace

CpuinfoFields parse_cpuinfo(std::string_view text) {
  CpuinfoFields c;
  bool in_block = false;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (trim(line).empty()) {
      if (in_block) break;  // the first processor's block is enough
      continue;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    in_block = true;
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (const auto it = kCpuinfoKeys.find(key); it != kCpuinfoKeys.end()) it->second(c, value);
  }
  if (!c.implementer.empty()) {  // Arm: no vendor_id, and `model` is not a field
    if (c.vendor.empty()) c.vendor = arm_vendor(c.implementer);
    c.model = parse_int(c.part);
  }
  return c;
}

CpuidSignature decode_cpuid_signature(std::uint32_t eax) {
  const int stepping = static_cast<int>(eax & 0xf);
  const int base_model = static_cast<int>((eax >> 4) & 0xf);
  const int base_family = static_cast<int>((eax >> 8) & 0xf);
  const int ext_model = static_cast<int>((eax >> 16) & 0xf);
  const int ext_family = static_cast<int>((eax >> 20) & 0xff);
  CpuidSignature s;
  s.stepping = stepping;
  s.family = base_family == 0xf ? base_family + ext_family : base_family;
  s.model = base_family == 0x6 || base_family == 0xf ? (ext_model << 4) + base_model : base_model;
  return s;
}

std::string hypervisor_vendor(bool x86, bool hypervisor_flag, std::string_view cpuid_signature,
                              std::string_view sys_hypervisor_type) {
  cpuid_signature = trim(cpuid_signature);
  sys_hypervisor_type = trim(sys_hypervisor_type);
  if (hypervisor_flag && !cpuid_signature.empty()) return std::string(cpuid_signature);
  if (!sys_hypervisor_type.empty()) return std::string(sys_hypervisor_type);
  if (hypervisor_flag) return "unknown";
  return x86 ? "none" : "unknown";
}

std::optional<std::uint64_t> parse_cache_size(std::string_view text) {
  text = trim(text);
  std::uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        scale = 1ull << 10;
        break;
      case 'M':
        scale = 1ull << 20;
        break;
      case 'G':
        scale = 1ull << 30;
        break;
      default:
        break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v * scale;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
    i = j + 1;
  }
  return out;
}

std::vector<std::string> sharing_groups(const std::vector<int>& cpus,
                                        const std::map<int, std::string>& shared_list_of) {
  const std::set<int> mine(cpus.begin(), cpus.end());
  std::set<int> placed;
  std::vector<std::string> groups;
  for (int cpu : mine) {
    if (placed.count(cpu)) continue;
    std::vector<int> group{cpu};
    if (const auto it = shared_list_of.find(cpu); it != shared_list_of.end()) {
      if (const auto shared = parse_cpu_list(it->second)) {
        for (int other : *shared)
          if (other != cpu && mine.count(other) && !placed.count(other)) group.push_back(other);
      }
    }
    placed.insert(group.begin(), group.end());
    groups.push_back(format_cpu_list(group));
  }
  return groups;
}

namespace {

#ifdef CONCURDL_HAVE_CPUID
struct CpuidFacts {
  std::string vendor;
  CpuidSignature signature;
  bool hypervisor = false;
  std::string hypervisor_signature;
};

std::optional<CpuidFacts> read_cpuid() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return std::nullopt;
  CpuidFacts f;
  char vendor[13] = {};
  std::copy_n(reinterpret_cast<const char*>(&b), 4, vendor);
  std::copy_n(reinterpret_cast<const char*>(&d), 4, vendor + 4);
  std::copy_n(reinterpret_cast<const char*>(&c), 4, vendor + 8);
  f.vendor = vendor;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.signature = decode_cpuid_signature(a);
  f.hypervisor = (c >> 31) & 1;
  if (f.hypervisor) {
    // Leaf 0x40000000 exists only under a hypervisor (ECX bit 31 of leaf 1), and __get_cpuid
    // would refuse it (it checks against the highest basic leaf): ask directly.
    __cpuid(0x40000000, a, b, c, d);
    char sig[13] = {};
    std::copy_n(reinterpret_cast<const char*>(&b), 4, sig);
    std::copy_n(reinterpret_cast<const char*>(&c), 4, sig + 4);
    std::copy_n(reinterpret_cast<const char*>(&d), 4, sig + 8);
    f.hypervisor_signature = sig;  // stops at the first NUL: "KVMKVMKVM"
  }
  return f;
}
#endif

std::string cpu_dir(int cpu) { return fmt::format("/sys/devices/system/cpu/cpu{}", cpu); }

// cpuN's cache index directories that exist (index0, index1, ...).
std::vector<std::string> cache_dirs(int cpu) {
  std::vector<std::string> dirs;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = fmt::format("{}/cache/index{}", cpu_dir(cpu), i);
    if (!std::ifstream(dir + "/level")) break;
    dirs.push_back(dir);
  }
  return dirs;
}

json caches_of_cpu0() {
  json list = json::array();
  for (const std::string& dir : cache_dirs(0)) {
    json c = json::object();
    if (const auto level = parse_int(read_line(dir + "/level"))) c["level"] = *level;
    const std::string type = read_line(dir + "/type");
    c["type"] = type.empty() ? "unknown" : type;
    if (const auto size = parse_cache_size(read_line(dir + "/size"))) c["size_bytes"] = *size;
    const std::string shared = read_line(dir + "/shared_cpu_list");
    if (!shared.empty()) c["shared_cpu_list"] = shared;
    list.push_back(c);
  }
  return list;
}

// Which CPUs of the affinity mask share a core, an L2 and an L3 (cpu_topology reads the lists).
json topology() {
  const cpu_topology::CpuSharing s = cpu_topology::read_cpu_sharing();
  if (s.cpus.empty()) return json::object();
  json t = {{"cpus", format_cpu_list(s.cpus)}};
  if (!s.thread_siblings.empty()) t["core_groups"] = sharing_groups(s.cpus, s.thread_siblings);
  if (!s.l2_shared.empty()) t["l2_groups"] = sharing_groups(s.cpus, s.l2_shared);
  if (!s.l3_shared.empty()) t["l3_groups"] = sharing_groups(s.cpus, s.l3_shared);
  return t;
}

json collect_cpu_unguarded() {
  CpuinfoFields info = parse_cpuinfo(read_text("/proc/cpuinfo"));
  json cpu = json::object();
  bool hypervisor_flag = std::count(info.flags.begin(), info.flags.end(), "hypervisor") > 0;
  std::string hypervisor_signature;
#ifdef CONCURDL_HAVE_CPUID
  if (const auto id = read_cpuid()) {
    // cpuinfo comes first (the kernel may hide features it does not enable); CPUID fills what it
    // lacks (a container's made-up cpuinfo) and says when it disagrees.
    std::vector<std::string> filled;
    if (info.vendor.empty() && !id->vendor.empty()) {
      info.vendor = id->vendor;
      filled.push_back("vendor");
    }
    const auto fill = [&](std::optional<int>& mine, int theirs, const char* name) {
      if (mine) return;
      mine = theirs;
      filled.push_back(name);
    };
    fill(info.family, id->signature.family, "family");
    fill(info.model, id->signature.model, "model");
    fill(info.stepping, id->signature.stepping, "stepping");
    const bool agrees = info.vendor == id->vendor && info.family == id->signature.family &&
                        info.model == id->signature.model &&
                        info.stepping == id->signature.stepping;
    if (!filled.empty())
      cpu["cpuid_check"] =
          fmt::format("{} taken from CPUID (not in /proc/cpuinfo)", fmt::join(filled, ", "));
    else if (agrees)
      cpu["cpuid_check"] = "agrees";
    else
      cpu["cpuid_check"] =
          fmt::format("differs: CPUID says {} family {} model {} stepping {}", id->vendor,
                      id->signature.family, id->signature.model, id->signature.stepping);
    hypervisor_flag = hypervisor_flag || id->hypervisor;
    hypervisor_signature = id->hypervisor_signature;
  }
#endif
  cpu["vendor"] = info.vendor.empty() ? "unknown" : info.vendor;
  if (info.family) cpu["family"] = *info.family;
  if (info.model) cpu["model"] = *info.model;
  if (info.stepping) cpu["stepping"] = *info.stepping;
  if (!info.implementer.empty()) {
    cpu["implementer"] = info.implementer;
    cpu["part"] = info.part.empty() ? "unknown" : info.part;
  }
  cpu["microarchitecture"] = microarchitecture(info);
  cpu["flags_used"] = vector_flags(info.flags);
  cpu["hypervisor"] = hypervisor_vendor(kX86, hypervisor_flag, hypervisor_signature,
                                        read_line("/sys/hypervisor/type"));
  try {
    cpu["caches"] = caches_of_cpu0();
  } catch (const std::exception&) {
  }
  try {
    cpu["topology"] = topology();
  } catch (const std::exception&) {
  }
  return cpu;
}

const json* field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string string_field(const json& obj, const char* key) {
  const json* v = field(obj, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

std::string number_field(const json& obj, const char* key) {
  const json* v = field(obj, key);
  return v && v->is_number_integer() ? std::to_string(v->get<long long>()) : "";
}

}  // namespace

json collect_cpu() {
  // Provenance must never stop a run: a sysfs or cpuinfo surprise leaves fields out instead.
  try {
    return collect_cpu_unguarded();
  } catch (const std::exception&) {
    return json{{"vendor", "unknown"}, {"microarchitecture", "unknown"}};
  }
}

std::string machine_summary(const json& p) {
  const std::string brand = string_field(p, "cpu_model");
  const json* cpu = field(p, "cpu");
  if (!cpu || !cpu->is_object()) return brand;  // an older file: as it always read
  try {
    std::string out = brand.empty() ? string_field(*cpu, "vendor") : brand;
    // What tells the machine apart: the microarchitecture and the numbers it came from.
    std::vector<std::string> identity;
    std::string uarch = string_field(*cpu, "microarchitecture");
    if (!uarch.empty() && uarch.rfind("unknown", 0) != 0) identity.push_back(uarch);
    const std::string family = number_field(*cpu, "family"), model = number_field(*cpu, "model");
    const std::string part = string_field(*cpu, "part");
    if (!string_field(*cpu, "implementer").empty() && !part.empty())
      identity.push_back(
          fmt::format("implementer {} part {}", string_field(*cpu, "implementer"), part));
    else if (!family.empty() && !model.empty())
      identity.push_back(fmt::format("family {} model {}", family, model));
    if (!identity.empty()) out += fmt::format(" ({})", fmt::join(identity, ", "));
    std::vector<std::string> parts{out};
    if (const std::string n = number_field(p, "online_cpus"); !n.empty())
      parts.push_back(n + (n == "1" ? " CPU" : " CPUs"));
    if (const std::string hv = string_field(*cpu, "hypervisor"); !hv.empty() && hv != "unknown")
      parts.push_back(hypervisor_display(hv));
    if (const json* flags = field(*cpu, "flags_used"); flags && flags->is_array()) {
      std::vector<std::string> names;
      for (const json& f : *flags)
        if (f.is_string()) names.push_back(f.get<std::string>());
      if (const std::string v = vector_summary(names); !v.empty()) parts.push_back(v);
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  } catch (const std::exception&) {
    return brand;
  }
}

}  // namespace concurdl::cpu_info
