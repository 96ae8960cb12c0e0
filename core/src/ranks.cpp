// Ranks (ranks.hpp): the mpirun launcher, the world and per-configuration communicators, and the
// collectives the runner needs to keep ranks in step.
#include "concurdl/core/ranks.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <thread>
#include <tuple>

#include "concurdl/build_info.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/hardware.hpp"
#include "concurdl/core/params.hpp"

#ifdef CONCURDL_WITH_MPI
#include "concurdl/core/ranks_mpi.hpp"
#endif

namespace concurdl::ranks {

namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// This machine's name and its first IPv4 address that is not loopback.
Host this_host() {
  Host h;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) h.name = name;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_LOOPBACK) != 0 || (i->ifa_flags & IFF_UP) == 0) continue;
      char text[INET_ADDRSTRLEN] = {};
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) {
        h.address = text;
        break;
      }
    }
    ::freeifaddrs(list);
  }
  return h;
}

// Words separated by commas or spaces.
std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::string word;
  for (const char c : s + ",") {
    if (c == ',' || c == ' ') {
      if (!word.empty()) out.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return out;
}

#ifdef CONCURDL_WITH_MPI
bool g_initialized = false;
int g_rank = 0, g_size = 1;
MPI_Comm g_comm = MPI_COMM_NULL;  // the current Group's; MPI_COMM_NULL when not taking part
int g_comm_size = 1, g_comm_rank = 0;
bool g_in_group = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Every world rank's text, in rank order, on every rank.
std::vector<std::string> all_text(const std::string& mine) {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(g_size));
  CDL_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::vector<int> offsets(lens.size(), 0);
  int total = 0;
  for (std::size_t i = 0; i < lens.size(); ++i) {
    offsets[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  CDL_MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(),
                               MPI_CHAR, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < lens.size(); ++i)
    out.push_back(
        all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lens[i])));
  return out;
}
#endif

}  // namespace

bool built() { return build::have_mpi; }

bool launched_by_mpi() {
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE") || env_set("PMIX_RANK") ||
         (env_set("SLURM_PROCID") && env_set("SLURM_NTASKS") && env_set("SLURM_STEP_ID"));
}

std::vector<std::string> launch_command(int ranks, const std::string& hostfile,
                                        const std::vector<std::string>& args) {
  std::string mpirun = build::mpiexec;
  if (mpirun.empty()) mpirun = "mpirun";
  std::vector<std::string> cmd = {mpirun, "-np", std::to_string(ranks)};
  // OpenMPI refuses to run as root without this; other MPIs do not know the flag.
  if (::geteuid() == 0)
    for (const std::string& flag : split_list(build::mpiexec_preflags, "CONCURDL_MPIEXEC_PREFLAGS"))
      if (!flag.empty()) cmd.push_back(flag);
  if (!hostfile.empty()) {
    cmd.insert(cmd.end(), {"--hostfile", hostfile});
  } else if (static_cast<unsigned>(ranks) > hardware_threads()) {
    cmd.push_back("--oversubscribe");  // more ranks than CPUs on this machine
  }
  // mpirun binds each rank to one core by default: threaded code inside a rank would then
  // share that core. The ranks' placement is left to the OS, as for threads.
  cmd.insert(cmd.end(), {"--bind-to", "none"});
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  cmd.push_back(ec ? std::string("concurdl") : self.string());
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

int launch(int ranks, const std::string& hostfile, const std::vector<std::string>& args) {
  if (!built())
    throw UsageError(
        "--ranks: this concurdl was built without MPI (apt-get install libopenmpi-dev "
        "openmpi-bin, then configure again)");
  const std::vector<std::string> cmd = launch_command(ranks, hostfile, args);
  std::vector<char*> argv;
  for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw UsageError(fmt::format("--ranks: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "concurdl: --ranks: cannot start %s: %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw UsageError(fmt::format("--ranks: waitpid: {}", std::strerror(errno)));
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 127)
      throw UsageError(fmt::format("--ranks: cannot start '{}'", cmd[0]));
    return WEXITSTATUS(status);
  }
  std::fprintf(stderr, "concurdl: mpirun ended by signal %d\n", WTERMSIG(status));
  return 1;
}

#ifdef CONCURDL_WITH_MPI

void init() {
  if (g_initialized) return;
  int already = 0;
  CDL_MPI_CHECK(MPI_Initialized(&already));
  if (!already) {
    int provided = 0;
    CDL_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    std::atexit(finalize_at_exit);
  }
  CDL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
  CDL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
  // Errors come back as codes, so that CDL_MPI_CHECK can name them (the default aborts).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_initialized = true;
}

bool initialized() { return g_initialized; }
int world_rank() { return g_rank; }
int world_size() { return g_size; }

Group::Group(int size) {
  if (!g_initialized) {
    if (size != 1)
      throw UsageError(
          fmt::format("ranks={} needs an MPI launch (concurdl run --ranks {})", size, size));
    return;
  }
  if (size < 1 || size > g_size)
    throw UsageError(
        fmt::format("ranks={}: this launch has {} rank(s) (--ranks sets how many)", size, g_size));
  const int color = g_rank < size ? 0 : MPI_UNDEFINED;
  CDL_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, g_rank, &g_comm));
  g_in_group = true;
  if (g_comm != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_size(g_comm, &g_comm_size);
    MPI_Comm_rank(g_comm, &g_comm_rank);
  }
}

Group::~Group() {
  if (!g_initialized) return;
  if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
  g_comm = MPI_COMM_NULL;
  g_comm_size = 1;
  g_comm_rank = 0;
  g_in_group = false;
  try {
    polite_barrier();
  } catch (...) {
  }
}

bool Group::participating() const { return !g_initialized || g_comm != MPI_COMM_NULL; }

int comm_size() { return g_comm_size; }
int comm_rank() { return g_comm_rank; }
MPI_Comm comm() { return g_comm; }

bool all_true(bool mine) {
  if (g_comm == MPI_COMM_NULL) return mine;
  int in = mine ? 1 : 0, out = 0;
  CDL_MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, g_comm));
  return out != 0;
}

double max_over(double mine) {
  if (g_comm == MPI_COMM_NULL) return mine;
  double out = 0;
  CDL_MPI_CHECK(MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MAX, g_comm));
  return out;
}

std::vector<std::string> gather_text(const std::string& mine) {
  if (g_comm == MPI_COMM_NULL) return {mine};
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(g_comm_size));
  CDL_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, g_comm));
  std::vector<int> offsets(lens.size(), 0);
  int total = 0;
  for (std::size_t i = 0; i < lens.size(); ++i) {
    offsets[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<std::size_t>(g_comm_rank == 0 ? total : 0), '\0');
  CDL_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(),
                            MPI_CHAR, 0, g_comm));
  std::vector<std::string> out;
  if (g_comm_rank != 0) return out;
  for (std::size_t i = 0; i < lens.size(); ++i)
    out.push_back(
        all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lens[i])));
  return out;
}

void polite_barrier() {
  if (!g_initialized || g_size == 1) return;
  MPI_Request req;
  CDL_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  int done = 0;
  // A rank that waits for a long configuration must not take a core from the ranks measuring.
  auto pause = std::chrono::microseconds(20);
  while (true) {
    CDL_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

std::vector<int> hosts_of(MPI_Comm comm) {
  int rank = 0, size = 1;
  CDL_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  CDL_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm node = MPI_COMM_NULL;
  CDL_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int leader = rank;  // the host's lowest rank names it
  const int rc = MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  CDL_MPI_CHECK(rc);
  std::vector<int> leaders(static_cast<std::size_t>(size));
  CDL_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm));
  // A host's number: how many hosts have a lower leader (each leader is its host's lowest rank).
  std::vector<int> out(leaders.size());
  int hosts = 0;
  for (std::size_t r = 0; r < leaders.size(); ++r)
    out[r] =
        leaders[r] == static_cast<int>(r) ? hosts++ : out[static_cast<std::size_t>(leaders[r])];
  return out;
}

Placement placement() {
  Placement out;
  if (!g_initialized) {
    out.hosts.push_back(this_host());
    out.hosts.back().ranks = {0};
    out.host_of = {0};
  } else {
    out.host_of = hosts_of(MPI_COMM_WORLD);
    const Host mine = this_host();
    const std::vector<std::string> texts = all_text(mine.name + '\n' + mine.address);
    for (int r = 0; r < g_size; ++r) {
      const auto h = static_cast<std::size_t>(out.host_of[static_cast<std::size_t>(r)]);
      if (h == out.hosts.size()) {  // the host's first rank: hosts are numbered in rank order
        const std::string& t = texts[static_cast<std::size_t>(r)];
        const auto nl = t.find('\n');
        out.hosts.push_back({t.substr(0, nl), t.substr(nl + 1), {}});
      }
      out.hosts[h].ranks.push_back(r);
    }
  }
  const char* pml = std::getenv("OMPI_MCA_pml");
  const char* btl = std::getenv("OMPI_MCA_btl");
  std::tie(out.within_host, out.between_hosts) =
      transports(pml != nullptr ? pml : "", btl != nullptr ? btl : "");
  return out;
}

#else  // !CONCURDL_WITH_MPI: one process, rank 0 of 1.

void init() { throw UsageError("--ranks: this concurdl was built without MPI"); }
bool initialized() { return false; }
int world_rank() { return 0; }
int world_size() { return 1; }
Group::Group(int size) {
  if (size != 1)
    throw UsageError(fmt::format("ranks={}: this concurdl was built without MPI", size));
}
Group::~Group() = default;
bool Group::participating() const { return true; }
int comm_size() { return 1; }
int comm_rank() { return 0; }
bool all_true(bool mine) { return mine; }
double max_over(double mine) { return mine; }
std::vector<std::string> gather_text(const std::string& mine) { return {mine}; }
void polite_barrier() {}
Placement placement() {
  Placement out;
  out.hosts.push_back(this_host());
  out.hosts.back().ranks = {0};
  out.host_of = {0};
  out.within_host = out.between_hosts = "none (built without MPI)";
  return out;
}

#endif

std::pair<std::string, std::string> transports(const std::string& pml, const std::string& btl) {
  if (!pml.empty() && pml != "ob1") {
    const std::string own = fmt::format("pml {}'s own transports", pml);
    return {own, own};
  }
  // ob1 sends through the byte transfer layers: `btl` lists them (or, with ^, the ones left out).
  const bool excluding = !btl.empty() && btl.front() == '^';
  std::vector<std::string> listed;
  for (const std::string& b : split_words(excluding ? btl.substr(1) : btl)) listed.push_back(b);
  auto allowed = [&](const std::string& name) {
    const bool named = std::find(listed.begin(), listed.end(), name) != listed.end();
    return btl.empty() || (excluding ? !named : named);
  };
  const std::string how = btl.empty() ? "Open MPI's default btl list" : "btl " + btl;
  std::string within = allowed("vader") || allowed("sm")
                           ? "shared memory (vader), by " + how
                           : (allowed("tcp") ? "tcp, by " + how : "none allowed by " + how);
  std::string between = allowed("tcp") ? "tcp, by " + how : "a network btl of " + how;
  return {within, between};
}

}  // namespace concurdl::ranks
