// Ping-pong: how long it takes one thread (or process) to wake another and get an answer back.
// Two parties pass a counter back and forth; each hop adds one. The round-trip time is the
// latency floor of every hand-off in this suite: a task given to a pool, a batch handed from a
// data loader, a gradient bucket passed to a communication thread.
//
//   ping ──hop──▶ pong        condition_variable: mutex + futex sleep and wake-up per hop
//   ping ◀──hop── pong        atomic wait/notify: a futex on the counter itself, no mutex
//                             spinning atomic: no sleep at all, while both have a core
//                             pipe (threads / processes): a system call and a copy per hop
//
// Run: concurdl run ch01/ping_pong        Tests: ch01_tests --gtest_filter='Proc*'
//
// Each function makes one untimed warm-up round trip first (it includes starting the partner),
// then times `round_trips` round trips; the counter ends at 2 x (round_trips + 1) hops.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "concurdl/core/clock.hpp"
#include "concurdl/core/hardware.hpp"
#include "concurdl/threads/processes.hpp"

namespace concurdl::threads {

struct PingPongResult {
  std::int64_t counter = 0;      // hops made, warm-up included; 2 x (round_trips + 1) when right
  double seconds = 0;            // for the timed round trips only
  std::int64_t out_of_turn = 0;  // wake-ups that found the counter at another value than their
                                 // turn's: a side that ran without waiting for the other; 0
};

inline std::int64_t expected_hops(std::int64_t round_trips) { return 2 * (round_trips + 1); }

using PingPongFn = PingPongResult (*)(std::int64_t round_trips);

namespace detail {

using Clock = std::chrono::steady_clock;
inline void check_round_trips(std::int64_t round_trips) {
  // The atomic variants count in 32 bits (see below).
  if (round_trips < 1 || round_trips > (1 << 29))
    throw std::invalid_argument("ping_pong: round_trips must be in [1, 2^29]");
}

// While SIGPIPE is blocked, writing to a pipe whose reader died fails with EPIPE instead of
// killing this whole process; a SIGPIPE raised meanwhile is consumed before unblocking.
class BlockSigpipe {
 public:
  BlockSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    was_pending_ = pending();
  }
  ~BlockSigpipe() {
    if (!was_pending_ && pending()) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  BlockSigpipe(const BlockSigpipe&) = delete;
  BlockSigpipe& operator=(const BlockSigpipe&) = delete;

 private:
  bool pending() const {
    sigset_t s;
    sigpending(&s);
    return sigismember(&s, SIGPIPE) == 1;
  }
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

}  // namespace detail

// v1: std::condition_variable. Each hop: lock, change the counter, unlock, notify; the other side
// wakes in cv.wait, which must re-take the mutex before it can look. Two futex calls or more.
inline PingPongResult ping_pong_condvar(std::int64_t round_trips) {
  detail::check_round_trips(round_trips);
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t counter = 0;           // guarded by mu; even: ping's turn, odd: pong's turn
  std::int64_t pong_out_of_turn = 0;  // pong's own; read after the join
  std::jthread pong([&] {
    for (std::int64_t i = 0; i <= round_trips; ++i) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return counter % 2 == 1; });
      pong_out_of_turn += counter != 2 * i + 1;
      ++counter;
      lock.unlock();  // notify after unlocking, so the woken side does not block on mu at once
      cv.notify_one();
    }
  });
  std::int64_t out_of_turn = 0;
  detail::Clock::time_point start;
  for (std::int64_t i = 0; i <= round_trips; ++i) {
    if (i == 1) start = detail::Clock::now();
    {
      std::lock_guard lock(mu);
      ++counter;
    }
    cv.notify_one();
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return counter % 2 == 0; });
    out_of_turn += counter != 2 * i + 2;
  }
  const double seconds = seconds_since(start);
  pong.join();
  return {counter, seconds, out_of_turn + pong_out_of_turn};
}

namespace detail {
// std::atomic<int>: 4 bytes is the size a Linux futex works on, so libstdc++'s wait/notify on
// it is one futex call each; on other sizes it goes through a shared table of proxy futexes.
using HopCounter = std::atomic<int>;

// Block until the counter reaches `want`: C++20 wait() sleeps in the kernel while the value is
// unchanged (after a short spin inside the library), notify_one() wakes it.
inline void await_sleeping(const HopCounter& c, int want) {
  for (int now = c.load(std::memory_order_acquire); now < want;
       now = c.load(std::memory_order_acquire))
    c.wait(now, std::memory_order_acquire);
}

// Spin on the counter, but boundedly: after kSpinLimit pauses, yield the core on every check,
// so a partner that has no core of its own (oversubscribed or loaded machine) gets one.
inline constexpr int kSpinLimit = 1 << 12;
inline void await_spinning(const HopCounter& c, int want) {
  for (int spins = 0; c.load(std::memory_order_acquire) < want; ++spins) {
    if (spins < kSpinLimit)
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

template <bool kSleep>
PingPongResult ping_pong_atomic(std::int64_t round_trips) {
  check_round_trips(round_trips);
  HopCounter counter{0};
  const int last = static_cast<int>(round_trips);
  auto await = [&counter](int want) {
    if constexpr (kSleep)
      await_sleeping(counter, want);
    else
      await_spinning(counter, want);
  };
  auto hop = [&counter] {
    counter.fetch_add(1, std::memory_order_acq_rel);  // a read-modify-write: no hop can be lost
    if constexpr (kSleep) counter.notify_one();
  };
  std::int64_t pong_out_of_turn = 0;  // pong's own; read after the join
  std::jthread pong([&] {
    for (int i = 0; i <= last; ++i) {
      await(2 * i + 1);
      pong_out_of_turn += counter.load(std::memory_order_relaxed) != 2 * i + 1;
      hop();
    }
  });
  std::int64_t out_of_turn = 0;
  Clock::time_point start;
  for (int i = 0; i <= last; ++i) {
    if (i == 1) start = Clock::now();
    hop();
    await(2 * i + 2);
    out_of_turn += counter.load(std::memory_order_relaxed) != 2 * i + 2;
  }
  const double seconds = seconds_since(start);
  pong.join();
  return {counter.load(), seconds, out_of_turn + pong_out_of_turn};
}
}  // namespace detail

// v2: C++20 atomic wait/notify: the waiter sleeps on the counter's own address (a futex), so
// there is no mutex to re-take; still a sleep and a wake-up (a system call each side) per hop.
inline PingPongResult ping_pong_atomic_wait(std::int64_t round_trips) {
  return detail::ping_pong_atomic<true>(round_trips);
}

// v3: spinning: no system call at all, the hop travels as one cache line between two cores
// (the floor: tens of nanoseconds a round trip, at least two transfers of the line and the
// upgrades of each side's read-modify-write). Only while each side
// has a core: otherwise the spinner burns the slice its partner needed, hence the bound and the
// yield.
inline PingPongResult ping_pong_atomic_spin(std::int64_t round_trips) {
  return detail::ping_pong_atomic<false>(round_trips);
}

// v4: two pipes between two threads: message passing inside one process. A write and a
// blocking read (system calls, a copy through the kernel) per hop: the control for v5, to show
// that the cost there is the pipe and the wake-up, not the process.
inline PingPongResult ping_pong_pipe_threads(std::int64_t round_trips) {
  detail::check_round_trips(round_trips);
  detail::Pipe to_pong = detail::make_pipe(), to_ping = detail::make_pipe();
  std::jthread pong([&] {
    std::int64_t v = 0;
    while (detail::read_all(to_pong.read_end.get(), &v, sizeof v) == sizeof v) {
      ++v;
      if (!detail::write_all(to_ping.write_end.get(), &v, sizeof v)) return;
    }
  });
  // Closing pong's input on every path (an exception included) ends its loop at end-of-file,
  // so the jthread's join cannot hang.
  struct CloseInput {
    detail::Fd& fd;
    ~CloseInput() { fd.reset(); }
  } close_input{to_pong.write_end};

  std::int64_t counter = 0;
  detail::Clock::time_point start;
  for (std::int64_t i = 0; i <= round_trips; ++i) {
    if (i == 1) start = detail::Clock::now();
    ++counter;
    std::int64_t reply = 0;
    if (!detail::write_all(to_pong.write_end.get(), &counter, sizeof counter) ||
        detail::read_all(to_ping.read_end.get(), &reply, sizeof reply) != sizeof reply)
      throw std::runtime_error("pipe_threads: the pipe broke");
    if (reply != counter + 1)
      throw std::runtime_error("pipe_threads: sent " + std::to_string(counter) + ", got back " +
                               std::to_string(reply));
    counter = reply;
  }
  return {counter, seconds_since(start)};
}

// v5: two pipes between two processes: the same as v4, plus a switch between address spaces
// per hop. `child_exits_after` >= 0 is a test hook: the child _exit(3)s after sending that many
// hops back, and the parent must report it (and not die of SIGPIPE, and not leave a zombie).
inline PingPongResult ping_pong_processes(std::int64_t round_trips,
                                          std::int64_t child_exits_after = -1) {
  detail::check_round_trips(round_trips);
  detail::Pipe to_pong = detail::make_pipe(), to_ping = detail::make_pipe();
  detail::Children child("pipe_processes");
  const int in = to_pong.read_end.get(), out = to_ping.write_end.get();
  const int unused_write = to_pong.write_end.get(), unused_read = to_ping.read_end.get();
  child.spawn(0, [=]() noexcept {
    // Close the child's copies of the parent's ends: a pipe reports end-of-file only when every
    // write end is closed, and the child would otherwise hold one of its own input.
    ::close(unused_write);
    ::close(unused_read);
    std::int64_t v = 0;
    for (std::int64_t hops = 0;; ++hops) {
      if (hops == child_exits_after) return 3;
      if (detail::read_all(in, &v, sizeof v) != sizeof v) return 0;  // end-of-file: parent done
      ++v;
      if (!detail::write_all(out, &v, sizeof v)) return 1;
    }
  });
  to_pong.read_end.reset();
  to_ping.write_end.reset();

  detail::BlockSigpipe no_sigpipe;  // a dead child makes our write fail with EPIPE instead
  std::int64_t counter = 0;
  std::string broken;
  detail::Clock::time_point start;
  for (std::int64_t i = 0; i <= round_trips && broken.empty(); ++i) {
    if (i == 1) start = detail::Clock::now();
    ++counter;
    std::int64_t reply = 0;
    if (!detail::write_all(to_pong.write_end.get(), &counter, sizeof counter) ||
        detail::read_all(to_ping.read_end.get(), &reply, sizeof reply) != sizeof reply)
      broken = "the child closed its pipe after " + std::to_string(counter - 1) + " hops";
    else if (reply != counter + 1)
      broken = "sent " + std::to_string(counter) + ", got back " + std::to_string(reply);
    else
      counter = reply;
  }
  const double seconds = broken.empty() ? seconds_since(start) : 0;
  to_pong.write_end.reset();  // end-of-file: the child leaves its loop and exits
  child.reap_all();           // throws if the child failed, naming its exit status or signal
  if (!broken.empty()) throw std::runtime_error("pipe_processes: " + broken);
  return {counter, seconds};
}

inline PingPongResult ping_pong_pipe_processes(std::int64_t round_trips) {
  return ping_pong_processes(round_trips);
}

struct PingPongVariant : VariantInfo {
  PingPongFn run;
};

// Slowest mechanism first would be pipes; this order follows the lesson instead: the
// synchronisation primitives a program uses inside one process, then message passing.
inline constexpr PingPongVariant kPingPongRows[] = {
    {{"condvar", "mutex + condition_variable: sleep and wake-up, plus re-taking the mutex"},
     ping_pong_condvar},
    {{"atomic_wait", "C++20 atomic wait/notify: a futex on the counter itself, no mutex"},
     ping_pong_atomic_wait},
    {{"atomic_spin",
      "spin on the atomic (bounded, then yield): no system call while both have a core, tens "
      "of nanoseconds; on a loaded machine it burns the time slice its partner needs"},
     ping_pong_atomic_spin},
    {{"pipe_threads", "two pipes between two threads: a system call and a copy per hop"},
     ping_pong_pipe_threads},
    {{"pipe_processes",
      "two pipes between two processes: as pipe_threads, across address spaces (the cost is "
      "the kernel wake-up, not the process boundary)"},
     ping_pong_pipe_processes},
};
inline constexpr VariantTable kPingPongVariants{kPingPongRows};

}  // namespace concurdl::threads
