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

using Flag = nn::ModeFlag;

// The flags the modes bring to `concurdl train` (flags_of says which mode owns which).
const Flag kStaleness{.name = "--staleness",
                      .help = "--mode ps-ssp: the staleness bound s (default 4)",
                      .min = 0,
                      .max = 1 << 20};
const Flag kLocalSteps{.name = "--local-steps",
                       .help = "--mode local-sgd: steps between averages H (default 8)",
                       .min = 1,
                       .max = 1 << 20};
const Flag kServers{.name = "--servers",
                    .help = "--mode ps-*: parameter-server shards (default 1)",
                    .min = 1,
                    .max = 1024};
const Flag kServerHosts{.name = "--server-hosts",
                        .help =
                            "--mode ps-* with --backend processes --hostfile F: the shards run "
                            "as processes on F's first N hosts, the workers on the others",
                        .min = 1,
                        .max = 1024};
const Flag kPushPull{.name = "--push-pull",
                     .help =
                         "with --server-hosts, --mode ps-async: a push's answer carries the "
                         "shard's parameters, which the worker's next batch is computed on "
                         "(no pull of its own)",
                     .kind = Flag::Kind::toggle};

AsyncOptions options_of(const std::string& mode, const nn::DistributedOptions& o) {
  const bool ps = kModes.find(mode).parameter_server;
  if (o.backend != "threads" && !(ps && o.backend == "processes"))
    throw UsageError(fmt::format(
        "--mode {}: runs its workers as threads of this process (--backend threads){}; across "
        "MPI processes only --mode sync runs (--backend mpi)",
        mode, ps ? " or as worker processes (--backend processes)" : ""));
  if (o.ranks > kMaxWorkers)
    throw UsageError(fmt::format("--ranks {}: at most {} workers", o.ranks, kMaxWorkers));
  const auto server_hosts = static_cast<int>(o.number(kServerHosts.name, 0));
  const auto servers = static_cast<int>(o.number(kServers.name, -1));
  if (server_hosts > 0 && (o.backend != "processes" || o.hostfile.empty()))
    throw UsageError(
        "--server-hosts: only with --backend processes and --hostfile (the hosts the shards and "
        "the workers run on)");
  if (o.toggle(kPushPull.name) && server_hosts <= 0)
    throw UsageError(
        "--push-pull: only with --server-hosts (the shards on hosts of their own; ps-ssp's "
        "worker must pull after its wait, not before)");
  AsyncOptions a;
  a.mode = mode;
  a.workers = o.ranks;
  a.staleness = static_cast<int>(o.number(kStaleness.name, a.staleness));
  a.local_steps = static_cast<int>(o.number(kLocalSteps.name, a.local_steps));
  if (server_hosts > 0) {
    const std::size_t hosts = read_hostfile(o.hostfile).size();
    if (static_cast<std::size_t>(server_hosts) >= hosts)
      throw UsageError(fmt::format(
          "--server-hosts {}: {} names {} host{}; the workers need at least one of their own",
          server_hosts, o.hostfile.string(), hosts, hosts == 1 ? "" : "s"));
  }
  if (servers >= 0 && servers < server_hosts)
    throw UsageError(
        fmt::format("--servers {}: fewer shards than --server-hosts {}", servers, server_hosts));
  if (servers >= 0) a.servers = servers;
  // --server-hosts N: a shard on each server host at least, unless --servers says otherwise.
  if (servers < 0 && server_hosts > 0) a.servers = server_hosts;
  for (const auto& [rank, factor] : o.stragglers)
    if (rank >= o.ranks)
      throw UsageError(
          fmt::format("--straggler {}:{}: there are only {} workers", rank, factor, o.ranks));
  if (o.fail_worker >= o.ranks)
    throw UsageError(
        fmt::format("--fail-worker {}: there are only {} workers", o.fail_worker, o.ranks));
  static_cast<nn::WorkerFaults&>(a) = o;
  return a;
}

// The flags each mode owns: the parameter server's shards and hosts for its two modes, SSP's
// bound, ps-async's push-and-pull, local SGD's steps between averages.
std::vector<nn::ModeFlag> flags_of(const ModeRow& m) {
  std::vector<nn::ModeFlag> out;
  if (m.parameter_server) out = {kServers, kServerHosts};
  if (m.mode == Mode::ps_ssp) out.push_back(kStaleness);
  if (m.mode == Mode::ps_async) out.push_back(kPushPull);
  if (m.mode == Mode::local_sgd) out.push_back(kLocalSteps);
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
                 ProcessPsTrainer t(
                     c, train, a,
                     {.data = o.data,
                      .train_limit = o.train_limit,
                      .gemm = o.gemm,
                      .hostfile = o.hostfile,
                      .server_hosts = static_cast<int>(o.number(kServerHosts.name, 0)),
                      .push_pull = o.toggle(kPushPull.name)});
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
       .reads_hostfile = true,
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
