// The parameter server's worker processes, the parts both ends share (process_workers.hpp): the
// frames of the protocol on a stream socket, and the means of starting a worker on another host
// and reaching the server from it. Private to chapter 07's sources.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace concurdl::asgd::links {

using Clock = std::chrono::steady_clock;

enum MessageType : std::uint32_t {
  kHello = 0,
  kTask = 1,  // the parameters follow
  kStop = 2,
  kResult = 3,
  kDie = 4,
  kTaskFromShards = 5,  // --server-hosts: the worker pulls the parameters from the shards
  kShardHello = 6,      // a shard process to the server: HelloHeader{worker: shard, parameters:
                        // the port it serves the workers on}
};

// The frames of a shard process (--server-hosts), to and from the server and the workers: one
// header whose fields mean what its type says; every request is answered by a kReply frame.
enum ShardMessage : std::uint32_t {
  kPull = 10,        // worker: -> kReply{value: version} + the shard's parameters
  kPush = 11,        // worker: {value: version seen} + gradient -> kReply{value: staleness}
  kSetLr = 12,       // server: {real: lr} -> kReply
  kReadState = 13,   // server: -> kReply{value: version} + parameters + momentum
  kWriteState = 14,  // server: {value: version} + parameters + momentum -> kReply
  kJoin = 15,        // worker, once on connecting: {from: worker} -> kReply{offset, count}
  kReply = 16,
  kShardStop = 17,  // server: the shard process exits
  kPushPull = 18,   // worker (--push-pull): a push whose answer is also the next pull:
                    // {value: version seen} + gradient -> kReply{value: staleness, version} +
                    // the shard's parameters after it
};
struct ShardFrame {
  std::uint32_t type = 0, from = 0;
  std::uint64_t value = 0, offset = 0, count = 0;
  double real = 0;
  std::uint64_t version = 0;  // kPushPull's answer: the version its parameters are at
};

struct TaskHeader {
  std::uint32_t type = kTask, pad = 0;
  std::uint64_t batch = 0, version = 0, epoch = 0, seed = 0;
};
struct ResultHeader {
  std::uint32_t type = kResult, pad = 0;
  std::uint64_t batch = 0, version_seen = 0;
  double loss_sum = 0;
  std::uint64_t correct = 0, rows = 0;
  std::uint64_t staleness = 0;  // after kTaskFromShards: the largest any shard returned
};
struct HelloHeader {
  std::uint32_t type = kHello, worker = 0;
  std::uint64_t parameters = 0;
};

// Whole frames or nothing: false when the peer is gone (end of file, reset, broken pipe).
bool send_all(int fd, const void* p, std::size_t n);
bool recv_all(int fd, void* p, std::size_t n);

// One word for a POSIX shell (a remote shell joins its arguments and a shell parses them).
std::string shell_word(const std::string& w);
// The command that runs a command on a host: CONCURDL_RSH, else the rsh agent Open MPI is told
// to use (scripts/cluster's), else ssh. Words split at spaces.
std::vector<std::string> remote_shell();
void no_delay(int fd);
// A host's IPv4 address as text (a name is resolved); UsageError when it has none.
std::string ipv4_of(const std::string& host);
// This machine's address as seen from `host`: the source address of its route there.
std::string address_towards(const std::string& host);
// A TCP socket listening on every address, on a port the kernel picks (returned in `port`).
int listen_tcp(std::uint16_t& port);
// A connection to ADDR:PORT (`who`: which peer, for the error), tried for up to 30 s; refused, at
// once (a peer listens before it is named to another, so a refusal means it is gone).
int connect_tcp(const std::string& where, const char* who);
// A request and its kReply frame (false when the peer is gone or answers otherwise).
bool ask(int fd, const ShardFrame& request, ShardFrame& reply);
// Starts `args` (argv[0] a path or a name on PATH); with fd3 >= 0, that socket is its fd 3.
pid_t spawn(std::vector<std::string> args, int fd3);

}  // namespace concurdl::asgd::links
