// `concurdl train`'s flags about several workers (train_args.hpp): --ranks, --backend, --mode,
// --straggler, --fail-worker, and the flags each training mode's row brings with its rules
// (which flags choose it, which it refuses, how many ranks it asks for).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

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

// The modes' own flags as given, for the modes to read (DistributedOptions::values).
std::map<std::string, std::string, std::less<>> mode_values(const TrainArgs& a,
                                                            const Given& given) {
  std::map<std::string, std::string, std::less<>> out;
  for (const ModeFlag& f : training_mode_flags())
    if (given(f.name.c_str()))
      out[f.name] = f.kind == ModeFlag::Kind::toggle ? "1" : a.mode_values.at(f.name);
  return out;
}

// The first of `flags` given, or nullptr.
const std::string* first_given(const std::vector<std::string>& flags, const Given& given) {
  for (const std::string& f : flags)
    if (given(f.c_str())) return &f;
  return nullptr;
}

// The mode the command line chose: by its own flags (--pipeline P), by --mode NAME, or none
// (sync). Each mode's refusals are checked here.
const TrainingMode* choose_mode(TrainArgs& a, const Given& given,
                                const std::map<std::string, std::string, std::less<>>& values) {
  std::vector<const TrainingMode*> chosen;  // by their own flags
  for (const std::string& name : training_mode_names())
    if (const TrainingMode* m = find_training_mode(name); m && first_given(m->chosen_by, given))
      chosen.push_back(m);
  // A mode whose given choosers another chosen mode all owns gives way to it (--ep 2 --dp 2).
  const auto gives_way = [&](const TrainingMode* m) {
    return std::any_of(chosen.begin(), chosen.end(), [&](const TrainingMode* other) {
      return other != m &&
             std::all_of(m->chosen_by.begin(), m->chosen_by.end(),
                         [&](const std::string& f) { return !given(f.c_str()) || other->owns(f); });
    });
  };
  if (chosen.size() > 1) {
    std::vector<const TrainingMode*> kept;
    for (const TrainingMode* m : chosen)
      if (!gives_way(m)) kept.push_back(m);
    if (!kept.empty()) chosen = kept;
  }
  for (const TrainingMode* m : chosen)
    if (const std::string* flag = first_given(m->refuses, given))
      throw UsageError(fmt::format("{}: not with {} {}", *flag, m->how_chosen(), m->refusal));
  if (chosen.size() > 1)
    throw UsageError(
        fmt::format("{}: not with {}", chosen[1]->how_chosen(), chosen[0]->how_chosen()));
  const TrainingMode* mode = nullptr;
  if (!chosen.empty()) {
    mode = chosen[0];
    DistributedOptions probe;
    probe.values = values;
    a.ranks = static_cast<std::size_t>(mode->ranks(probe));
    a.mode = mode->name;
  } else if (a.mode != "sync") {
    mode = find_training_mode(a.mode);
    if (mode != nullptr && !mode->chosen_by.empty())
      throw UsageError(
          fmt::format("--mode {}: {} chooses it, not --mode", a.mode, mode->chosen_as));
    if (mode == nullptr) {
      std::vector<std::string> names;
      for (const std::string& n : training_mode_names())
        if (const TrainingMode* m = find_training_mode(n); m == nullptr || m->chosen_by.empty())
          names.push_back(n);
      throw UsageError(
          fmt::format("--mode: unknown mode '{}' (known: {})", a.mode, fmt::join(names, ", ")));
    }
    for (const std::string& flag : mode->refuses)
      if (given(flag.c_str()))
        throw UsageError(fmt::format("{}: not with --mode {} {}", flag, a.mode, mode->refusal));
    if (a.ranks == 0) a.ranks = 1;  // --mode alone means one worker of that mode
  }
  // 16-bit training runs as one trainer, or as sync ranks.
  if (mode != nullptr && a.precision != "fp32") {
    const std::string* flag = first_given(mode->chosen_by, given);
    throw UsageError(
        flag ? fmt::format("{}: not with --precision {} (16-bit training runs as one trainer, or "
                           "as --ranks N summing its 16-bit gradients with the 16-bit ring)",
                           *flag, a.precision)
             : fmt::format("--mode {}: not with --precision {} (only sync)", a.mode, a.precision));
  }
  // A flag that belongs to other modes than the one chosen.
  for (const ModeFlag& f : training_mode_flags()) {
    if (!given(f.name.c_str()) || (mode != nullptr && mode->owns(f.name))) continue;
    std::vector<std::string> how;
    for (const std::string& name : training_mode_names())
      if (const TrainingMode* m = find_training_mode(name); m && m->owns(f.name))
        how.push_back(m->how_chosen());
    throw UsageError(fmt::format("{}: only with {}", f.name, fmt::join(how, " or ")));
  }
  return mode;
}

// The flags that do not go together, as rules: when a rule applies, the first of its flags
// given is refused with its message.
struct FlagRule {
  bool applies;
  std::vector<const char*> flags;
  std::function<std::string(const char* flag)> refusal;
};

void apply_rules(const std::vector<FlagRule>& rules, const Given& given) {
  for (const FlagRule& r : rules)
    if (r.applies)
      for (const char* flag : r.flags)
        if (given(flag)) throw UsageError(r.refusal(flag));
}

// --straggler RANK:FACTOR and --fail-worker RANK:STEP, each rank below the run's.
void read_faults(const TrainArgs& a, DistributedOptions& dist) {
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
}

// With ranks: the backend (threads by default), checked against the mode's and the hostfile,
// and the options it takes; a.threads as its ranks need.
const DistributedBackend* choose_backend(TrainArgs& a, const TrainingMode* mode,
                                         DistributedOptions& dist) {
  const DistributedBackend* backend = nullptr;
  if (a.backend.empty()) a.backend = "threads";
  backend = find_distributed_backend(a.backend);
  if (backend == nullptr) {
    const std::vector<std::string> names = distributed_backend_names();
    throw UsageError(
        names.empty() ? fmt::format("--backend {}: this concurdl has no data-parallel trainer (no "
                                    "chapter registered one)",
                                    a.backend)
                      : fmt::format("--backend: unknown backend '{}' (known: {})", a.backend,
                                    fmt::join(names, ", ")));
  }
  if (const std::string why = backend->missing ? backend->missing() : ""; !why.empty())
    throw UsageError(why);
  if (mode != nullptr &&
      std::find(mode->backends.begin(), mode->backends.end(), a.backend) == mode->backends.end()) {
    std::vector<std::string> on;  // how to choose the modes that run on this backend
    for (const std::string& name : training_mode_names())
      if (const TrainingMode* m = find_training_mode(name);
          m && std::find(m->backends.begin(), m->backends.end(), a.backend) != m->backends.end())
        on.push_back(m->how_chosen());
    throw UsageError(fmt::format(
        "{}: runs its workers on --backend {}; --backend {} runs {}", mode->how_chosen(),
        fmt::join(mode->backends, " or "), a.backend,
        on.empty() ? std::string("only --mode sync") : fmt::format("{}", fmt::join(on, ", "))));
  }
  if (!a.hostfile.empty() && !backend->mpi_launch && !backend->reads_hostfile) {
    std::vector<std::string> takers;  // the backends whose processes run on its hosts
    for (const std::string& name : distributed_backend_names())
      if (const DistributedBackend* b = find_distributed_backend(name);
          b->mpi_launch || b->reads_hostfile)
        takers.push_back(name);
    throw UsageError(
        fmt::format("--hostfile: only with --backend {} (backends whose ranks are processes)",
                    fmt::join(takers, " or ")));
  }
  if (!a.hostfile.empty() && !fs::is_regular_file(a.hostfile))
    throw UsageError(fmt::format("--hostfile: '{}' is not a readable file", a.hostfile));
  if (backend->reads_hostfile) dist.hostfile = a.hostfile;
  dist.ranks = static_cast<int>(a.ranks);
  dist.backend = a.backend;
  dist.bucket_mb = a.bucket_mb;
  dist.overlap = a.overlap;
  dist.zero = a.zero;
  dist.shard_update = a.shard_update;
  // The sharded update runs between the float32 ring's halves: the v4_ring all-reduce's.
  dist.allreduce = a.allreduce.empty()
                       ? (a.shard_update && a.precision == "fp32" ? "v4_ring" : "native")
                       : a.allreduce;
  // One compute thread per thread rank (the setting is process-wide); an MPI rank gets its
  // share of this machine's cores (shared among the ranks on this machine, not all of them)
  // unless --threads says otherwise.
  if (!backend->mpi_launch)
    a.threads = 1;
  else if (!a.threads_given)
    a.threads = std::max(
        1, static_cast<int>(hardware_threads()) / ranks_on_this_machine(static_cast<int>(a.ranks)));
  return backend;
}

}  // namespace

TrainWorkers resolve_workers(TrainArgs& a, const Given& given) {
  DistributedOptions dist;
  dist.values = mode_values(a, given);
  // Mixed precision: one trainer, or data-parallel ranks summing 16-bit gradients with the
  // 16-bit ring, after backward or bucket by bucket with --overlap (DataParallelTrainer).
  apply_rules({{a.precision != "fp32",
                {"--zero", "--allreduce"},
                [&](const char* flag) {
                  return fmt::format(
                      "{}: not with --precision {} (16-bit training runs as one trainer, or as "
                      "--ranks N summing its 16-bit gradients with the 16-bit ring)",
                      flag, a.precision);
                }}},
              given);
  if (a.precision != "fp32" && given("--bucket-mb") && !given("--overlap"))
    throw UsageError(fmt::format(
        "--bucket-mb: with --precision {} only with --overlap (after backward the 16-bit ring "
        "sums the whole buffer at once)",
        a.precision));
  const TrainingMode* mode = choose_mode(a, given, dist.values);
  apply_rules(
      {{a.ranks == 0,
        {"--backend", "--bucket-mb", "--overlap", "--allreduce", "--hostfile", "--straggler",
         "--fail-worker", "--mode", "--zero", "--shard-update"},
        [](const char* flag) { return fmt::format("{}: only with --ranks N", flag); }},
       {mode != nullptr,
        {"--bucket-mb", "--overlap", "--allreduce", "--zero", "--shard-update"},
        [](const char* flag) {
          return fmt::format("{}: only with --mode sync (the all-reduce's)", flag);
        }},
       {given("--zero"),
        {"--bucket-mb", "--allreduce", "--shard-update"},
        [](const char* flag) {
          return fmt::format(
              "{}: not with --zero (ZeRO reduce-scatters and all-gathers each layer on the ring)",
              flag);
        }},
       {given("--shard-update"),
        {"--overlap", "--bucket-mb"},
        [](const char* flag) {
          return fmt::format(
              "{}: not with --shard-update (the sharded update runs after backward, between "
              "the ring's reduce-scatter and all-gather of the whole buffer)",
              flag);
        }}},
      given);
  if (a.shard_update && a.precision == "fp32" && !a.allreduce.empty() && a.allreduce != "v4_ring")
    throw UsageError(fmt::format(
        "--allreduce {}: not with --shard-update (it runs between the v4_ring all-reduce's "
        "halves)",
        a.allreduce));
  read_faults(a, dist);
  dist.mode = a.mode;
  const DistributedBackend* backend = a.ranks != 0 ? choose_backend(a, mode, dist) : nullptr;
  return {backend, mode, dist};
}

}  // namespace concurdl::nn
