// The server side's view of its peers (process_workers.hpp): a worker process and a shard
// process, as process_workers.cpp and ps_hosts.cpp both see them. Private to chapter 07.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "concurdl/asgd/process_workers.hpp"

namespace concurdl::asgd {

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

struct ProcessPsTrainer::Shard {
  int id = 0;
  pid_t pid = -1;             // the remote shell that runs it
  std::string host, address;  // address: where the workers reach it, ADDR:PORT
  int fd = -1;                // the connection it made to the server
  std::size_t offset = 0, count = 0;
};

}  // namespace concurdl::asgd
