// What it costs to create a worker: a thread, a forked process, a process running a program
// (fork + exec), and posix_spawn. Each variant makes `count` workers that do nothing, one after
// another, and waits for each; a row each in kSpawnVariants (ch01/spawn_cost). The same rules as
// processes.hpp's: a forked child only calls async-signal-safe functions and leaves with _exit().
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "concurdl/core/variants.hpp"
#include "concurdl/threads/processes.hpp"  // detail::throw_errno

extern char** environ;

namespace concurdl::threads {

struct SpawnResult {
  std::int64_t completed = 0;  // workers that ran and were joined / reaped with status 0
  double seconds = 0;
};

using SpawnFn = SpawnResult (*)(int count);

// A thread: clone() sharing everything (address space, files), so the cost is a stack, a kernel
// task and a little bookkeeping.
inline SpawnResult spawn_threads(int count) {
  std::int64_t ran = 0;  // written by each thread, read after its join: no race
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) std::thread([&ran] { ++ran; }).join();
  return {ran, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

namespace detail {
inline bool wait_ok(pid_t pid) {
  int status = 0;
  pid_t r;
  do r = ::waitpid(pid, &status, 0);
  while (r < 0 && errno == EINTR);
  return r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
}  // namespace detail

// A process: fork() copies the parent's page tables (marking every page copy-on-write), so it
// costs more the more memory the parent has mapped; then the child exits at once.
inline SpawnResult spawn_fork(int count) {
  std::int64_t ok = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) detail::throw_errno("fork");
    if (pid == 0) ::_exit(0);
    ok += detail::wait_ok(pid);
  }
  return {ok, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

inline constexpr const char* kTrueProgram = "/bin/true";

// A new program the classic way: fork() (page-table copy as above), then execve() throws the
// copy away and loads /bin/true (dynamic linking, a fresh address space).
inline SpawnResult spawn_fork_exec(int count) {
  std::int64_t ok = 0;
  char* const argv[] = {const_cast<char*>(kTrueProgram), nullptr};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) detail::throw_errno("fork");
    if (pid == 0) {
      ::execve(kTrueProgram, argv, environ);
      ::_exit(127);  // exec failed
    }
    ok += detail::wait_ok(pid);
  }
  return {ok, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// A new program without the copy: glibc's posix_spawn uses clone(CLONE_VM | CLONE_VFORK), the
// child borrows the parent's memory until it execs, so the cost no longer grows with the parent.
inline SpawnResult spawn_posix_spawn(int count) {
  std::int64_t ok = 0;
  char* const argv[] = {const_cast<char*>(kTrueProgram), nullptr};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    pid_t pid = 0;
    if (const int err = ::posix_spawn(&pid, kTrueProgram, nullptr, nullptr, argv, environ);
        err != 0)
      throw std::system_error(err, std::generic_category(), "posix_spawn /bin/true");
    ok += detail::wait_ok(pid);
  }
  return {ok, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

struct SpawnVariant : VariantInfo {
  SpawnFn spawn;
};

inline constexpr SpawnVariant kSpawnRows[] = {
    {{"std_thread",
      "create + join a thread: a new stack and kernel task, memory shared (tens of "
      "microseconds)"},
     spawn_threads},
    {{"fork_waitpid",
      "fork + waitpid: a new address space, the page tables copied and the pages shared "
      "copy-on-write: costs more the more memory the parent has touched"},
     spawn_fork},
    {{"fork_exec_true",
      "fork + execve(/bin/true): copy the page tables, then discard them for a new program"},
     spawn_fork_exec},
    {{"posix_spawn_true",
      "posix_spawn(/bin/true): vfork-style, no page-table copy, then exec: flat in the "
      "parent's size"},
     spawn_posix_spawn},
};
inline constexpr VariantTable kSpawnVariants{kSpawnRows};

}  // namespace concurdl::threads
