// The `concurdl ps-shard` command (process_workers.hpp): one shard of the parameter server as a
// process of its own (--server-hosts), on a host of the hostfile. It holds its range of the
// parameters and their momentum (a one-shard ParameterServer), serves the workers' pulls and
// pushes on a TCP port of its own, and the server's orders (learning rate, state) on the
// connection it made to the server.
//
// One thread, poll over every connection: each request is served whole before the next, so a
// push is applied to this shard all at once or, when its worker dies halfway through sending it,
// not at all.
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "concurdl/asgd/parameter_server.hpp"
#include "concurdl/asgd/process_workers.hpp"
#include "concurdl/core/errors.hpp"
#include "worker_links.hpp"

namespace concurdl::asgd {

using namespace links;

namespace {

// One request of a worker: false when the worker is gone or broke the protocol.
bool serve_worker(int fd, ParameterServer& shard, std::vector<float>& buffer,
                  std::uint64_t offset) {
  ShardFrame f;
  if (!recv_all(fd, &f, sizeof f)) return false;
  ShardFrame reply;
  reply.type = kReply;
  switch (f.type) {
    case kJoin:
      reply.offset = offset;
      reply.count = shard.size();
      return send_all(fd, &reply, sizeof reply);
    case kPull:
      reply.value = shard.pull(buffer);
      return send_all(fd, &reply, sizeof reply) &&
             send_all(fd, buffer.data(), buffer.size() * sizeof(float));
    case kPush:
      // Applied only once the whole gradient is here.
      if (!recv_all(fd, buffer.data(), buffer.size() * sizeof(float))) return false;
      reply.value = shard.push(buffer, f.value);
      return send_all(fd, &reply, sizeof reply);
    case kPushPull:
      if (!recv_all(fd, buffer.data(), buffer.size() * sizeof(float))) return false;
      reply.value = shard.push(buffer, f.value);
      reply.version = shard.pull(buffer);
      return send_all(fd, &reply, sizeof reply) &&
             send_all(fd, buffer.data(), buffer.size() * sizeof(float));
    default:
      return false;
  }
}

// One order of the server: false when the server is gone or says stop.
bool serve_server(int fd, ParameterServer& shard) {
  ShardFrame f;
  if (!recv_all(fd, &f, sizeof f) || f.type == kShardStop) return false;
  ShardFrame reply;
  reply.type = kReply;
  std::vector<float> p(shard.size()), v(shard.size());
  const std::size_t bytes = p.size() * sizeof(float);
  switch (f.type) {
    case kSetLr:
      shard.set_lr(static_cast<float>(f.real));
      return send_all(fd, &reply, sizeof reply);
    case kReadState:
      shard.read_state(p, v);
      reply.value = shard.version();
      return send_all(fd, &reply, sizeof reply) && send_all(fd, p.data(), bytes) &&
             send_all(fd, v.data(), bytes);
    case kWriteState:
      if (!recv_all(fd, p.data(), bytes) || !recv_all(fd, v.data(), bytes)) return false;
      shard.write_state(p, v, f.value);
      return send_all(fd, &reply, sizeof reply);
    default:
      return false;
  }
}

}  // namespace

int ps_shard_main(const std::vector<std::string>& args) {
  int id = -1;
  std::uint64_t offset = 0, count = 0;
  std::string connect;
  nn::SgdOptions sgd;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& k = args[i];
    const std::string& v = args[i + 1];
    if (k == "--connect")
      connect = v;
    else if (k == "--shard")
      id = std::stoi(v);
    else if (k == "--offset")
      offset = std::stoull(v);
    else if (k == "--count")
      count = std::stoull(v);
    else if (k == "--lr")
      sgd.lr = std::stof(v);
    else if (k == "--momentum")
      sgd.momentum = std::stof(v);
    else if (k == "--weight-decay")
      sgd.weight_decay = std::stof(v);
    else
      throw UsageError("ps-shard: unknown option " + k);
  }
  if (connect.empty() || id < 0 || count == 0)
    throw UsageError(
        "ps-shard: started by `concurdl train --backend processes --server-hosts N`, not by hand");
  // The server writes the initial state before any worker is started.
  ParameterServer shard(std::vector<float>(count), sgd, 1);
  std::vector<float> buffer(count);
  std::uint16_t port = 0;
  const int listener = listen_tcp(port);
  const int server = connect_tcp(connect, "ps-shard: the server");
  HelloHeader hello;
  hello.type = kShardHello;
  hello.worker = static_cast<std::uint32_t>(id);
  hello.parameters = port;
  if (!send_all(server, &hello, sizeof hello)) return 1;

  std::vector<int> workers;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({server, POLLIN, 0});
    fds.push_back({listener, POLLIN, 0});
    for (const int w : workers) fds.push_back({w, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "ps-shard %d: poll: %s\n", id, std::strerror(errno));
      return 1;
    }
    if (fds[0].revents != 0 && !serve_server(server, shard)) break;  // stop, or the server is gone
    std::vector<int> kept;
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0 || serve_worker(fds[i].fd, shard, buffer, offset))
        kept.push_back(fds[i].fd);
      else
        ::close(fds[i].fd);  // a worker gone (it finished, died, or was killed)
    }
    if ((fds[1].revents & POLLIN) != 0) {
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        no_delay(fd);
        kept.push_back(fd);
      }
    }
    workers = std::move(kept);
  }
  for (const int w : workers) ::close(w);
  ::close(listener);
  ::close(server);
  return 0;
}

}  // namespace concurdl::asgd
