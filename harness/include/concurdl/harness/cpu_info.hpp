// Which CPU a run had, told apart beyond the brand string: one "AMD EPYC" was Zen 3, Zen 4 or
// Zen 5 on this project's machines. The parsers are pure (text in, values out) so that tests
// feed them captured /proc/cpuinfo and sysfs text; collect_cpu() reads the live machine.
// Nothing here throws: what cannot be read or parsed is left out or says "unknown".
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/harness/cpu_topology.hpp"

namespace concurdl::cpu_info {

// The first processor block of /proc/cpuinfo.
struct CpuinfoFields {
  std::string vendor;      // x86 `vendor_id` ("AuthenticAMD"); on Arm the implementer's name
  std::string model_name;  // `model name`, "" where there is none
  // x86: the display family, model and stepping (cpuinfo already adds the extended fields).
  // Arm: `CPU architecture`, `CPU part` and `CPU revision`.
  std::optional<int> family, model, stepping;
  std::string implementer, part;   // Arm only, as written ("0x41", "0xd4f")
  std::vector<std::string> flags;  // x86 `flags`, Arm `Features`
};

CpuinfoFields parse_cpuinfo(std::string_view cpuinfo_text);

// Arm's implementer code (MIDR_EL1[31:24], "0x41") as its vendor ("ARM", "NVIDIA", "Ampere"),
// "implementer 0x.." for others, "" when it is no number.
std::string arm_vendor(std::string_view implementer);

// A best-effort name from a small table ("Zen 5", "Sapphire Rapids", "Neoverse V2"); outside the
// table "unknown (family F model M)" (Arm: "unknown (implementer I part P)"), never a guess.
std::string microarchitecture(const CpuinfoFields& cpu);

// The vector extensions this suite cares about that `flags` has (sse4_2, avx, avx2, fma, the
// AVX-512 and AMX ones; on Arm asimd, sve, sve2, bf16, i8mm, sme), in that fixed order.
std::vector<std::string> vector_flags(const std::vector<std::string>& flags);
// The widest of them as people say it: "AVX-512", "AVX-512, AMX", "AVX2", "SVE2", "NEON";
// "" when there is none.
std::string vector_summary(const std::vector<std::string>& flags_used);

// CPUID leaf 1 EAX decoded into the display family, model and stepping (as Linux prints them).
struct CpuidSignature {
  int family = 0, model = 0, stepping = 0;
};
CpuidSignature decode_cpuid_signature(std::uint32_t leaf1_eax);

// The hypervisor's vendor: the CPUID 0x40000000 signature where the `hypervisor` flag is set
// ("KVMKVMKVM", "Microsoft Hv"), else /sys/hypervisor/type ("xen"); "none" when x86 says bare
// metal; "unknown" when nothing tells (Arm has no such flag).
std::string hypervisor_vendor(bool x86, bool hypervisor_flag, std::string_view cpuid_signature,
                              std::string_view sys_hypervisor_type);
// How people call it: "KVMKVMKVM" -> "KVM", "Microsoft Hv" -> "Hyper-V"; others as they are.
std::string hypervisor_display(std::string_view vendor);

// sysfs cache `size` ("48K", "32768K", "1M") in bytes; nullopt if it is not one.
std::optional<std::uint64_t> parse_cache_size(std::string_view text);
// A kernel CPU list ("0-3,8,10-11") as sorted CPU numbers (cpu_topology's, below this).
using cpu_topology::parse_cpu_list;
// The reverse: {0,1,2,3,8} -> "0-3,8".
std::string format_cpu_list(const std::vector<int>& cpus);
// Which of `cpus` share a resource, given each CPU's sharing list (thread_siblings_list, a
// cache's shared_cpu_list): one compact list per group, intersected with `cpus`, ordered by
// their first CPU. A CPU without a (parsable) list is a group of its own.
std::vector<std::string> sharing_groups(const std::vector<int>& cpus,
                                        const std::map<int, std::string>& shared_list_of);

// provenance.cpu, read from this machine: vendor, family, model, stepping, microarchitecture,
// flags_used, hypervisor, caches, topology (docs/results-schema.md, Provenance).
nlohmann::json collect_cpu();

// The CPU cell of a report's run table: "AMD EPYC (Zen 5, family 26 model 2), 2 CPUs, KVM,
// AVX-512". A provenance without `cpu` (older files) gives `cpu_model` alone, as before.
std::string machine_summary(const nlohmann::json& provenance);

}  // namespace concurdl::cpu_info
