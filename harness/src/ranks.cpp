// Ranks (ranks.hpp): the mpirun launcher, the world and per-configuration communicators, the
// collectives the runner needs to keep ranks in step, the max-over-ranks timer, and the
// calibration experiment calibrate/rank_pingpong (α and β between two ranks).
#include "concurdl/harness/ranks.hpp"

#include <fmt/format.h>
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

#include "concurdl/build_info.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/errors.hpp"
#include "concurdl/harness/records.hpp"

#ifdef CONCURDL_WITH_MPI
#include "concurdl/harness/ranks_mpi.hpp"
#endif

namespace concurdl::ranks {

namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
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

#endif

namespace {

class MaxOverRanks final : public Timer {
 public:
  explicit MaxOverRanks(std::shared_ptr<Timer> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return fmt::format("max_over_ranks({})", inner_->name()); }
  double time(const std::function<void()>& run) override {
#ifdef CONCURDL_WITH_MPI
    // Start together, so that the slowest rank's time is the configuration's time.
    if (g_comm != MPI_COMM_NULL) CDL_MPI_CHECK(MPI_Barrier(g_comm));
#endif
    // A rank whose run throws contributes infinity, so every rank fails this repetition
    // together and they stay in step; the thrower rethrows its own error.
    std::exception_ptr failed;
    double t = 0;
    try {
      t = inner_->time(run);
    } catch (...) {
      failed = std::current_exception();
      t = std::numeric_limits<double>::infinity();
    }
    t = max_over(t);
    if (failed) std::rethrow_exception(failed);
    return t;
  }

 private:
  std::shared_ptr<Timer> inner_;
};

}  // namespace

std::shared_ptr<Timer> max_over_ranks(std::shared_ptr<Timer> inner) {
  return std::make_shared<MaxOverRanks>(std::move(inner));
}

#ifdef CONCURDL_WITH_MPI
namespace {

// calibrate/rank_pingpong: rank 0 sends n bytes to rank 1, which sends them back, `round_trips`
// times per run. One way takes about alpha + beta * n: alpha from the smallest messages, beta
// from the slope over the sizes (calibration_from_records). The echo is checked byte for byte.
Trial pingpong_trial(const Params& p, GroupCache&) {
  const auto bytes = static_cast<std::size_t>(param_int(p, "bytes"));
  // Enough round trips that a run lasts about a millisecond or more, at most 1000.
  const int round_trips =
      static_cast<int>(std::clamp<std::size_t>((std::size_t{4} << 20) / (bytes + 1024), 4, 1000));
  auto send = std::make_shared<std::vector<unsigned char>>(bytes);
  auto recv = std::make_shared<std::vector<unsigned char>>(bytes);
  for (std::size_t i = 0; i < bytes; ++i) (*send)[i] = static_cast<unsigned char>(i * 131 + 7);
  Trial t;
  t.reset = [recv] { std::fill(recv->begin(), recv->end(), 0); };
  t.run = [=] {
    MPI_Comm c = comm();
    const int me = comm_rank();
    const int n = static_cast<int>(bytes);
    for (int i = 0; i < round_trips; ++i) {
      if (me == 0) {
        CDL_MPI_CHECK(MPI_Send(send->data(), n, MPI_BYTE, 1, 0, c));
        CDL_MPI_CHECK(MPI_Recv(recv->data(), n, MPI_BYTE, 1, 0, c, MPI_STATUS_IGNORE));
      } else if (me == 1) {
        CDL_MPI_CHECK(MPI_Recv(recv->data(), n, MPI_BYTE, 0, 0, c, MPI_STATUS_IGNORE));
        CDL_MPI_CHECK(MPI_Send(recv->data(), n, MPI_BYTE, 0, 0, c));
      }
    }
  };
  t.check = [=]() -> std::string {
    if (comm_rank() > 1) return "";
    for (std::size_t i = 0; i < bytes; ++i)
      if ((*recv)[i] != (*send)[i])
        return fmt::format("byte {} of {} came back as {}, sent {}", i, bytes, (*recv)[i],
                           (*send)[i]);
    return "";
  };
  t.work.items = 2.0 * round_trips;  // messages, one way each
  t.work.bytes = 2.0 * round_trips * static_cast<double>(bytes);
  return t;
}

const bool registered = register_experiment({
    .id = "calibrate/rank_pingpong",
    .chapter = kCalibrationChapter,
    .title = "Ping-pong between two MPI ranks: one-way time vs message size (alpha and beta)",
    // Ranks 0 and 1 ping-pong (any others wait); a message's size is an MPI int.
    .axes = {{"ranks", {"2"}, {}, AxisKind::count, kMaxThreads},
             {"bytes",
              {"8", "1K", "16K", "256K", "1M", "4M", "16M"},
              {"8", "16K", "1M", "4M"},
              AxisKind::size,
              std::int64_t{1} << 30}},
    .derive =
        [](const Params&, const Work& w, Record& r) {
          const double one_way = r.stats.median / w.items;
          r.derived["one_way_s"] = one_way;
          r.derived["one_way_bytes_per_s"] = w.bytes / w.items / one_way;
        },
    .scaling_axis = "ranks",
    .mpi = true,
    .interleave = {},
    .prepare = pingpong_trial,
    .figures = {{.id = "one_way",
                 .title = "One-way message time between two ranks, with the alpha-beta model",
                 .kind = FigureKind::lines,
                 .x = "bytes",
                 .y = "one_way_s",
                 .series = "ranks",
                 .log_x = true,
                 .log_y = true,
                 .y_label = "one-way time (s, log)",
                 .x_label = "message size (bytes, log)",
                 .models = {{.label = "alpha + beta * bytes",
                             .series = "",
                             .y = [](const ModelPoint& m) -> std::optional<double> {
                               if (!m.calibration || m.calibration->rank_alpha_s <= 0)
                                 return std::nullopt;
                               return m.calibration->rank_alpha_s +
                                      m.calibration->rank_beta_s_per_byte * m.x;
                             }}}}},
    .derived = {"one_way_s", "one_way_bytes_per_s"},
});

}  // namespace
#endif

}  // namespace concurdl::ranks
