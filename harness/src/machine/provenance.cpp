// Provenance: everything needed to say where a number came from, collected at run time
// (machine, OS, git state, library versions) and at build time (compiler, flags).
#include "concurdl/harness/provenance.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <oneapi/tbb/version.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "concurdl/build_info.hpp"
#include "concurdl/git_info.hpp"
#include "concurdl/harness/cpu_info.hpp"
#include "concurdl/harness/experiment.hpp"

extern "C" char** environ;
#ifdef CONCURDL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef CONCURDL_WITH_NCCL
#include <nccl.h>
#endif
#ifdef CONCURDL_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API is all we use; the C++ bindings need libmpi_cxx
#include <mpi.h>
#endif

namespace concurdl {

using nlohmann::json;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

// Output of a shell command, or nullopt when it fails.
std::optional<std::string> command_output(const std::string& cmd) {
  FILE* pipe = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int rc = ::pclose(pipe);
  if (rc != 0) return std::nullopt;
  return out;
}

std::string file_field(const char* path, const std::string& key, char sep = ':') {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto pos = line.find(sep);
    if (pos != std::string::npos) return trim(line.substr(pos + 1));
  }
  return "";
}

int physical_cores() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys, core;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = trim(line.substr(line.find(':') + 1));
    if (line.rfind("core id", 0) == 0) {
      core = trim(line.substr(line.find(':') + 1));
      cores.insert({phys, core});
    }
  }
  return static_cast<int>(cores.size());
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

json libraries() {
  json libs = json::object();
  libs["google_benchmark"] = build::benchmark_version;
  libs["googletest"] = build::gtest_version;
#ifdef _OPENMP
  libs["openmp"] = fmt::format("{} (_OPENMP)", _OPENMP);
#endif
  libs["onetbb"] = fmt::format("{} (runtime interface {})", TBB_runtime_version(),
                               TBB_runtime_interface_version());
  libs["openblas"] = trim(openblas_get_config());
  if (build::uring_version[0]) libs["liburing"] = build::uring_version;
#ifdef CONCURDL_WITH_MPI
  if (build::have_mpi) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(version, &len) == MPI_SUCCESS) {
      std::string v(version, static_cast<std::size_t>(len));
      libs["mpi"] = trim(v.substr(0, v.find(',')));
    }
  }
#endif
#ifdef CONCURDL_WITH_CUDA
  if (build::have_cuda) {
    int rt = 0, drv = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
      libs["cuda_runtime"] = fmt::format("{}.{}", rt / 1000, (rt % 1000) / 10);
    if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
      libs["cuda_driver"] = fmt::format("{}.{}", drv / 1000, (drv % 1000) / 10);
  }
#endif
#ifdef CONCURDL_WITH_NCCL
  if (build::have_nccl) {
    int v = 0;
    if (ncclGetVersion(&v) == ncclSuccess)
      libs["nccl"] = fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  }
#endif
  return libs;
}

json gpus() {
  json list = json::array();
#ifdef CONCURDL_WITH_CUDA
  if (build::have_cuda) {
    int n = 0;
    // Without a GPU this is an error (35, insufficient driver), not 0: both mean "none".
    if (cudaGetDeviceCount(&n) == cudaSuccess) {
      for (int d = 0; d < n; ++d) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
        json g = {{"name", prop.name},
                  {"compute_capability", fmt::format("{}.{}", prop.major, prop.minor)},
                  {"memory_bytes", prop.totalGlobalMem},
                  {"multiprocessors", prop.multiProcessorCount},
                  {"l2_bytes", prop.l2CacheSize}};
        // Clocks are attributes (cudaDeviceProp's clock fields are gone in CUDA 13): the SM
        // clock and the memory's, in kHz, and the memory bus width, whose product gives the
        // memory's theoretical bandwidth (two transfers a clock).
        int sm_khz = 0, mem_khz = 0, bus_bits = 0;
        if (cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, d) == cudaSuccess)
          g["sm_clock_khz"] = sm_khz;
        if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, d) == cudaSuccess &&
            cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, d) == cudaSuccess) {
          g["memory_clock_khz"] = mem_khz;
          g["memory_bus_bits"] = bus_bits;
          g["memory_bandwidth_theoretical_bytes_per_s"] =
              2.0 * mem_khz * 1e3 * static_cast<double>(bus_bits) / 8.0;
        }
        list.push_back(std::move(g));
      }
    }
    cudaGetLastError();
  }
#endif
  return list;
}

// The CUDA driver's and runtime's versions ("13.0"), where the build has CUDA: "none" for a
// driver that is not installed (a machine without a GPU).
json cuda_versions() {
  json v = json::object();
#ifdef CONCURDL_WITH_CUDA
  if (build::have_cuda) {
    int driver = 0, runtime = 0;
    v["driver"] = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
                      ? json(fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10))
                      : json("none");
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
      v["runtime"] = fmt::format("{}.{}", runtime / 1000, (runtime % 1000) / 10);
    cudaGetLastError();
  }
#endif
  return v;
}

json relevant_env() {
  // MALLOC_ and GLIBC_TUNABLES: glibc's allocator settings, which move resident memory.
  static constexpr std::array<const char*, 13> prefixes = {
      "OMP_", "OPENBLAS_", "OMPI_",        "NCCL_", "CUDA_",   "GOMP_",         "KMP_",
      "TBB_", "CONCURDL_", "TSAN_OPTIONS", "MKL_",  "MALLOC_", "GLIBC_TUNABLES"};
  json env = json::object();
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq);
    for (const char* p : prefixes)
      if (key.rfind(p, 0) == 0) env[key] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace

std::string utc_now_iso() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

namespace {
// The commit the program was built from (taken at build time); the source tree's HEAD now, if
// it can be asked, is recorded too when it differs (a pull without a rebuild).
std::optional<std::string> source_tree_head() {
  const std::string dir = shell_quote(build::source_dir);
  if (auto head = command_output("git -C " + dir + " rev-parse HEAD")) return trim(*head);
  return std::nullopt;
}
}  // namespace

std::string short_commit() {
  const std::string c = build::git_commit;
  return c.empty() || c == "unknown" ? "nogit" : c.substr(0, 7);
}

// The transparent huge pages mode Linux runs with (the bracketed word of `enabled`: always,
// madvise or never), which decides whether the buffers that ask for them (kernels::
// HugePageVector) get them; empty where this kernel has none.
std::string transparent_hugepages_mode(const std::string& enabled_file) {
  std::ifstream in(enabled_file);
  std::string line;
  std::getline(in, line);
  const auto open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

json placement_provenance(const ranks::Placement& placement) {
  json hosts = json::array();
  for (const ranks::Host& h : placement.hosts)
    hosts.push_back({{"name", h.name}, {"address", h.address}, {"ranks", h.ranks}});
  return {{"hosts", std::move(hosts)},
          {"transport",
           {{"within_host", placement.within_host}, {"between_hosts", placement.between_hosts}}}};
}

json collect_provenance() {
  utsname u{};
  ::uname(&u);
  std::string os = file_field("/etc/os-release", "PRETTY_NAME", '=');
  if (os.size() >= 2 && os.front() == '"') os = os.substr(1, os.size() - 2);
  const std::string mem_kb = file_field("/proc/meminfo", "MemTotal");
  json p = {
      {"host", host_name()},
      {"cpu_model", file_field("/proc/cpuinfo", "model name")},
      {"cpu", cpu_info::collect_cpu()},  // which CPU "cpu_model" was: family, model, caches, ...
      {"cores", hardware_threads()},     // usable by this process (affinity mask)
      {"online_cpus", std::thread::hardware_concurrency()},
      {"physical_cores", physical_cores()},
      {"memory_bytes", mem_kb.empty() ? 0 : std::stoull(mem_kb) * 1024},
      {"os", os},
      {"kernel", fmt::format("{} {} {}", u.sysname, u.release, u.machine)},
      {"compiler", fmt::format("{} {}", build::compiler_id, build::compiler_version)},
      {"cxx_flags", build::cxx_flags},
      {"build_type", build::build_type},
      {"sanitizer", build::sanitizer},
      {"git_commit", build::git_commit},
      {"git_dirty", build::git_dirty < 0 ? json(nullptr) : json(build::git_dirty == 1)},
      {"source_dir", build::source_dir},
      {"libraries", libraries()},
      {"gpus", gpus()},
      {"cuda", cuda_versions()},
      {"env", relevant_env()},
      {"started", utc_now_iso()},
  };
  if (std::string thp = transparent_hugepages_mode(); !thp.empty())
    p["transparent_hugepages"] = thp;
  if (auto head = source_tree_head(); head && *head != build::git_commit)
    p["source_tree_git_commit"] = *head;  // the tree moved on since this program was built
  return p;
}

}  // namespace concurdl
