// `concurdl train`'s flags about several workers (train_args.hpp): --ranks, --backend, --mode,
// --straggler, --fail-worker and the flags that belong to one backend or mode.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "concurdl/core/errors.hpp"
#include "train_args.hpp"

namespace concurdl::nn {

namespace fs = std::filesystem;

namespace {

// How many of `total` MPI ranks share this machine, as the launcher says (Open MPI, MPICH's
// Hydra, Slurm); before the launch, or under a launcher that does not say, all of them.
int ranks_on_this_machine(int total) {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(var); v != nullptr && std::atoi(v) >= 1)
      return std::min(total, std::atoi(v));
  return total;
}

// "RANK:VALUE" of --straggler and --fail-worker: a rank below kMaxThreads and a number.
std::pair<int, double> rank_and_value(const char* flag, const std::string& text, bool whole) {
  const std::size_t colon = text.find(':');
  int rank = -1;
  double value = 0;
  bool ok = colon != std::string::npos && colon > 0;
  if (ok) {
    const char* end = text.data() + colon;
    const auto [stop, ec] = std::from_chars(text.data(), end, rank);
    ok = ec == std::errc{} && stop == end && rank >= 0 && rank < kMaxThreads;
  }
  if (ok) {
    const std::string v = text.substr(colon + 1);
    char* stop = nullptr;
    value = std::strtod(v.c_str(), &stop);
    ok = !v.empty() && stop == v.c_str() + v.size() && std::isfinite(value) &&
         (whole ? value >= 0 && value == std::floor(value) && value <= 1e15
                : value >= 1 && value <= 1000);
  }
  if (!ok)
    throw UsageError(fmt::format("{}: '{}' is not RANK:{} ({})", flag, text,
                                 whole ? "STEP" : "FACTOR",
                                 whole ? "a rank and a step count, e.g. 1:100"
                                       : "a rank and a factor in [1, 1000], e.g. 1:4"));
  return {rank, value};
}

}  // namespace

TrainWorkers resolve_workers(TrainArgs& a, const std::function<bool(const char*)>& given) {
  const DistributedBackend* backend = nullptr;
  DistributedOptions dist;
  // Mixed precision: one trainer, or data-parallel ranks summing 16-bit gradients in one ring
  // after backward (DataParallelTrainer).
  if (a.precision != "fp32") {
    for (const char* flag : {"--pipeline", "--zero", "--bucket-mb", "--overlap", "--allreduce"})
      if (given(flag))
        throw UsageError(fmt::format(
            "{}: not with --precision {} (16-bit training runs as one trainer, or as --ranks N "
            "summing its 16-bit gradients in one ring after backward)",
            flag, a.precision));
    if (given("--mode") && a.mode != "sync")
      throw UsageError(
          fmt::format("--mode {}: not with --precision {} (only sync)", a.mode, a.precision));
  }
  // --dp D --tp T --pp P is the mode "3d" on D x T x P ranks.
  const bool three_d = given("--dp") || given("--tp") || given("--pp");
  if (three_d) {
    for (const char* flag : {"--ranks", "--mode", "--pipeline", "--recompute", "--chunks"})
      if (given(flag))
        throw UsageError(fmt::format(
            "{}: not with --dp/--tp/--pp (the grid's ranks, its pipelines and their schedule "
            "come from --dp, --tp, --pp, --micro-batches and --schedule)",
            flag));
    a.dp = std::max(a.dp, 1);
    a.tp = std::max(a.tp, 1);
    a.pp = std::max(a.pp, 1);
    a.ranks = static_cast<std::size_t>(a.dp * a.tp * a.pp);
    a.mode = "3d";
  }
  // --pipeline P is the mode "pipeline" on P stage ranks.
  if (three_d) {
  } else if (a.pipeline > 0) {
    for (const char* flag : {"--ranks", "--mode"})
      if (given(flag))
        throw UsageError(fmt::format(
            "{}: not with --pipeline (--pipeline P runs P stages; data-parallel ranks and "
            "modes do not combine with it)",
            flag));
    a.ranks = a.pipeline;
    a.mode = "pipeline";
  } else {
    for (const char* flag : {"--micro-batches", "--schedule", "--recompute", "--chunks"})
      if (given(flag))
        throw UsageError(fmt::format(
            "{}: only with --pipeline P{}", flag,
            std::string_view(flag) == "--micro-batches" || std::string_view(flag) == "--schedule"
                ? " or --dp/--tp/--pp"
                : ""));
  }
  // --mode alone means one worker of that mode.
  if (a.ranks == 0 && given("--mode") && a.mode != "sync") a.ranks = 1;
  const TrainingMode* mode = nullptr;
  if (a.mode != "sync") {
    mode = find_training_mode(a.mode);
    if (mode == nullptr)
      throw UsageError(fmt::format("--mode: unknown mode '{}' (known: {})", a.mode,
                                   fmt::join(training_mode_names(), ", ")));
  }
  if (a.ranks == 0) {
    for (const char* flag : {"--backend", "--bucket-mb", "--overlap", "--allreduce", "--hostfile",
                             "--straggler", "--fail-worker", "--mode", "--zero"})
      if (given(flag)) throw UsageError(fmt::format("{}: only with --ranks N", flag));
  }
  // A flag that belongs to other modes than the one asked for (each mode's row lists its own).
  std::map<std::string, std::vector<std::string>> owners;  // flag -> the modes that take it
  for (const std::string& name : training_mode_names())
    if (const TrainingMode* m = find_training_mode(name))
      for (const std::string& flag : m->flags) owners[flag].push_back(name);
  for (const auto& [flag, modes] : owners)
    if (given(flag.c_str()) && (mode == nullptr || std::find(mode->flags.begin(), mode->flags.end(),
                                                             flag) == mode->flags.end()))
      throw UsageError(
          fmt::format("{}: only with --mode {}", flag, fmt::join(modes, " or --mode ")));
  if (mode != nullptr)
    for (const char* flag : {"--bucket-mb", "--overlap", "--allreduce", "--zero"})
      if (given(flag))
        throw UsageError(fmt::format("{}: only with --mode sync (the all-reduce's)", flag));
  if (given("--zero"))
    for (const char* flag : {"--bucket-mb", "--allreduce"})
      if (given(flag))
        throw UsageError(fmt::format(
            "{}: not with --zero (ZeRO reduce-scatters and all-gathers each layer on the ring)",
            flag));
  for (const std::string& s : a.stragglers) {
    const auto [rank, factor] = rank_and_value("--straggler", s, false);
    if (static_cast<std::size_t>(rank) >= a.ranks)
      throw UsageError(fmt::format("--straggler {}: there are only {} ranks", s, a.ranks));
    dist.stragglers[rank] = factor;
  }
  if (!a.fail_worker.empty()) {
    const auto [rank, step] = rank_and_value("--fail-worker", a.fail_worker, true);
    if (static_cast<std::size_t>(rank) >= a.ranks)
      throw UsageError(
          fmt::format("--fail-worker {}: there are only {} ranks", a.fail_worker, a.ranks));
    dist.fail_worker = rank;
    dist.fail_after = static_cast<std::uint64_t>(step);
  }
  dist.mode = a.mode;
  dist.micro_batches = a.micro_batches;
  dist.schedule = a.schedule;
  dist.recompute = a.recompute;
  dist.chunks = a.chunks;
  dist.dp = std::max(a.dp, 1);
  dist.tp = std::max(a.tp, 1);
  dist.pp = std::max(a.pp, 1);
  dist.staleness = a.staleness;
  dist.local_steps = a.local_steps;
  dist.servers = a.servers;
  dist.server_hosts = a.server_hosts;
  dist.push_pull = a.push_pull;
  if (a.ranks != 0) {
    if (a.backend.empty()) a.backend = "threads";
    backend = find_distributed_backend(a.backend);
    if (backend == nullptr) {
      const std::vector<std::string> names = distributed_backend_names();
      throw UsageError(
          names.empty()
              ? fmt::format("--backend {}: this concurdl has no data-parallel trainer (chapter "
                            "05 was not built)",
                            a.backend)
              : fmt::format("--backend: unknown backend '{}' (known: {})", a.backend,
                            fmt::join(names, ", ")));
    }
    if (const std::string why = backend->missing ? backend->missing() : ""; !why.empty())
      throw UsageError(why);
    if (mode != nullptr && std::find(mode->backends.begin(), mode->backends.end(), a.backend) ==
                               mode->backends.end()) {
      std::vector<std::string> on;  // the modes that run on this backend
      for (const std::string& name : training_mode_names())
        if (const TrainingMode* m = find_training_mode(name);
            m && std::find(m->backends.begin(), m->backends.end(), a.backend) != m->backends.end())
          on.push_back(name);
      throw UsageError(
          fmt::format("--mode {}: runs its workers on --backend {}; --backend {} runs {}", a.mode,
                      fmt::join(mode->backends, " or "), a.backend,
                      on.empty() ? std::string("only --mode sync")
                                 : fmt::format("--mode {}", fmt::join(on, ", "))));
    }
    if (!a.hostfile.empty() && !backend->mpi_launch && a.backend != "processes")
      throw UsageError(
          "--hostfile: only with --backend mpi, or processes (the parameter server's workers)");
    if (!a.hostfile.empty() && !fs::is_regular_file(a.hostfile))
      throw UsageError(fmt::format("--hostfile: '{}' is not a readable file", a.hostfile));
    if (a.backend == "processes") dist.hostfile = a.hostfile;
    dist.ranks = static_cast<int>(a.ranks);
    dist.backend = a.backend;
    dist.bucket_mb = a.bucket_mb;
    dist.overlap = a.overlap;
    dist.zero = a.zero;
    dist.allreduce = a.allreduce.empty() ? "native" : a.allreduce;
    // One compute thread per thread rank (the setting is process-wide); an MPI rank gets its
    // share of this machine's cores (shared among the ranks on this machine, not all of them)
    // unless --threads says otherwise.
    if (!backend->mpi_launch)
      a.threads = 1;
    else if (!a.threads_given)
      a.threads = std::max(1, static_cast<int>(hardware_threads()) /
                                  ranks_on_this_machine(static_cast<int>(a.ranks)));
  }
  return {backend, mode, dist};
}

}  // namespace concurdl::nn
