// What a CPU's identity is called (cpu_info.hpp): the microarchitecture tables (AMD's and
// Intel's families and models, Arm's implementer and part numbers), the vector extensions this
// suite cares about, and the hypervisor's usual name. Pure tables and lookups; cpu_info.cpp
// reads the machine.
#include <fmt/format.h>

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "concurdl/harness/cpu_info.hpp"
#include "concurdl/harness/cpu_topology.hpp"

namespace concurdl::cpu_info {

namespace {

using cpu_topology::parse_int;
using cpu_topology::trim;

struct ModelRange {
  int first, last;
  const char* name;
};

// AMD: the ranges of Linux's bsp_init_amd() (arch/x86/kernel/cpu/amd.c), which sets ZEN1..ZEN6.
// Family 25 is both Zen 3 and Zen 4, family 26 both Zen 5 and Zen 6: the model decides.
const std::map<int, std::vector<ModelRange>>& amd_table() {
  static const std::map<int, std::vector<ModelRange>> table = {
      {0x17,
       {{0x08, 0x08, "Zen+"},  // Pinnacle Ridge; the first matching range wins
        {0x18, 0x18, "Zen+"},  // Picasso
        {0x00, 0x2f, "Zen"},
        {0x50, 0x5f, "Zen"},
        {0x30, 0x4f, "Zen 2"},
        {0x60, 0x7f, "Zen 2"},
        {0x90, 0x91, "Zen 2"},
        {0xa0, 0xaf, "Zen 2"}}},
      {0x19,
       {{0x00, 0x0f, "Zen 3"},
        {0x20, 0x5f, "Zen 3"},
        {0x10, 0x1f, "Zen 4"},
        {0x60, 0xaf, "Zen 4"}}},
      {0x1a,
       {{0x00, 0x2f, "Zen 5"},
        {0x40, 0x4f, "Zen 5"},
        {0x60, 0x7f, "Zen 5"},
        {0x50, 0x5f, "Zen 6"},
        {0x80, 0xaf, "Zen 6"},
        {0xc0, 0xcf, "Zen 6"}}},
  };
  return table;
}

// Intel family 6: the models of Linux's intel-family.h one meets in servers and workstations.
const std::map<int, const char*>& intel_family6() {
  static const std::map<int, const char*> table = {
      {0x2d, "Sandy Bridge-EP"},
      {0x3e, "Ivy Bridge-EP"},
      {0x3f, "Haswell-EP"},
      {0x4f, "Broadwell-EP"},
      {0x56, "Broadwell-DE"},
      {0x4e, "Skylake"},
      {0x5e, "Skylake"},
      {0x8e, "Kaby Lake/Coffee Lake"},
      {0x9e, "Kaby Lake/Coffee Lake"},
      {0xa5, "Comet Lake"},
      {0xa6, "Comet Lake"},
      {0x6a, "Ice Lake-SP"},
      {0x6c, "Ice Lake-D"},
      {0x7e, "Ice Lake"},
      {0x8c, "Tiger Lake"},
      {0x8d, "Tiger Lake"},
      {0xa7, "Rocket Lake"},
      {0x97, "Alder Lake"},
      {0x9a, "Alder Lake"},
      {0xb7, "Raptor Lake"},
      {0xba, "Raptor Lake"},
      {0xbf, "Raptor Lake"},
      {0xaa, "Meteor Lake"},
      {0xc5, "Arrow Lake"},
      {0xc6, "Arrow Lake"},
      {0xbd, "Lunar Lake"},
      {0x8f, "Sapphire Rapids"},
      {0xcf, "Emerald Rapids"},
      {0xad, "Granite Rapids"},
      {0xae, "Granite Rapids-D"},
      {0xaf, "Sierra Forest"},
      {0xdd, "Clearwater Forest"},
  };
  return table;
}

// Model 0x55 is three generations, told apart by stepping.
std::string intel_skylake_sp(std::optional<int> stepping) {
  if (!stepping) return "Skylake-SP/Cascade Lake (stepping unknown)";
  if (*stepping <= 4) return "Skylake-SP";
  if (*stepping <= 7) return "Cascade Lake";
  if (*stepping == 10 || *stepping == 11) return "Cooper Lake";
  return fmt::format("Skylake-SP family (stepping {})", *stepping);
}

// Arm (implementer, part) pairs: the Neoverse cores behind Graviton, Grace, Altra, Cobalt, Axion.
const std::map<std::pair<int, int>, const char*>& arm_parts() {
  static const std::map<std::pair<int, int>, const char*> table = {
      {{0x41, 0xd08}, "Cortex-A72"},   {{0x41, 0xd0b}, "Cortex-A76"},
      {{0x41, 0xd0c}, "Neoverse N1"},  {{0x41, 0xd40}, "Neoverse V1"},
      {{0x41, 0xd49}, "Neoverse N2"},  {{0x41, 0xd4f}, "Neoverse V2"},
      {{0x41, 0xd84}, "Neoverse V3"},  {{0x41, 0xd8e}, "Neoverse N3"},
      {{0x48, 0xd01}, "TaiShan v110"},
  };
  return table;
}

std::string opt_text(std::optional<int> v) { return v ? std::to_string(*v) : "?"; }

// Flag -> what people call the extension, widest first: the summary names the first present.
struct VectorLevel {
  const char* flag;
  const char* label;
};
constexpr std::array<VectorLevel, 8> kVectorLevels = {{{"avx512f", "AVX-512"},
                                                       {"avx2", "AVX2"},
                                                       {"avx", "AVX"},
                                                       {"sse4_2", "SSE4.2"},
                                                       {"sve2", "SVE2"},
                                                       {"sve", "SVE"},
                                                       {"asimd", "NEON"},
                                                       {"neon", "NEON"}}};

// The extensions whose presence changes what this suite's kernels can do (x86, then Arm).
constexpr std::array<const char*, 19> kVectorFlags = {
    "sse4_2",      "avx",         "avx2",     "fma",      "avx512f",  "avx512bw", "avx512vl",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd",    "asimdhp",
    "sve",         "sve2",        "bf16",     "i8mm",     "sme"};

}  // namespace

// Arm's implementer codes (MIDR_EL1[31:24]) for the vendors one meets in servers.
std::string arm_vendor(std::string_view implementer) {
  static const std::map<int, const char*> names = {
      {0x41, "ARM"},       {0x42, "Broadcom"}, {0x43, "Cavium"},   {0x46, "Fujitsu"},
      {0x48, "HiSilicon"}, {0x4e, "NVIDIA"},   {0x51, "Qualcomm"}, {0x61, "Apple"},
      {0x6d, "Microsoft"}, {0xc0, "Ampere"}};
  const auto code = parse_int(implementer);
  if (!code) return "";
  const auto it = names.find(*code);
  return it != names.end() ? it->second : fmt::format("implementer {}", implementer);
}

std::string microarchitecture(const CpuinfoFields& c) {
  if (!c.implementer.empty()) {
    const auto impl = parse_int(c.implementer);
    const auto part = parse_int(c.part);
    if (impl && part) {
      const auto it = arm_parts().find({*impl, *part});
      if (it != arm_parts().end()) return it->second;
    }
    return fmt::format("unknown (implementer {} part {})",
                       c.implementer.empty() ? "?" : c.implementer, c.part.empty() ? "?" : c.part);
  }
  const std::string unknown =
      fmt::format("unknown (family {} model {})", opt_text(c.family), opt_text(c.model));
  if (!c.family || !c.model) return unknown;
  if (c.vendor == "AuthenticAMD") {
    const auto fam = amd_table().find(*c.family);
    if (fam == amd_table().end()) return unknown;
    for (const ModelRange& r : fam->second)
      if (*c.model >= r.first && *c.model <= r.last) return r.name;
    return unknown;
  }
  if (c.vendor == "GenuineIntel" && *c.family == 6) {
    if (*c.model == 0x55) return intel_skylake_sp(c.stepping);
    const auto it = intel_family6().find(*c.model);
    if (it != intel_family6().end()) return it->second;
  }
  return unknown;
}

std::vector<std::string> vector_flags(const std::vector<std::string>& flags) {
  const std::set<std::string> have(flags.begin(), flags.end());
  std::vector<std::string> out;
  for (const char* f : kVectorFlags)
    if (have.count(f)) out.emplace_back(f);
  return out;
}

std::string vector_summary(const std::vector<std::string>& flags_used) {
  const std::set<std::string> have(flags_used.begin(), flags_used.end());
  std::string out;
  for (const VectorLevel& level : kVectorLevels) {
    if (have.count(level.flag)) {
      out = level.label;
      break;
    }
  }
  if (have.count("amx_tile")) out += out.empty() ? "AMX" : ", AMX";
  if (have.count("sme")) out += out.empty() ? "SME" : ", SME";
  return out;
}

std::string hypervisor_display(std::string_view vendor) {
  static const std::map<std::string, std::string, std::less<>> names = {
      {"KVMKVMKVM", "KVM"},       {"Linux KVM Hv", "KVM"},        {"Microsoft Hv", "Hyper-V"},
      {"VMwareVMware", "VMware"}, {"XenVMMXenVMM", "Xen"},        {"xen", "Xen"},
      {"TCGTCGTCGTCG", "QEMU"},   {"VBoxVBoxVBox", "VirtualBox"}, {"bhyve bhyve", "bhyve"},
      {"ACRNACRNACRN", "ACRN"},   {"none", "bare metal"}};
  const auto it = names.find(trim(vendor));
  return it != names.end() ? it->second : std::string(trim(vendor));
}

}  // namespace concurdl::cpu_info
