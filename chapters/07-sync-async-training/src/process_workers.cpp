// The parameter server's worker processes (process_workers.hpp): the server side (one thread,
// poll over one socket per worker and shard). Starting them on other hosts, and the parameters
// in shard processes, are ps_hosts.cpp; the worker is ps_worker.cpp, a shard process
// ps_shard.cpp, the links worker_links.cpp.
#include "concurdl/asgd/process_workers.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <stdexcept>

#include "concurdl/core/errors.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/random.hpp"
#include "ps_peers.hpp"
#include "worker_links.hpp"

namespace concurdl::asgd {

using namespace links;

ProcessPsTrainer::ProcessPsTrainer(nn::TrainConfig config, const nn::Dataset& train,
                                   AsyncOptions options, WorkerLaunch launch)
    : config_(std::move(config)), train_(train), options_(std::move(options)) {
  const ModeRow* row = kModes.lookup(options_.mode);
  if (row == nullptr || !row->parameter_server)
    throw UsageError(fmt::format(
        "--backend processes: runs the parameter-server modes (ps-async, ps-ssp), not {}",
        options_.mode));
  mode_ = row->mode;
  if (options_.workers < 1 || options_.workers > kMaxWorkers)
    throw std::invalid_argument(
        fmt::format("ProcessPsTrainer: workers must be in 1..{}", kMaxWorkers));
  eval_model_ = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm);
  parameters_ = eval_model_->parameters().size();
  server_hosts_ = launch.server_hosts;
  push_pull_ = launch.push_pull && server_hosts_ > 0;
  if (launch.push_pull && (server_hosts_ == 0 || mode_ != Mode::ps_async))
    throw UsageError("--push-pull: only with --mode ps-async and --server-hosts");
  if (server_hosts_ > 0 && launch.hostfile.empty())
    throw UsageError("--server-hosts: only with --hostfile (the hosts the shards run on)");
  if (server_hosts_ > 0 && options_.servers < server_hosts_)
    throw UsageError(fmt::format("--servers {}: fewer shards than --server-hosts {}",
                                 options_.servers, server_hosts_));
  if (server_hosts_ == 0)
    server_ =
        std::make_unique<ParameterServer>(eval_model_->parameters(), config_.sgd, options_.servers);
  if (launch.executable.empty())
    launch.executable = std::filesystem::read_symlink("/proc/self/exe");
  state_.seed = config_.seed;
  state_.mode = options_.mode;
  state_.workers = static_cast<std::uint64_t>(options_.workers);
  batches_.assign(static_cast<std::size_t>(options_.workers), 0);

  try {
    if (launch.hostfile.empty())
      start_local(launch);
    else
      start_remote(launch);
  } catch (...) {
    abandon();
    throw;
  }
}

// A worker's arguments after `ps-worker --fd 3` or `--connect ADDR:PORT`.
std::vector<std::string> ProcessPsTrainer::worker_args(const WorkerLaunch& launch, int w) const {
  return {"--worker",      std::to_string(w),
          "--arch",        config_.spec.describe(),
          "--batch",       std::to_string(config_.batch),
          "--gemm",        launch.gemm,
          "--data",        launch.data.string(),
          "--train-limit", std::to_string(launch.train_limit),
          "--straggler",   fmt::format("{}", options_.straggler(w))};
}

// On this machine: a socket pair each, the worker's end as its fd 3.
void ProcessPsTrainer::start_local(const WorkerLaunch& launch) {
  for (int w = 0; w < options_.workers; ++w) {
    std::vector<std::string> args = {launch.executable.string(), "ps-worker", "--fd", "3"};
    for (std::string& a : worker_args(launch, w)) args.push_back(std::move(a));
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw std::runtime_error(fmt::format("socketpair: {}", std::strerror(errno)));
    pid_t pid = -1;
    try {
      pid = spawn(std::move(args), sv[1]);
    } catch (...) {
      ::close(sv[0]);
      ::close(sv[1]);
      throw;
    }
    ::close(sv[1]);
    auto worker = std::make_unique<Worker>();
    worker->id = w;
    worker->pid = pid;
    worker->fd = sv[0];
    worker->alive = true;
    workers_.push_back(std::move(worker));
  }
  // Every worker says hello once it has loaded the data: its parameter count must be ours.
  for (auto& w : workers_) {
    HelloHeader h;
    if (!recv_all(w->fd, &h, sizeof h) || h.type != kHello)
      throw std::runtime_error(
          fmt::format("worker {} (pid {}) did not start (see its message above)", w->id, w->pid));
    check_hello(*w, h.parameters);
  }
}

void ProcessPsTrainer::check_hello(const Worker& w, std::uint64_t parameters) const {
  if (parameters != parameters_)
    throw std::runtime_error(
        fmt::format("worker {} has {} parameters, the server {}", w.id, parameters, parameters_));
}

// A start that failed: every worker and shard started so far is ended and reaped.
void ProcessPsTrainer::abandon() {
  const auto end = [](auto& peer) {
    if (peer.fd >= 0) ::close(peer.fd);
    peer.fd = -1;
    if (peer.pid > 0) {
      ::kill(peer.pid, SIGKILL);
      ::waitpid(peer.pid, nullptr, 0);
    }
    peer.pid = -1;
  };
  for (auto& s : shards_) end(*s);
  for (auto& w : workers_) {
    end(*w);
    w->alive = false;
  }
}

ProcessPsTrainer::~ProcessPsTrainer() {
  for (auto& w : workers_) {
    if (w->alive) {
      const TaskHeader stop{kStop};
      send_all(w->fd, &stop, sizeof stop);
    }
    if (w->fd >= 0) ::close(w->fd);
    if (w->pid > 0) ::waitpid(w->pid, nullptr, 0);
  }
  // The shards once the workers are gone: they exit on their stop or on the server's end of
  // file.
  for (auto& s : shards_) {
    if (s->fd >= 0) {
      const ShardFrame stop{kShardStop};
      send_all(s->fd, &stop, sizeof stop);
      ::close(s->fd);
    }
    if (s->pid > 0) ::waitpid(s->pid, nullptr, 0);
  }
}

void ProcessPsTrainer::drop(Worker& w, const std::string& why) {
  if (!w.alive) return;
  w.alive = false;
  w.lost_why = why;
  ::close(w.fd);
  w.fd = -1;
  // Across hosts the child is the remote shell: the worker ends when its connection does, and
  // the shell is not waited for, in case the host is what broke.
  if (w.remote) ::kill(w.pid, SIGKILL);
  int status = 0;
  ::waitpid(w.pid, &status, 0);
  w.pid = -1;
}

int ProcessPsTrainer::workers_alive() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return w->alive; }));
}

std::string ProcessPsTrainer::describe() const {
  std::string extra;
  if (mode_ == Mode::ps_ssp) extra = fmt::format(", staleness bound {}", options_.staleness);
  for (const auto& [w, f] : options_.stragglers)
    extra += fmt::format(", worker {} {}x slower", w, f);
  const auto first = hosts_.begin() + server_hosts_;
  const std::string where =
      hosts_.empty() ? "sockets"
                     : fmt::format("TCP, on host{} {}", hosts_.end() - first == 1 ? "" : "s",
                                   fmt::join(first, hosts_.end(), ", "));
  if (!shards_.empty())
    extra += fmt::format(", {} shard process{} on host{} {}{}", shards_.size(),
                         shards_.size() == 1 ? "" : "es", server_hosts_ == 1 ? "" : "s",
                         fmt::join(hosts_.begin(), first, ", "), push_pull_ ? ", push-pull" : "");
  else if (options_.servers > 1)
    extra += fmt::format(", {} server shards", options_.servers);
  return fmt::format("mode {}, {} worker process{} ({}), batch {} per push{}", options_.mode,
                     options_.workers, options_.workers == 1 ? "" : "es", where, config_.batch,
                     extra);
}

nn::EpochResult ProcessPsTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t) {
  const float lr = config_.lr_decay != 1.0f ? nn::epoch_lr(config_, state_.epoch) : config_.sgd.lr;
  set_lr(lr);
  staleness_.reset();
  const std::size_t steps = (train_.n + config_.batch - 1) / config_.batch;
  std::deque<std::uint64_t> todo;
  for (std::size_t b = 0; b < steps; ++b) todo.push_back(b);
  for (auto& w : workers_) {
    w->clock = 0;
    w->loss_sum = 0;
    w->correct = w->rows = w->batches = 0;
  }
  const bool ssp = mode_ == Mode::ps_ssp;
  std::vector<float> buffer(parameters_);
  std::size_t applied = 0;
  const auto start = Clock::now();

  // Hands the next batch to every idle worker that may take one.
  const auto dispatch = [&] {
    std::uint64_t slowest = std::numeric_limits<std::uint64_t>::max();
    for (const auto& w : workers_)
      if (w->alive) slowest = std::min(slowest, w->clock);
    for (auto& w : workers_) {
      if (!w->alive || w->busy || todo.empty()) continue;
      if (ssp && w->clock > slowest + static_cast<std::uint64_t>(options_.staleness)) continue;
      ssp_max_lead_ = std::max(ssp_max_lead_, w->clock - std::min(w->clock, slowest));
      TaskHeader t;
      t.batch = todo.front();
      t.epoch = state_.epoch;
      t.seed = state_.seed;
      if (server_)
        t.version = server_->pull(buffer);
      else
        t.type = kTaskFromShards;  // the worker pulls from the shards itself
      if (!send_all(w->fd, &t, sizeof t) ||
          (server_ && !send_all(w->fd, buffer.data(), buffer.size() * sizeof(float)))) {
        drop(*w, "its socket closed (the process died)");
        continue;
      }
      todo.pop_front();
      w->busy = true;
      w->batch = t.batch;
    }
  };

  std::vector<pollfd> fds;
  std::vector<Worker*> owners;
  while (applied < steps) {
    dispatch();
    if (workers_alive() == 0)
      throw std::runtime_error("every worker process was lost; the last: " +
                               workers_.back()->lost_why);
    fds.clear();
    owners.clear();
    for (auto& s : shards_) fds.push_back({s->fd, POLLIN, 0});  // a shard speaks only if asked
    for (auto& w : workers_)
      if (w->alive) {
        fds.push_back({w->fd, POLLIN, 0});
        owners.push_back(w.get());
      }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    for (std::size_t i = 0; i < shards_.size(); ++i)
      if (fds[i].revents != 0) shard_lost(*shards_[i]);  // its end of file: it died
    for (std::size_t i = shards_.size(); i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Worker& w = *owners[i - shards_.size()];
      ResultHeader r;
      const bool ok = recv_all(w.fd, &r, sizeof r) && r.type == kResult &&
                      (!server_ || recv_all(w.fd, buffer.data(), buffer.size() * sizeof(float)));
      if (!ok || r.batch != w.batch) {
        // The process is gone (or broke the protocol): its batch goes back to the head of the
        // queue for another worker.
        if (w.busy) {
          todo.push_front(w.batch);
          ++requeued_;
        }
        w.busy = false;
        drop(w, ok ? "it answered another batch than it was given" : "its process died");
        continue;
      }
      staleness_.add(server_ ? server_->push(buffer, r.version_seen) : r.staleness);
      ++applied;
      w.busy = false;
      ++w.clock;
      ++w.steps;
      ++w.batches;
      w.loss_sum += r.loss_sum;
      w.correct += r.correct;
      w.rows += r.rows;
      if (options_.fails(w.id, w.steps)) {
        // --fail-worker: a real SIGKILL of a real process; the server learns of it as it would
        // of any crash, from its socket, on the next poll. On another host the server cannot
        // signal it: it tells the worker to SIGKILL itself.
        if (w.remote) {
          const TaskHeader die{kDie};
          send_all(w.fd, &die, sizeof die);
        } else {
          ::kill(w.pid, SIGKILL);
        }
      }
    }
  }

  nn::EpochResult res;
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  double loss = 0;
  std::size_t correct = 0;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = *workers_[i];
    loss += w.loss_sum;
    correct += w.correct;
    res.samples += w.rows;
    batches_[i] = w.batches;
  }
  if (res.samples > 0) {
    res.loss = loss / static_cast<double>(res.samples);
    res.accuracy = static_cast<double>(correct) / static_cast<double>(res.samples);
  }
  state_.step += steps;
  ++state_.epoch;
  report_epoch(on_progress, state_, steps, res);
  return res;
}

std::vector<float> ProcessPsTrainer::parameters() const {
  std::vector<float> p(parameters_), v(parameters_);
  read_state(p, v);
  return p;
}

nn::EvalResult ProcessPsTrainer::evaluate(const nn::Dataset& d) {
  const std::vector<float> p = parameters();
  std::copy(p.begin(), p.end(), eval_model_->parameters().begin());
  return eval_model_->evaluate(d.x.data(), d.y.data(), d.n);
}

void ProcessPsTrainer::save(const std::filesystem::path& checkpoint) const {
  save_global(checkpoint, config_, state_,
              [&](std::span<float> p, std::span<float> v) { read_state(p, v); });
}

void ProcessPsTrainer::resume(const std::filesystem::path& checkpoint) {
  state_ = resume_global(checkpoint, config_, options_.mode, options_.workers,
                         [&](std::span<const float> p, std::span<const float> v,
                             const nn::TrainState& st) { write_state(p, v, st.step); });
}

std::map<std::string, double> ProcessPsTrainer::epoch_metrics() const {
  std::map<std::string, double> m;
  staleness_.add_to(m);
  m["workers_lost"] = static_cast<double>(static_cast<int>(workers_.size()) - workers_alive());
  m["batches_requeued"] = static_cast<double>(requeued_);
  if (mode_ == Mode::ps_ssp) m["ssp_max_lead"] = static_cast<double>(ssp_max_lead_);
  if (!shards_.empty()) m["shard_processes"] = static_cast<double>(shards_.size());
  const auto [lo, hi] = std::minmax_element(batches_.begin(), batches_.end());
  m["batches_min"] = static_cast<double>(*lo);
  m["batches_max"] = static_cast<double>(*hi);
  return m;
}

}  // namespace concurdl::asgd
