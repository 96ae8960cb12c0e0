// RankTeam: a team of rank threads (the threads backend, threads_backend.hpp) kept alive between
// jobs, each rank waiting for the next one; a job runs on every rank and run() returns when all
// have finished it. The threads start once, so a timed job measures the collective, not thread
// creation. A rank that throws kills the team: that call and every later one rethrow it.
//
//   RankTeam team(4);
//   team.run([&](Communicator& comm) { allreduce_ring(comm, in[comm.rank()], out[...]); });
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "concurdl/dp/communicator.hpp"
#include "concurdl/dp/threads_backend.hpp"

namespace concurdl::dp {

// run_threads on a thread of its own; each rank serves jobs until the team is destroyed.
class RankTeam {
 public:
  using Job = std::function<void(Communicator&)>;

  explicit RankTeam(int ranks) : ranks_(ranks) {
    host_ = std::jthread([this] {
      try {
        run_threads(ranks_, [this](Communicator& comm) { serve(comm); });
      } catch (...) {
        std::lock_guard lock(m_);
        if (!error_) error_ = std::current_exception();
        dead_ = true;
        cv_.notify_all();
      }
    });
  }
  ~RankTeam() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
  }
  RankTeam(const RankTeam&) = delete;
  RankTeam& operator=(const RankTeam&) = delete;

  int ranks() const { return ranks_; }

  // Runs job on every rank; returns when all have finished it. If a rank threw, the team is
  // dead: this and every later call throw that rank's exception.
  void run(Job job) {
    std::unique_lock lock(m_);
    if (dead_) std::rethrow_exception(error_);
    job_ = std::move(job);
    finished_ = 0;
    ++generation_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return finished_ == ranks_ || dead_; });
    if (dead_) std::rethrow_exception(error_);
  }

 private:
  void serve(Communicator& comm) {
    std::uint64_t seen = 0;
    for (;;) {
      Job job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return generation_ != seen || stop_ || dead_; });
        if (stop_ || dead_) return;
        seen = generation_;
        job = job_;
      }
      try {
        job(comm);
      } catch (...) {
        // Wake the ranks idle between jobs, so that they return and run_threads can end.
        std::lock_guard lock(m_);
        if (!error_) error_ = std::current_exception();
        dead_ = true;
        cv_.notify_all();
        throw;
      }
      std::lock_guard lock(m_);
      if (++finished_ == ranks_) cv_.notify_all();
    }
  }

  const int ranks_;
  std::mutex m_;
  std::condition_variable cv_;
  Job job_;
  std::uint64_t generation_ = 0;
  int finished_ = 0;
  bool stop_ = false, dead_ = false;
  std::exception_ptr error_;
  std::jthread host_;  // last: joined first, while the members above still exist
};

}  // namespace concurdl::dp
