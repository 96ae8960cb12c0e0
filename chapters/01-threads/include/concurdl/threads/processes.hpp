// Threads vs processes. The same integer sum computed by N std::threads (one address space:
// partial sums are just written to memory), by N fork()ed children writing into a MAP_SHARED
// page (shared memory between processes has to be asked for), and by N children sending their
// partial sums back through pipes (message passing: nothing shared, every byte copied through
// the kernel). What it costs to create a thread, a process, and a process running a program is
// spawn_cost.hpp, on the same building blocks.
//
// Run: concurdl run ch01/process_reduction ch01/spawn_cost     Tests: ch01_tests
// --gtest_filter='Proc*'
//
// Rules for the process variants, because the parent may be multithreaded (OpenMP and TBB keep
// worker threads alive): after fork() only the calling thread exists in the child, and any lock
// another thread held (malloc's, stdio's) stays locked there forever. So a child only computes,
// write()s, and leaves with _exit() (all async-signal-safe): no allocation, no printing, no
// exceptions, no exit() (which would run the parent's atexit handlers and flush its stdio).
// The parent reaps every child with waitpid() on every path (an exception included), so no
// zombie is left behind, and turns a child's non-zero exit status or killing signal into an
// exception that names the worker.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "concurdl/core/hardware.hpp"
#include "concurdl/core/variants.hpp"

namespace concurdl::threads {

// A test hook: make one worker fail the way a real one can. A process can end with a non-zero
// status or be killed by a signal, and the parent survives; a thread can only throw (a signal
// such as SIGSEGV in a thread ends the whole process: the isolation processes buy).
struct FailureInjection {
  int worker = -1;      // the worker that fails; -1: none
  int exit_status = 3;  // a process calls _exit(exit_status)...
  int signal = 0;       // ...or, when non-zero, raise(signal); a thread throws in either case
};

// ---------------------------------------------------------------------------------------------
// Building blocks: file descriptors, shared memory and child processes, each owned by RAII.

namespace detail {

[[noreturn]] inline void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read_end, write_end;
};

inline Pipe make_pipe() {
  int fds[2];
  // O_CLOEXEC: a program exec'd elsewhere in this process (posix_spawn) must not inherit our
  // ends, or a pipe would never see end-of-file.
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  return {Fd(fds[0]), Fd(fds[1])};
}

// Async-signal-safe: loops over short writes and EINTR. False on any other error.
inline bool write_all(int fd, const void* data, std::size_t size) noexcept {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t k = ::write(fd, p, size);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    size -= static_cast<std::size_t>(k);
  }
  return true;
}

// Async-signal-safe: the number of bytes read, less than `size` only at end-of-file or error.
inline std::size_t read_all(int fd, void* data, std::size_t size) noexcept {
  char* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t k = ::read(fd, p + got, size - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += static_cast<std::size_t>(k);
  }
  return got;
}

// Anonymous memory that stays shared with children after fork() (MAP_SHARED), where ordinary
// memory would be copied on write and the parent would never see what a child wrote.
class SharedMemory {
 public:
  explicit SharedMemory(std::size_t bytes) : bytes_(bytes) {
    ptr_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ptr_ == MAP_FAILED) throw_errno("mmap(MAP_SHARED | MAP_ANONYMOUS)");
  }
  ~SharedMemory() { ::munmap(ptr_, bytes_); }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// The wait status Children::wait records when waitpid found no child to reap (ECHILD).
inline constexpr int kNoStatus = -1;

inline std::string describe_status(int status) {
  // Checked first: -1 has every bit set and would otherwise decode as "killed by signal 127".
  if (status == kNoStatus)
    return "was reaped by someone else (waitpid: ECHILD, SIGCHLD ignored?): no exit status";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);  // "Killed"; called by the parent only, after the wait
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

// The children of one operation. Every child is reaped exactly once: by reap_all() on the normal
// path, or by the destructor (after SIGKILL, so it cannot hang on a stuck child) when the
// parent leaves early through an exception. Either way no zombie outlives the operation.
class Children {
 public:
  explicit Children(std::string_view what) : what_(what) {}
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    for (Child& c : kids_)
      if (!c.reaped) {
        ::kill(c.pid, SIGKILL);  // harmless if it already exited: it stays a zombie until reaped
        wait(c);
      }
  }

  // fork() a child that runs body() and _exit()s with what it returns. body must be
  // async-signal-safe (see the file comment) and must not throw.
  template <class Body>
  void spawn(int worker, Body&& body) {
    // Make room first, so that recording the child cannot throw and lose track of it.
    if (kids_.size() == kids_.capacity()) kids_.reserve(2 * kids_.size() + 8);
    const pid_t pid = ::fork();
    if (pid < 0) throw_errno("fork");
    if (pid == 0) ::_exit(body());
    kids_.push_back({pid, worker, 0, false});
  }

  // Wait for every child; throw, naming the first failed one, if any did not exit with 0.
  void reap_all() {
    for (Child& c : kids_) wait(c);
    for (const Child& c : kids_)
      if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0))
        throw std::runtime_error(std::string(what_) + ": worker " + std::to_string(c.worker) +
                                 " (pid " + std::to_string(c.pid) + ") " +
                                 describe_status(c.status));
  }

  std::size_t size() const { return kids_.size(); }

 private:
  struct Child {
    pid_t pid;
    int worker;
    int status;
    bool reaped;
  };

  void wait(Child& c) {
    if (c.reaped) return;
    pid_t r;
    do r = ::waitpid(c.pid, &c.status, 0);
    while (r < 0 && errno == EINTR);
    c.reaped = true;
    // ECHILD: someone set SIGCHLD to SIG_IGN, so the kernel reaped it and kept no status.
    if (r < 0) c.status = kNoStatus;
  }

  std::string_view what_;
  std::vector<Child> kids_;
};

// A child failing on purpose (tests): what a crash or an error exit looks like to the parent.
inline int injected_failure(const FailureInjection& f) noexcept {
  if (f.signal != 0) ::raise(f.signal);
  return f.exit_status;
}

// Worker w's share [begin, end) of n elements: contiguous blocks differing by at most one.
inline std::pair<std::size_t, std::size_t> block(std::size_t n, int w, int workers) {
  const auto W = static_cast<std::size_t>(workers), i = static_cast<std::size_t>(w);
  return {n * i / W, n * (i + 1) / W};
}

inline void check_workers(int workers) {
  if (workers < 1) throw std::invalid_argument("process_reduction: need at least one worker");
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// The reduction: sum of int32 values as int64, exact in any order, so every variant must equal
// the serial sum bit for bit.

inline std::int64_t sum_block(const std::int32_t* x, std::size_t begin, std::size_t end) noexcept {
  std::int64_t s = 0;
  for (std::size_t i = begin; i < end; ++i) s += x[i];
  return s;
}

inline std::int64_t sum_serial(std::span<const std::int32_t> x) {
  return sum_block(x.data(), 0, x.size());
}

// Values in [-1000, 1000) from a fixed-seed LCG: a deterministic input for every run.
inline std::vector<std::int32_t> make_int_input(std::size_t n) {
  std::vector<std::int32_t> x(n);
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  for (auto& v : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<std::int32_t>((s >> 33) % 2000) - 1000;
  }
  return x;
}

using ReduceFn = std::int64_t (*)(std::span<const std::int32_t> x, int workers,
                                  const FailureInjection& fail);

// v1: threads. Each worker writes its partial sum to its own cache line of an ordinary array
// (the address space is shared, so that is all it takes); join, then add them up.
inline std::int64_t reduce_threads(std::span<const std::int32_t> x, int workers,
                                   const FailureInjection& fail) {
  detail::check_workers(workers);
  struct alignas(kCacheLine) Slot {
    std::int64_t sum = 0;
    std::exception_ptr error;
  };
  std::vector<Slot> slots(static_cast<std::size_t>(workers));
  {
    std::vector<std::jthread> team;
    team.reserve(slots.size());
    for (int w = 0; w < workers; ++w)
      team.emplace_back([&x, &slots, &fail, w, workers] {
        Slot& mine = slots[static_cast<std::size_t>(w)];
        try {
          if (w == fail.worker) throw std::runtime_error("injected failure");
          const auto [b, e] = detail::block(x.size(), w, workers);
          mine.sum = sum_block(x.data(), b, e);
        } catch (...) {
          mine.error = std::current_exception();  // an escaping exception would std::terminate
        }
      });
  }  // jthread joins: the partial sums are now visible to this thread
  std::int64_t total = 0;
  for (int w = 0; w < workers; ++w) {
    const Slot& s = slots[static_cast<std::size_t>(w)];
    if (s.error) {
      try {
        std::rethrow_exception(s.error);
      } catch (const std::exception& e) {
        throw std::runtime_error("threads: worker " + std::to_string(w) + " threw: " + e.what());
      }
    }
    total += s.sum;
  }
  return total;
}

// v2: processes over shared memory. The input is inherited by fork() (copy-on-write: the
// children only read it, so nothing is copied but the page tables); each child writes its partial
// sum into its own cache line of a MAP_SHARED page; the parent reaps them and adds up.
inline std::int64_t reduce_fork_shared(std::span<const std::int32_t> x, int workers,
                                       const FailureInjection& fail) {
  detail::check_workers(workers);
  struct alignas(kCacheLine) Slot {
    std::int64_t sum;
    std::int64_t written;  // 1 once the child stored its sum
  };
  detail::SharedMemory shm(sizeof(Slot) * static_cast<std::size_t>(workers));
  // mmap'd memory is zero-filled, and Slot is an implicit-lifetime type: usable as it is.
  auto* slots = static_cast<Slot*>(shm.get());
  detail::Children children("fork_shared");
  for (int w = 0; w < workers; ++w)
    children.spawn(w, [&, w]() noexcept {
      if (w == fail.worker) return detail::injected_failure(fail);
      const auto [b, e] = detail::block(x.size(), w, workers);
      slots[w].sum = sum_block(x.data(), b, e);
      slots[w].written = 1;
      return 0;
    });
  children.reap_all();  // waitpid() orders the children's writes before our reads
  std::int64_t total = 0;
  for (int w = 0; w < workers; ++w) {
    if (slots[w].written != 1)
      throw std::runtime_error("fork_shared: worker " + std::to_string(w) +
                               " exited without a result");
    total += slots[w].sum;
  }
  return total;
}

// v3: processes with message passing. Nothing is shared on purpose: each child sends its 8-byte
// partial sum through its own pipe (a write of <= PIPE_BUF bytes is atomic); the parent reads
// them, then reaps. A child that dies before writing shows up as end-of-file on its pipe.
inline std::int64_t reduce_fork_pipes(std::span<const std::int32_t> x, int workers,
                                      const FailureInjection& fail) {
  detail::check_workers(workers);
  std::vector<detail::Fd> from_child;
  from_child.reserve(static_cast<std::size_t>(workers));
  detail::Children children("fork_pipes");
  for (int w = 0; w < workers; ++w) {
    detail::Pipe p = detail::make_pipe();
    const int out = p.write_end.get();
    children.spawn(w, [&, w, out]() noexcept {
      if (w == fail.worker) return detail::injected_failure(fail);
      const auto [b, e] = detail::block(x.size(), w, workers);
      const std::int64_t sum = sum_block(x.data(), b, e);
      return detail::write_all(out, &sum, sizeof sum) ? 0 : 1;
    });
    // Close our copy of the write end now: otherwise the pipe never reports end-of-file when
    // the child dies, and the children forked later would inherit it too.
    p.write_end.reset();
    from_child.push_back(std::move(p.read_end));
  }
  std::int64_t total = 0;
  int first_missing = -1;
  for (int w = 0; w < workers; ++w) {
    std::int64_t sum = 0;
    if (detail::read_all(from_child[static_cast<std::size_t>(w)].get(), &sum, sizeof sum) !=
        sizeof sum) {
      if (first_missing < 0) first_missing = w;
    } else {
      total += sum;
    }
  }
  children.reap_all();  // a failed child's exit status says more than its missing message
  if (first_missing >= 0)
    throw std::runtime_error("fork_pipes: worker " + std::to_string(first_missing) +
                             " closed its pipe without sending a result");
  return total;
}

// What a row's workers are: threads of this process, or processes (whose failures come back
// as exit statuses and signals).
enum class Workers { threads, processes };
struct ProcessReduceVariant : VariantInfo {
  Workers workers;
  ReduceFn reduce;
};

inline constexpr ProcessReduceVariant kProcessReduceRows[] = {
    {{"threads", "N std::threads in one address space: partial sums are plain memory writes"},
     Workers::threads,
     reduce_threads},
    {{"fork_shared",
      "N fork()ed processes write partial sums to a MAP_SHARED page: isolation, plus a fork "
      "and a page-table copy per worker (slower than threads, however few bytes come back)"},
     Workers::processes,
     reduce_fork_shared},
    {{"fork_pipes",
      "N processes send partial sums through pipes: message passing, nothing shared, a system "
      "call per message"},
     Workers::processes,
     reduce_fork_pipes},
};
inline constexpr VariantTable kProcessReduceVariants{kProcessReduceRows};

}  // namespace concurdl::threads
