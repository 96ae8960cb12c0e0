// The parameter server across hosts (process_workers.hpp): its worker processes and its shard
// processes (--server-hosts) started through a remote shell, each connecting back over TCP; and
// the parameters when they live in the shard processes.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <tuple>

#include "concurdl/asgd/process_workers.hpp"
#include "concurdl/core/errors.hpp"
#include "ps_peers.hpp"
#include "worker_links.hpp"

namespace concurdl::asgd {

using namespace links;

namespace {

// Waits until every one of `peers` (started through the remote shell `rsh`) has connected to
// `listener` and said a hello of `type`; `take` checks it. A remote shell that exits first (no
// such host, no concurdl there) fails the start, naming the peer and its host; `between` runs
// every 200 ms (it throws when something the start needs has gone).
template <class Peer, class Take, class Between>
void await_hellos(int listener, std::uint32_t type, std::vector<std::unique_ptr<Peer>>& peers,
                  const char* what, const std::vector<std::string>& rsh, Take take,
                  Between between) {
  const auto until = Clock::now() + std::chrono::seconds(120);
  std::size_t connected = 0;
  while (connected < peers.size()) {
    between();
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 200) < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    for (auto& w : peers) {
      int status = 0;
      if (w->fd < 0 && w->pid > 0 && ::waitpid(w->pid, &status, WNOHANG) == w->pid) {
        w->pid = -1;
        throw std::runtime_error(
            fmt::format("{} {} on host {} did not start: `{} {} ...` ended with status {} (see its "
                        "message above)",
                        what, w->id, w->host, fmt::join(rsh, " "), w->host,
                        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
      }
    }
    if (Clock::now() > until)
      throw std::runtime_error(
          fmt::format("{} of {} {}s connected in 120 s", connected, peers.size(), what));
    if ((p.revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    no_delay(fd);
    const timeval wait{30, 0};  // a hello is one frame: a peer that sends none is not ours
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    HelloHeader h;
    if (!recv_all(fd, &h, sizeof h) || h.type != type || h.worker >= peers.size() ||
        peers[h.worker]->fd >= 0) {
      ::close(fd);
      continue;
    }
    const timeval forever{0, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof forever);
    Peer& w = *peers[h.worker];
    w.fd = fd;
    take(w, h);
    ++connected;
  }
}

}  // namespace

// Across hosts: the shard processes first (--server-hosts), then worker w on host w mod H (of
// the hosts left to the workers), each started through the remote shell and connecting back
// over TCP.
void ProcessPsTrainer::start_remote(const WorkerLaunch& launch) {
  hosts_ = read_hostfile(launch.hostfile);
  if (static_cast<std::size_t>(server_hosts_) >= hosts_.size())
    throw UsageError(fmt::format(
        "--server-hosts {}: {} names {} host{}; the workers need at least one of their own",
        server_hosts_, launch.hostfile.string(), hosts_.size(), hosts_.size() == 1 ? "" : "s"));
  const std::vector<std::string> rsh = remote_shell();
  std::uint16_t port = 0;
  const int listener = listen_tcp(port);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{listener};
  const auto server_at = [&](const std::string& host) {
    return shell_word(fmt::format("{}:{}", address_towards(host), port));
  };
  const std::string shard_list =
      server_hosts_ > 0 ? start_shards(launch, rsh, listener, server_at) : "";
  const std::size_t first = static_cast<std::size_t>(server_hosts_);
  for (int w = 0; w < options_.workers; ++w) {
    const std::string& host = hosts_[first + static_cast<std::size_t>(w) % (hosts_.size() - first)];
    std::string command =
        fmt::format("{} ps-worker --connect {}", shell_word(launch.executable), server_at(host));
    for (const std::string& a : worker_args(launch, w)) command += ' ' + shell_word(a);
    if (!shard_list.empty()) command += " --shards " + shell_word(shard_list);
    if (push_pull_) command += " --push-pull 1";
    std::vector<std::string> args = rsh;
    args.push_back(host);
    args.push_back(command);
    auto worker = std::make_unique<Worker>();
    worker->id = w;
    worker->remote = true;
    worker->host = host;
    worker->pid = spawn(std::move(args), -1);
    worker->alive = true;
    workers_.push_back(std::move(worker));
  }
  // Each worker connects once it has loaded the data (and joined every shard) and says which it
  // is.
  await_hellos(
      listener, kHello, workers_, "worker", rsh,
      [&](Worker& w, const HelloHeader& h) { check_hello(w, h.parameters); },
      [&] { check_shards(); });  // a shard lost now would fail its workers' start
}

// Shard s on host s mod N; each says on which port it serves the workers, and is given its
// part of the initial parameters. Returns their addresses, ADDR:PORT,... in shard order.
std::string ProcessPsTrainer::start_shards(
    const WorkerLaunch& launch, const std::vector<std::string>& rsh, int listener,
    const std::function<std::string(const std::string&)>& server_at) {
  for (int s = 0; s < options_.servers; ++s) {
    auto shard = std::make_unique<Shard>();
    shard->id = s;
    shard->host = hosts_[static_cast<std::size_t>(s % server_hosts_)];
    std::tie(shard->offset, shard->count) =
        ParameterServer::shard_range(parameters_, options_.servers, s);
    const std::string command = fmt::format(
        "{} ps-shard --connect {} --shard {} --offset {} --count {} --lr {} --momentum {} "
        "--weight-decay {}",
        shell_word(launch.executable), server_at(shard->host), s, shard->offset, shard->count,
        config_.sgd.lr, config_.sgd.momentum, config_.sgd.weight_decay);
    std::vector<std::string> args = rsh;
    args.push_back(shard->host);
    args.push_back(command);
    shard->pid = spawn(std::move(args), -1);
    shards_.push_back(std::move(shard));
  }
  std::vector<std::string> where;
  await_hellos(
      listener, kShardHello, shards_, "parameter-server shard", rsh,
      [&](Shard& s, const HelloHeader& h) {
        s.address = fmt::format("{}:{}", ipv4_of(s.host), h.parameters);
      },
      [&] { check_shards(); });
  for (const auto& s : shards_) where.push_back(s->address);
  const std::vector<float> zero(parameters_);
  write_state(eval_model_->parameters(), zero, 0);
  return fmt::format("{}", fmt::join(where, ","));
}

// --- the parameters, here or in the shard processes ------------------------------------------

void ProcessPsTrainer::check_shards() const {
  for (const auto& s : shards_) {
    pollfd p{s->fd, POLLIN, 0};
    if (s->fd >= 0 && ::poll(&p, 1, 0) > 0 && p.revents != 0) shard_lost(*s);
  }
}

void ProcessPsTrainer::shard_lost(const Shard& s) const {
  throw std::runtime_error(fmt::format(
      "parameter-server shard {} (on host {}) is gone: it held the only copy of parameters "
      "[{}, {}), so the run cannot go on",
      s.id, s.host, s.offset, s.offset + s.count));
}

void ProcessPsTrainer::set_lr(float lr) {
  if (server_) return server_->set_lr(lr);
  for (const auto& s : shards_) {
    ShardFrame f, reply;
    f.type = kSetLr;
    f.real = lr;
    if (!ask(s->fd, f, reply)) shard_lost(*s);
  }
}

void ProcessPsTrainer::read_state(std::span<float> params, std::span<float> velocity) const {
  if (server_) return server_->read_state(params, velocity);
  for (const auto& s : shards_) {
    ShardFrame f, reply;
    f.type = kReadState;
    if (!ask(s->fd, f, reply) ||
        !recv_all(s->fd, params.data() + s->offset, s->count * sizeof(float)) ||
        !recv_all(s->fd, velocity.data() + s->offset, s->count * sizeof(float)))
      shard_lost(*s);
  }
}

void ProcessPsTrainer::write_state(std::span<const float> params, std::span<const float> velocity,
                                   std::uint64_t version) {
  if (server_) return server_->write_state(params, velocity, version);
  for (const auto& s : shards_) {
    ShardFrame f, reply;
    f.type = kWriteState;
    f.value = version;
    if (!send_all(s->fd, &f, sizeof f) ||
        !send_all(s->fd, params.data() + s->offset, s->count * sizeof(float)) ||
        !send_all(s->fd, velocity.data() + s->offset, s->count * sizeof(float)) ||
        !recv_all(s->fd, &reply, sizeof reply) || reply.type != kReply)
      shard_lost(*s);
  }
}

}  // namespace concurdl::asgd
