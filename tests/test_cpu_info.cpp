// provenance.cpu: the parsers on captured /proc/cpuinfo and sysfs text (AMD Zen 5, Intel
// Sapphire Rapids, Arm Neoverse V2, and broken input), the report's machine summary for new and
// old results files, and the live collection on this machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "concurdl/harness/cpu_info.hpp"
#include "concurdl/harness/provenance.hpp"
#include "concurdl/harness/report.hpp"

using namespace concurdl;
using namespace concurdl::cpu_info;
namespace fs = std::filesystem;

namespace {

// This project's KVM guest on an EPYC 9005 (Turin), first block as captured, flags shortened.
constexpr const char* kZen5 = R"(processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 26
model		: 2
model name	: AMD EPYC
stepping	: 1
microcode	: 0x1000065
cpu MHz		: 2596.122
cache size	: 1024 KB
physical id	: 0
siblings	: 2
core id		: 0
cpu cores	: 2
flags		: fpu vme de pse tsc msr pae mce cx8 apic sse sse2 ht syscall nx lm pni ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm bmi1 avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl avx_vnni avx512_bf16 avx512vbmi avx512_vnni avx512_vp2intersect
bogomips	: 5192.24

processor	: 1
vendor_id	: AuthenticAMD
cpu family	: 26
model		: 2
model name	: AMD EPYC
stepping	: 1
)";

// A Xeon Platinum 8480+ (Sapphire Rapids): family 6 model 143 stepping 8, AMX present.
constexpr const char* kSapphireRapids = R"(processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 143
model name	: Intel(R) Xeon(R) Platinum 8480+
stepping	: 8
microcode	: 0x2b0004b1
cpu MHz		: 2000.000
cache size	: 107520 KB
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm avx2 bmi2 erms avx512f avx512dq rdseed adx avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl avx_vnni avx512_bf16 avx512vbmi umip pku avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq la57 rdpid serialize tsxldtrk amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities
bugs		: spectre_v1 spectre_v2 spec_store_bypass swapgs eibrs_pbrsb
bogomips	: 4000.00
)";

// An NVIDIA Grace core (Neoverse V2): no vendor_id, no model name, `Features` not `flags`.
constexpr const char* kNeoverseV2 = R"(processor	: 0
BogoMIPS	: 2000.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xd4f
CPU revision	: 0

processor	: 1
BogoMIPS	: 2000.00
)";

std::vector<std::string> strings(std::initializer_list<const char*> list) {
  return {list.begin(), list.end()};
}

}  // namespace

TEST(CpuInfo, Zen5Family26Model2) {
  const CpuinfoFields c = parse_cpuinfo(kZen5);
  EXPECT_EQ(c.vendor, "AuthenticAMD");
  EXPECT_EQ(c.model_name, "AMD EPYC");
  EXPECT_EQ(c.family, 26);
  EXPECT_EQ(c.model, 2);
  EXPECT_EQ(c.stepping, 1);
  EXPECT_EQ(microarchitecture(c), "Zen 5");
  EXPECT_EQ(vector_flags(c.flags), strings({"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw",
                                            "avx512vl", "avx512_bf16"}));
  EXPECT_EQ(vector_summary(vector_flags(c.flags)), "AVX-512");
}

TEST(CpuInfo, SapphireRapidsFamily6Model143) {
  const CpuinfoFields c = parse_cpuinfo(kSapphireRapids);
  EXPECT_EQ(c.vendor, "GenuineIntel");
  EXPECT_EQ(c.family, 6);
  EXPECT_EQ(c.model, 143);
  EXPECT_EQ(c.stepping, 8);
  EXPECT_EQ(microarchitecture(c), "Sapphire Rapids");
  EXPECT_EQ(vector_flags(c.flags),
            strings({"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                     "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"}));
  EXPECT_EQ(vector_summary(vector_flags(c.flags)), "AVX-512, AMX");
}

TEST(CpuInfo, Aarch64UsesImplementerAndPart) {
  const CpuinfoFields c = parse_cpuinfo(kNeoverseV2);
  EXPECT_EQ(c.vendor, "ARM");
  EXPECT_EQ(c.implementer, "0x41");
  EXPECT_EQ(c.part, "0xd4f");
  EXPECT_EQ(c.family, 8);  // CPU architecture
  EXPECT_EQ(c.model, 0xd4f);
  EXPECT_EQ(c.stepping, 0);
  EXPECT_EQ(c.model_name, "");
  EXPECT_EQ(microarchitecture(c), "Neoverse V2");
  EXPECT_EQ(vector_flags(c.flags), strings({"asimd", "asimdhp", "sve", "sve2", "bf16", "i8mm"}));
  EXPECT_EQ(vector_summary(vector_flags(c.flags)), "SVE2");

  CpuinfoFields other = c;
  other.implementer = "0x99";
  other.part = "0x123";
  EXPECT_EQ(microarchitecture(other), "unknown (implementer 0x99 part 0x123)");
}

// Families 25 and 26 each hold two generations: the model range decides, and outside the known
// ranges the answer says so.
TEST(CpuInfo, AmdModelRangesAndUnknowns) {
  const auto uarch = [](const char* vendor, int family, int model) {
    CpuinfoFields c;
    c.vendor = vendor;
    c.family = family;
    c.model = model;
    return microarchitecture(c);
  };
  EXPECT_EQ(uarch("AuthenticAMD", 25, 0x01), "Zen 3");  // Milan
  EXPECT_EQ(uarch("AuthenticAMD", 25, 0x21), "Zen 3");  // Vermeer
  EXPECT_EQ(uarch("AuthenticAMD", 25, 0x11), "Zen 4");  // Genoa
  EXPECT_EQ(uarch("AuthenticAMD", 25, 0xa0), "Zen 4");  // Bergamo
  EXPECT_EQ(uarch("AuthenticAMD", 26, 0x11), "Zen 5");  // Turin dense
  EXPECT_EQ(uarch("AuthenticAMD", 23, 0x01), "Zen");    // Naples
  EXPECT_EQ(uarch("AuthenticAMD", 23, 0x31), "Zen 2");  // Rome
  EXPECT_EQ(uarch("AuthenticAMD", 25, 0xb0), "unknown (family 25 model 176)");
  EXPECT_EQ(uarch("AuthenticAMD", 26, 0xd0), "unknown (family 26 model 208)");
  EXPECT_EQ(uarch("AuthenticAMD", 16, 2), "unknown (family 16 model 2)");
  EXPECT_EQ(uarch("GenuineIntel", 6, 0xcf), "Emerald Rapids");
  EXPECT_EQ(uarch("GenuineIntel", 6, 0xad), "Granite Rapids");
  EXPECT_EQ(uarch("GenuineIntel", 6, 0x6a), "Ice Lake-SP");
  EXPECT_EQ(uarch("GenuineIntel", 6, 0x01), "unknown (family 6 model 1)");
  EXPECT_EQ(uarch("GenuineIntel", 19, 0x01), "unknown (family 19 model 1)");
  EXPECT_EQ(uarch("HygonGenuine", 24, 0), "unknown (family 24 model 0)");

  CpuinfoFields skylake_sp{"GenuineIntel", "", 6, 0x55, 4, "", "", {}};
  EXPECT_EQ(microarchitecture(skylake_sp), "Skylake-SP");
  skylake_sp.stepping = 7;
  EXPECT_EQ(microarchitecture(skylake_sp), "Cascade Lake");
  skylake_sp.stepping = 11;
  EXPECT_EQ(microarchitecture(skylake_sp), "Cooper Lake");
}

TEST(CpuInfo, BrokenTextGivesUnknownNotAnException) {
  for (const char* text : {"", "\n\n\n", "garbage without colons", "cpu family : twenty\nmodel :",
                           "cpu family : 99999999999999999999\nmodel : -"}) {
    CpuinfoFields c;
    ASSERT_NO_THROW(c = parse_cpuinfo(text)) << text;
    EXPECT_FALSE(c.family.has_value()) << text;
    EXPECT_FALSE(c.model.has_value()) << text;
    EXPECT_EQ(microarchitecture(c), "unknown (family ? model ?)") << text;
    EXPECT_TRUE(vector_flags(c.flags).empty());
    EXPECT_EQ(vector_summary({}), "");
  }
}

TEST(CpuInfo, CpuidSignatureIsTheDisplayFamilyAndModel) {
  const CpuidSignature turin = decode_cpuid_signature(0x00b00f21);  // base 0xf + extended 0xb
  EXPECT_EQ(turin.family, 26);
  EXPECT_EQ(turin.model, 2);
  EXPECT_EQ(turin.stepping, 1);
  const CpuidSignature spr = decode_cpuid_signature(0x000806f8);  // extended model 8, base 0xf
  EXPECT_EQ(spr.family, 6);
  EXPECT_EQ(spr.model, 143);
  EXPECT_EQ(spr.stepping, 8);
  const CpuidSignature old = decode_cpuid_signature(0x00000543);  // family 5: no extension
  EXPECT_EQ(old.family, 5);
  EXPECT_EQ(old.model, 4);
}

TEST(CpuInfo, Hypervisor) {
  EXPECT_EQ(hypervisor_vendor(true, true, "KVMKVMKVM", ""), "KVMKVMKVM");
  EXPECT_EQ(hypervisor_vendor(true, true, "Microsoft Hv", ""), "Microsoft Hv");
  EXPECT_EQ(hypervisor_vendor(true, true, "", "xen\n"), "xen");
  EXPECT_EQ(hypervisor_vendor(true, true, "", ""), "unknown");
  EXPECT_EQ(hypervisor_vendor(true, false, "", ""), "none");
  EXPECT_EQ(hypervisor_vendor(false, false, "", ""), "unknown");  // Arm: no flag to go by
  EXPECT_EQ(hypervisor_display("KVMKVMKVM"), "KVM");
  EXPECT_EQ(hypervisor_display("Microsoft Hv"), "Hyper-V");
  EXPECT_EQ(hypervisor_display("none"), "bare metal");
  EXPECT_EQ(hypervisor_display("SomethingNew"), "SomethingNew");
}

TEST(CpuInfo, CacheSizesAndCpuLists) {
  EXPECT_EQ(parse_cache_size("48K"), 48u * 1024);
  EXPECT_EQ(parse_cache_size("32768K\n"), 32u * 1024 * 1024);
  EXPECT_EQ(parse_cache_size("1M"), 1024u * 1024);
  EXPECT_EQ(parse_cache_size("512"), 512u);
  EXPECT_FALSE(parse_cache_size(""));
  EXPECT_FALSE(parse_cache_size("K"));
  EXPECT_FALSE(parse_cache_size("lots"));

  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list(""), (std::vector<int>{}));
  EXPECT_FALSE(parse_cpu_list("3-1"));
  EXPECT_FALSE(parse_cpu_list("a-b"));
  EXPECT_FALSE(parse_cpu_list("0-2000000000"));
  EXPECT_EQ(format_cpu_list({8, 0, 1, 2, 3, 10, 11, 3}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({}), "");
}

// Two SMT siblings per core (n and n+64), two cores per L2-less pair, one L3 for all: the groups
// are cut to the CPUs this process may use.
TEST(CpuInfo, SharingGroupsWithinTheAffinityMask) {
  const std::vector<int> mine = {0, 1, 2, 64, 65};
  std::map<int, std::string> core, l3;
  for (int c : mine) {
    core[c] = c < 64 ? std::to_string(c) + "," + std::to_string(c + 64)
                     : std::to_string(c - 64) + "," + std::to_string(c);
    l3[c] = "0-7,64-71";
  }
  EXPECT_EQ(sharing_groups(mine, core), strings({"0,64", "1,65", "2"}));
  EXPECT_EQ(sharing_groups(mine, l3), strings({"0-2,64-65"}));
  std::map<int, std::string> broken = {{0, "nonsense"}};
  EXPECT_EQ(sharing_groups({0, 1}, broken), strings({"0", "1"}));
}

TEST(CpuInfo, MachineSummary) {
  nlohmann::json p = {{"cpu_model", "AMD EPYC"},
                      {"online_cpus", 2},
                      {"cpu",
                       {{"vendor", "AuthenticAMD"},
                        {"family", 26},
                        {"model", 2},
                        {"microarchitecture", "Zen 5"},
                        {"hypervisor", "KVMKVMKVM"},
                        {"flags_used", {"sse4_2", "avx", "avx2", "fma", "avx512f"}}}}};
  EXPECT_EQ(machine_summary(p), "AMD EPYC (Zen 5, family 26 model 2), 2 CPUs, KVM, AVX-512");

  p["cpu"]["microarchitecture"] = "unknown (family 26 model 208)";
  p["cpu"]["model"] = 208;
  p["cpu"]["hypervisor"] = "none";
  EXPECT_EQ(machine_summary(p), "AMD EPYC (family 26 model 208), 2 CPUs, bare metal, AVX-512");

  p["cpu"] = {{"vendor", "ARM"},
              {"implementer", "0x41"},
              {"part", "0xd4f"},
              {"family", 8},
              {"model", 0xd4f},
              {"hypervisor", "unknown"},
              {"flags_used", {"asimd", "sve", "sve2"}},
              {"microarchitecture", "Neoverse V2"}};
  p["cpu_model"] = "";
  p["online_cpus"] = 72;
  EXPECT_EQ(machine_summary(p), "ARM (Neoverse V2, implementer 0x41 part 0xd4f), 72 CPUs, SVE2");

  // Older files have no `cpu`: the brand string alone, as before. Wrong types do not throw.
  EXPECT_EQ(machine_summary({{"cpu_model", "Demo CPU @ 3 GHz"}, {"online_cpus", 4}}),
            "Demo CPU @ 3 GHz");
  EXPECT_EQ(machine_summary(nlohmann::json::object()), "");
  EXPECT_EQ(machine_summary({{"cpu_model", "X"}, {"cpu", {{"family", "six"}, {"flags_used", 3}}}}),
            "X");
}

TEST(CpuInfo, ReportRunTableShowsTheSummary) {
  const fs::path dir =
      fs::temp_directory_path() / ("concurdl-test-cpu-info-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  RunFile run;
  run.concurdl_version = "0.1.0";
  run.command = {"concurdl", "calibrate"};
  run.provenance = {{"host", "vm"},
                    {"cpu_model", "AMD EPYC"},
                    {"cores", 2},
                    {"online_cpus", 2},
                    {"cpu",
                     {{"vendor", "AuthenticAMD"},
                      {"family", 26},
                      {"model", 2},
                      {"microarchitecture", "Zen 5"},
                      {"hypervisor", "KVMKVMKVM"},
                      {"flags_used", {"avx2", "avx512f"}}}}};
  RunFile old = run;
  old.provenance.erase("cpu");
  old.provenance["host"] = "old";
  const ReportFiles files = write_report({run, old}, {}, dir);
  std::ifstream in(files.md);
  std::stringstream md;
  md << in.rdbuf();
  EXPECT_NE(md.str().find("| AMD EPYC (Zen 5, family 26 model 2), 2 CPUs, KVM, AVX-512 |"),
            std::string::npos)
      << md.str();
  EXPECT_NE(md.str().find("| AMD EPYC |"), std::string::npos) << md.str();
  fs::remove_all(dir);
}

TEST(CpuInfo, LiveCollectionOnThisMachine) {
  nlohmann::json cpu;
  ASSERT_NO_THROW(cpu = collect_cpu());
  ASSERT_TRUE(cpu.is_object());
  ASSERT_TRUE(cpu.contains("microarchitecture"));
  EXPECT_TRUE(cpu.at("microarchitecture").is_string());
  EXPECT_TRUE(cpu.at("flags_used").is_array());
  EXPECT_TRUE(cpu.at("hypervisor").is_string());
  if (cpu.contains("caches")) {
    for (const auto& c : cpu.at("caches")) EXPECT_TRUE(c.contains("type")) << c.dump();
  }
#if defined(__x86_64__) || defined(__i386__)
  ASSERT_TRUE(cpu.at("vendor").is_string());
  EXPECT_FALSE(cpu.at("vendor").get<std::string>().empty());
  EXPECT_NE(cpu.at("vendor"), "unknown");
  ASSERT_TRUE(cpu.contains("family")) << cpu.dump();
  EXPECT_TRUE(cpu.at("family").is_number_integer());
  EXPECT_GT(cpu.at("family").get<int>(), 0);
  EXPECT_TRUE(cpu.at("model").is_number_integer());
#else
  GTEST_SKIP() << "vendor and family are checked on x86 only";
#endif
}

// The environment a run records: the settings that move its figures (glibc's allocator's
// among them: they move resident memory), and nothing else of the environment.
TEST(Provenance, EnvironmentKeepsTheSettingsThatMoveFigures) {
  ::setenv("MALLOC_MMAP_THRESHOLD_", "131072", 1);
  ::setenv("CONCURDL_PROVENANCE_PROBE", "1", 1);
  ::setenv("PROVENANCE_UNRELATED_PROBE", "1", 1);
  const nlohmann::json env = concurdl::collect_provenance().at("env");
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  ::unsetenv("CONCURDL_PROVENANCE_PROBE");
  ::unsetenv("PROVENANCE_UNRELATED_PROBE");
  EXPECT_EQ(env.value("MALLOC_MMAP_THRESHOLD_", ""), "131072") << env.dump();
  EXPECT_EQ(env.value("CONCURDL_PROVENANCE_PROBE", ""), "1") << env.dump();
  EXPECT_FALSE(env.contains("PROVENANCE_UNRELATED_PROBE")) << env.dump();
}

// The provenance's transparent huge pages mode is the bracketed word of Linux's `enabled` file,
// whichever it is; no file, or no bracket, records nothing.
TEST(Provenance, TransparentHugePagesModeIsTheBracketedWord) {
  const fs::path dir =
      fs::temp_directory_path() / ("concurdl-test-thp-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto mode_of = [&](const std::string& text) {
    const fs::path f = dir / "enabled";
    std::ofstream(f) << text;
    return transparent_hugepages_mode(f.string());
  };
  EXPECT_EQ(mode_of("always [madvise] never\n"), "madvise");
  EXPECT_EQ(mode_of("[always] madvise never\n"), "always");
  EXPECT_EQ(mode_of("always madvise [never]\n"), "never");
  EXPECT_EQ(mode_of("always madvise never\n"), "");
  EXPECT_EQ(transparent_hugepages_mode((dir / "absent").string()), "");
  fs::remove_all(dir);
  const nlohmann::json p = collect_provenance();
  const std::string here = transparent_hugepages_mode();
  if (here.empty())
    EXPECT_FALSE(p.contains("transparent_hugepages")) << p.dump();
  else
    EXPECT_EQ(p.value("transparent_hugepages", ""), here);
}
