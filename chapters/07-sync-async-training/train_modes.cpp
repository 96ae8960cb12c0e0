// The asynchronous modes of `concurdl train --mode NAME --ranks N` (nn::TrainingMode): each
// runs the command's loop once, on an AsyncTrainer that drives the N worker threads.
#include <fmt/format.h>

#include "concurdl/asgd/async_trainer.hpp"
#include "concurdl/asgd/process_workers.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/harness/commands.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::asgd {

namespace {

AsyncOptions options_of(const std::string& mode, const nn::DistributedOptions& o) {
  const bool ps = kModes.find(mode).parameter_server;
  if (o.backend != "threads" && !(ps && o.backend == "processes"))
    throw UsageError(fmt::format(
        "--mode {}: runs its workers as threads of this process (--backend threads){}; across "
        "MPI processes only --mode sync runs (--backend mpi)",
        mode, ps ? " or as worker processes (--backend processes)" : ""));
  if (o.ranks > kMaxWorkers)
    throw UsageError(fmt::format("--ranks {}: at most {} workers", o.ranks, kMaxWorkers));
  if (o.server_hosts > 0 && (o.backend != "processes" || o.hostfile.empty()))
    throw UsageError(
        "--server-hosts: only with --backend processes and --hostfile (the hosts the shards and "
        "the workers run on)");
  if (o.push_pull && o.server_hosts <= 0)
    throw UsageError(
        "--push-pull: only with --server-hosts (the shards on hosts of their own; ps-ssp's "
        "worker must pull after its wait, not before)");
  AsyncOptions a;
  a.mode = mode;
  a.workers = o.ranks;
  if (o.staleness >= 0) a.staleness = o.staleness;
  if (o.local_steps >= 0) a.local_steps = o.local_steps;
  if (o.server_hosts > 0) {
    const std::size_t hosts = read_hostfile(o.hostfile).size();
    if (static_cast<std::size_t>(o.server_hosts) >= hosts)
      throw UsageError(fmt::format(
          "--server-hosts {}: {} names {} host{}; the workers need at least one of their own",
          o.server_hosts, o.hostfile.string(), hosts, hosts == 1 ? "" : "s"));
  }
  if (o.servers >= 0 && o.servers < o.server_hosts)
    throw UsageError(fmt::format("--servers {}: fewer shards than --server-hosts {}", o.servers,
                                 o.server_hosts));
  if (o.servers >= 0) a.servers = o.servers;
  // --server-hosts N: a shard on each server host at least, unless --servers says otherwise.
  if (o.servers < 0 && o.server_hosts > 0) a.servers = o.server_hosts;
  for (const auto& [rank, factor] : o.stragglers) {
    if (rank >= o.ranks)
      throw UsageError(
          fmt::format("--straggler {}:{}: there are only {} workers", rank, factor, o.ranks));
    a.stragglers[rank] = factor;
  }
  if (o.fail_worker >= o.ranks)
    throw UsageError(
        fmt::format("--fail-worker {}: there are only {} workers", o.fail_worker, o.ranks));
  a.fail_worker = o.fail_worker;
  a.fail_after = o.fail_after;
  return a;
}

// The flags each mode owns: the parameter server's shards and hosts for its two modes, SSP's
// bound, ps-async's push-and-pull, local SGD's steps between averages.
std::vector<std::string> flags_of(const ModeRow& m) {
  std::vector<std::string> out;
  if (m.parameter_server) out = {"--servers", "--server-hosts"};
  if (m.mode == Mode::ps_ssp) out.push_back("--staleness");
  if (m.mode == Mode::ps_async) out.push_back("--push-pull");
  if (m.mode == Mode::local_sgd) out.push_back("--local-steps");
  return out;
}

const bool registered = [] {
  for (const ModeRow& m : kModes) {
    if (m.mode == Mode::sync) continue;  // chapter 05's, registered there
    const std::string name(m.name);
    nn::register_training_mode(
        {.name = name,
         .what = std::string(m.what),
         .flags = flags_of(m),
         .backends = m.parameter_server ? std::vector<std::string>{"threads", "processes"}
                                        : std::vector<std::string>{"threads"},
         .check = [name](const nn::DistributedOptions& o,
                         const nn::TrainConfig&) { (void)options_of(name, o); },
         .run =
             [name](const nn::DistributedOptions& o, const nn::TrainConfig& c,
                    const nn::Dataset& train, const nn::RankLoop& loop) {
               const AsyncOptions a = options_of(name, o);
               if (o.backend == "processes") {
                 ProcessPsTrainer t(c, train, a,
                                    {.data = o.data,
                                     .train_limit = o.train_limit,
                                     .gemm = o.gemm,
                                     .hostfile = o.hostfile,
                                     .server_hosts = o.server_hosts,
                                     .push_pull = o.push_pull});
                 loop(t);
               } else {
                 AsyncTrainer t(c, train, a);
                 loop(t);
               }
             }});
  }
  // The backend name the train command looks up; only the parameter-server modes run on it.
  nn::register_distributed_backend(
      {.name = "processes",
       .what = "workers are processes started by the trainer, on sockets (--mode ps-async, "
               "ps-ssp): a dead worker is dropped",
       .missing = [] { return std::string(); },
       .run =
           [](const nn::DistributedOptions&, const nn::TrainConfig&, const nn::Dataset&,
              const nn::RankLoop&) {
             throw UsageError(
                 "--backend processes: runs the parameter-server modes (--mode ps-async or "
                 "ps-ssp); "
                 "--mode sync across processes is --backend mpi");
           }});
  return true;
}();

// The worker processes of --backend processes are this program started again as
// `concurdl ps-worker`.
const bool registered_worker = register_command(
    {"ps-worker",
     "(internal) one worker process of `concurdl train --mode ps-async --backend processes`",
     &ps_worker_main});
const bool registered_shard = register_command(
    {"ps-shard",
     "(internal) one parameter-server shard of `concurdl train --backend processes "
     "--server-hosts N`",
     &ps_shard_main});

}  // namespace

}  // namespace concurdl::asgd
