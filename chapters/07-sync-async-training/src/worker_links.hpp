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
bool send_all(int fd, const void* p, std::size_t n);
bool recv_all(int fd, void* p, std::size_t n);

// One word for a POSIX shell (a remote shell joins its arguments and a shell parses them).
std::string shell_word(const std::string& w);
// The command that runs a command on a host: CONCURDL_RSH, else the rsh agent Open MPI is told
// to use (scripts/cluster's), else ssh. Words split at spaces.
std::vector<std::string> remote_shell();
void no_delay(int fd);
// This machine's address as seen from `host`: the source address of its route there.
std::string address_towards(const std::string& host);
// A TCP socket listening on every address, on a port the kernel picks (returned in `port`).
int listen_tcp(std::uint16_t& port);
// A connection to ADDR:PORT, tried for up to 30 s (the server listens before it starts us).
int connect_tcp(const std::string& where);
// Starts `args` (argv[0] a path or a name on PATH); with fd3 >= 0, that socket is its fd 3.
pid_t spawn(std::vector<std::string> args, int fd3);

}  // namespace concurdl::asgd::links
