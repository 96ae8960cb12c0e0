// The parameter server's worker processes (process_workers.hpp): the server side (one thread,
// poll over one socket per worker) and the `concurdl ps-worker` command.
#include "concurdl/asgd/process_workers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "concurdl/core/errors.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::asgd {

namespace {

using Clock = std::chrono::steady_clock;

enum MessageType : std::uint32_t { kHello = 0, kTask = 1, kStop = 2, kResult = 3, kDie = 4 };

struct TaskHeader {
  std::uint32_t type = kTask, pad = 0;
  std::uint64_t batch = 0, version = 0, epoch = 0, seed = 0;
};
struct ResultHeader {
  std::uint32_t type = kResult, pad = 0;
  std::uint64_t batch = 0, version_seen = 0;
  double loss_sum = 0;
  std::uint64_t correct = 0, rows = 0;
};
struct HelloHeader {
  std::uint32_t type = kHello, worker = 0;
  std::uint64_t parameters = 0;
};

// Whole frames or nothing: false when the peer is gone (end of file, reset, broken pipe).
bool send_all(int fd, const void* p, std::size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}
bool recv_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::recv(fd, b, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// --- across hosts ------------------------------------------------------------------------------

// One word for a POSIX shell (a remote shell joins its arguments and a shell parses them).
std::string shell_word(const std::string& w) {
  std::string out = "'";
  for (const char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command that runs a command on a host: CONCURDL_RSH, else the rsh agent Open MPI is told
// to use (scripts/cluster's), else ssh. Words split at spaces.
std::vector<std::string> remote_shell() {
  std::string text = "ssh";
  for (const char* name : {"CONCURDL_RSH", "OMPI_MCA_plm_rsh_agent"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      text = v;
      break;
    }
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// This machine's address as seen from `host`: the source address of its route there.
std::string address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr)
    throw UsageError(fmt::format("--hostfile: cannot resolve host '{}'", host));
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in mine{};
  socklen_t len = sizeof mine;
  const bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len) == 0;
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  char text[INET_ADDRSTRLEN] = {};
  if (!ok || ::inet_ntop(AF_INET, &mine.sin_addr, text, sizeof text) == nullptr)
    throw UsageError(fmt::format("--hostfile: no route from this machine to '{}'", host));
  return text;
}

// A TCP socket listening on every address, on a port the kernel picks (returned in `port`).
int listen_tcp(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 64) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("the server's TCP socket: " + why);
  }
  port = ntohs(a.sin_port);
  return fd;
}

// A connection to ADDR:PORT, tried for up to 30 s (the server listens before it starts us).
int connect_tcp(const std::string& where) {
  const auto colon = where.rfind(':');
  if (colon == std::string::npos) throw UsageError("ps-worker: --connect wants ADDR:PORT");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(where.substr(colon + 1))));
  if (::inet_pton(AF_INET, where.substr(0, colon).c_str(), &a.sin_addr) != 1)
    throw UsageError("ps-worker: --connect: '" + where + "' is not an IPv4 ADDR:PORT");
  const auto until = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      no_delay(fd);
      return fd;
    }
    if (fd >= 0) ::close(fd);
    if (Clock::now() > until)
      throw std::runtime_error("ps-worker: cannot reach the server at " + where);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Starts `args` (argv[0] a path or a name on PATH); with fd3 >= 0, that socket is its fd 3.
// Everything is built before fork: between fork and exec a child of a threaded process may only
// call async-signal-safe functions.
pid_t spawn(std::vector<std::string> args, int fd3) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    if (fd3 >= 0) ::dup2(fd3, 3);  // dup2 clears close-on-exec on the copy
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

std::vector<std::string> read_hostfile(const std::filesystem::path& hostfile) {
  std::ifstream in(hostfile);
  if (!in) throw UsageError(fmt::format("--hostfile: cannot read '{}'", hostfile.string()));
  std::vector<std::string> hosts;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    if (std::string host; words >> host) hosts.push_back(host);
  }
  if (hosts.empty())
    throw UsageError(fmt::format("--hostfile: '{}' names no host", hostfile.string()));
  return hosts;
}

struct ProcessPsTrainer::Worker {
  int id = 0;
  pid_t pid = -1;  // the worker; across hosts, the remote shell that runs it
  bool remote = false;
  std::string host;
  int fd = -1;
  bool alive = false, busy = false;
  std::uint64_t batch = 0;  // the task in flight, when busy
  std::uint64_t clock = 0;  // results this epoch (SSP)
  std::uint64_t steps = 0;  // results in all (for --fail-worker)
  std::string lost_why;
  // This epoch's share.
  double loss_sum = 0;
  std::size_t correct = 0, rows = 0, batches = 0;
};

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

// Across hosts: worker w on host w mod H through the remote shell, connecting back over TCP.
void ProcessPsTrainer::start_remote(const WorkerLaunch& launch) {
  hosts_ = read_hostfile(launch.hostfile);
  const std::vector<std::string> rsh = remote_shell();
  std::uint16_t port = 0;
  const int listener = listen_tcp(port);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{listener};
  for (int w = 0; w < options_.workers; ++w) {
    const std::string& host = hosts_[static_cast<std::size_t>(w) % hosts_.size()];
    std::string command =
        fmt::format("{} ps-worker --connect {}", shell_word(launch.executable),
                    shell_word(fmt::format("{}:{}", address_towards(host), port)));
    for (const std::string& a : worker_args(launch, w)) command += ' ' + shell_word(a);
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
  // Each worker connects once it has loaded the data and says which it is. A remote shell that
  // exits first (no such host, no concurdl there) fails the start, naming the worker and host.
  const auto until = Clock::now() + std::chrono::seconds(120);
  std::size_t connected = 0;
  while (connected < workers_.size()) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 200) < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    for (auto& w : workers_) {
      int status = 0;
      if (w->fd < 0 && w->pid > 0 && ::waitpid(w->pid, &status, WNOHANG) == w->pid) {
        w->pid = -1;
        throw std::runtime_error(fmt::format(
            "worker {} on host {} did not start: `{} {} ...` ended with status {} (see its "
            "message above)",
            w->id, w->host, fmt::join(rsh, " "), w->host,
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
      }
    }
    if (Clock::now() > until)
      throw std::runtime_error(
          fmt::format("{} of {} workers connected in 120 s", connected, workers_.size()));
    if ((p.revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    no_delay(fd);
    const timeval wait{30, 0};  // a hello is one frame: a peer that sends none is not a worker
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    HelloHeader h;
    if (!recv_all(fd, &h, sizeof h) || h.type != kHello || h.worker >= workers_.size() ||
        workers_[h.worker]->fd >= 0) {
      ::close(fd);
      continue;
    }
    const timeval forever{0, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof forever);
    Worker& w = *workers_[h.worker];
    w.fd = fd;
    check_hello(w, h.parameters);
    ++connected;
  }
}

void ProcessPsTrainer::check_hello(const Worker& w, std::uint64_t parameters) const {
  if (parameters != server_->size())
    throw std::runtime_error(fmt::format("worker {} has {} parameters, the server {}", w.id,
                                         parameters, server_->size()));
}

// A start that failed: every worker started so far is ended and reaped.
void ProcessPsTrainer::abandon() {
  for (auto& w : workers_) {
    if (w->fd >= 0) ::close(w->fd);
    w->fd = -1;
    if (w->pid > 0) {
      ::kill(w->pid, SIGKILL);
      ::waitpid(w->pid, nullptr, 0);
    }
    w->pid = -1;
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
  const std::string where =
      hosts_.empty() ? "sockets" : fmt::format("TCP, on hosts {}", fmt::join(hosts_, ", "));
  return fmt::format("mode {}, {} worker process{} ({}), batch {} per push{}", options_.mode,
                     options_.workers, options_.workers == 1 ? "" : "es", where, config_.batch,
                     extra);
}

nn::EpochResult ProcessPsTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t) {
  const float lr = config_.lr_decay != 1.0f ? nn::epoch_lr(config_, state_.epoch) : config_.sgd.lr;
  server_->set_lr(lr);
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
  std::vector<float> buffer(server_->size());
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
      t.version = server_->pull(buffer);
      if (!send_all(w->fd, &t, sizeof t) ||
          !send_all(w->fd, buffer.data(), buffer.size() * sizeof(float))) {
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
    for (auto& w : workers_)
      if (w->alive) {
        fds.push_back({w->fd, POLLIN, 0});
        owners.push_back(w.get());
      }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Worker& w = *owners[i];
      ResultHeader r;
      const bool ok = recv_all(w.fd, &r, sizeof r) && r.type == kResult &&
                      recv_all(w.fd, buffer.data(), buffer.size() * sizeof(float));
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
      staleness_.add(server_->push(buffer, r.version_seen));
      ++applied;
      w.busy = false;
      ++w.clock;
      ++w.steps;
      ++w.batches;
      w.loss_sum += r.loss_sum;
      w.correct += r.correct;
      w.rows += r.rows;
      if (w.id == options_.fail_worker && w.steps >= options_.fail_after) {
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
  std::vector<float> p(server_->size()), v(server_->size());
  server_->read_state(p, v);
  return p;
}

nn::EvalResult ProcessPsTrainer::evaluate(const nn::Dataset& d) {
  const std::vector<float> p = parameters();
  std::copy(p.begin(), p.end(), eval_model_->parameters().begin());
  return eval_model_->evaluate(d.x.data(), d.y.data(), d.n);
}

void ProcessPsTrainer::save(const std::filesystem::path& checkpoint) const {
  save_global(checkpoint, config_, state_,
              [&](std::span<float> p, std::span<float> v) { server_->read_state(p, v); });
}

void ProcessPsTrainer::resume(const std::filesystem::path& checkpoint) {
  state_ = resume_global(checkpoint, config_, options_.mode, options_.workers,
                         [&](std::span<const float> p, std::span<const float> v,
                             const nn::TrainState& st) { server_->write_state(p, v, st.step); });
}

std::map<std::string, double> ProcessPsTrainer::epoch_metrics() const {
  std::map<std::string, double> m;
  staleness_.add_to(m);
  m["workers_lost"] = static_cast<double>(static_cast<int>(workers_.size()) - workers_alive());
  m["batches_requeued"] = static_cast<double>(requeued_);
  if (mode_ == Mode::ps_ssp) m["ssp_max_lead"] = static_cast<double>(ssp_max_lead_);
  const auto [lo, hi] = std::minmax_element(batches_.begin(), batches_.end());
  m["batches_min"] = static_cast<double>(*lo);
  m["batches_max"] = static_cast<double>(*hi);
  return m;
}

// --- the worker process ----------------------------------------------------------------------

int ps_worker_main(const std::vector<std::string>& args) {
  int fd = -1, id = 0;
  std::size_t batch = 64, train_limit = 0;
  std::string arch, gemm = "openblas", data, connect;
  double straggler = 1.0;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& k = args[i];
    const std::string& v = args[i + 1];
    if (k == "--fd")
      fd = std::stoi(v);
    else if (k == "--connect")
      connect = v;
    else if (k == "--worker")
      id = std::stoi(v);
    else if (k == "--arch")
      arch = v;
    else if (k == "--batch")
      batch = std::stoul(v);
    else if (k == "--gemm")
      gemm = v;
    else if (k == "--data")
      data = v;
    else if (k == "--train-limit")
      train_limit = std::stoul(v);
    else if (k == "--straggler")
      straggler = std::stod(v);
    else
      throw UsageError("ps-worker: unknown option " + k);
  }
  if ((fd < 0) == connect.empty() || arch.empty() || batch == 0 || id < 0)
    throw UsageError("ps-worker: started by `concurdl train --backend processes`, not by hand");
  kernels::set_compute_threads(1);
  nn::MlpSpec spec = nn::MlpSpec::parse(arch);
  kernels::GemmVersion g{};
  if (!kernels::parse_gemm_version(gemm, g)) throw UsageError("ps-worker: unknown --gemm " + gemm);
  const data::FashionMnist fm = data::load_fashion_mnist(
      data.empty() ? data::fashion_mnist_dir() : std::filesystem::path(data));
  const nn::Dataset train = nn::to_dataset(fm.train, train_limit);
  nn::Mlp model(spec, 1, g);  // the server sends the parameters with every task
  if (!connect.empty()) fd = connect_tcp(connect);  // once the data is loaded: then it says hello
  HelloHeader hello;
  hello.worker = static_cast<std::uint32_t>(id);
  hello.parameters = model.parameters().size();
  if (!send_all(fd, &hello, sizeof hello)) return 1;

  std::vector<std::uint32_t> order;
  std::uint64_t order_epoch = std::numeric_limits<std::uint64_t>::max(), order_seed = 0;
  std::vector<float> x(batch * train.dim);
  std::vector<std::uint8_t> y(batch);
  const std::span<float> params = model.parameters();
  for (;;) {
    TaskHeader t;
    if (!recv_all(fd, &t, sizeof t)) return 0;  // the server is gone: nothing left to do
    if (t.type == kStop) return 0;
    if (t.type == kDie) ::raise(SIGKILL);  // --fail-worker across hosts: a real death
    if (t.type != kTask || !recv_all(fd, params.data(), params.size_bytes())) return 1;
    const auto t0 = Clock::now();
    if (t.epoch != order_epoch || t.seed != order_seed) {
      nn::epoch_permutation(train.n, t.seed, t.epoch, order);
      order_epoch = t.epoch;
      order_seed = t.seed;
    }
    const std::size_t first = t.batch * batch;
    if (first >= train.n) return 1;
    const std::size_t rows = std::min(batch, train.n - first);
    for (std::size_t i = 0; i < rows; ++i) {
      std::memcpy(x.data() + i * train.dim, train.row(order[first + i]), train.dim * sizeof(float));
      y[i] = train.y[order[first + i]];
    }
    std::size_t correct = 0;
    const float loss = model.forward_backward(x.data(), y.data(), rows, &correct);
    nn::straggle(straggler, std::chrono::duration<double>(Clock::now() - t0).count());
    ResultHeader r;
    r.batch = t.batch;
    r.version_seen = t.version;
    r.loss_sum = static_cast<double>(loss) * static_cast<double>(rows);
    r.correct = correct;
    r.rows = rows;
    const auto grads = model.gradients();
    if (!send_all(fd, &r, sizeof r) || !send_all(fd, grads.data(), grads.size_bytes())) return 0;
  }
}

}  // namespace concurdl::asgd
