// Deadlock and livelock, runnable and detected (include/concurdl/locks/hazards.hpp explains).
#include "concurdl/locks/hazards.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <barrier>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/locks/spin.hpp"

namespace concurdl::locks {

// --- LockMonitor -------------------------------------------------------------------------------

void LockMonitor::name_this_thread(std::string name) {
  std::lock_guard lock(mu_);
  threads_[std::this_thread::get_id()].name = std::move(name);
}

std::string LockMonitor::name_of(std::thread::id id) const {
  auto it = threads_.find(id);
  if (it != threads_.end() && !it->second.name.empty()) return it->second.name;
  return "an unnamed thread";
}

void LockMonitor::waiting(const TrackedMutex* m) {
  std::lock_guard lock(mu_);
  threads_[std::this_thread::get_id()].waits_for = m;
}

void LockMonitor::acquired(const TrackedMutex* m) {
  std::lock_guard lock(mu_);
  ThreadState& t = threads_[std::this_thread::get_id()];
  t.waits_for = nullptr;
  t.holds.push_back(m);
  owner_[m] = std::this_thread::get_id();
}

void LockMonitor::gave_up(const TrackedMutex* m) {
  std::lock_guard lock(mu_);
  ThreadState& t = threads_[std::this_thread::get_id()];
  if (t.waits_for == m) t.waits_for = nullptr;
}

void LockMonitor::released(const TrackedMutex* m) {
  std::lock_guard lock(mu_);
  ThreadState& t = threads_[std::this_thread::get_id()];
  t.holds.erase(std::remove(t.holds.begin(), t.holds.end(), m), t.holds.end());
  owner_.erase(m);
}

// Each thread waits for at most one lock, and each lock has at most one owner, so the wait-for
// graph has out-degree <= 1: follow the edges from each waiting thread; coming back to a thread
// already on the path is a cycle.
std::string LockMonitor::find_cycle() const {
  std::lock_guard lock(mu_);
  for (const auto& [start, state] : threads_) {
    if (!state.waits_for) continue;
    std::vector<std::thread::id> path;
    std::thread::id at = start;
    while (true) {
      auto pos = std::find(path.begin(), path.end(), at);
      if (pos != path.end()) {
        // The cycle is path[pos..]: describe it, each thread with what it holds and waits for.
        std::string out = "deadlock: a cycle in the wait-for graph: ";
        for (auto it = pos; it != path.end(); ++it) {
          const ThreadState& t = threads_.at(*it);
          auto owner = owner_.find(t.waits_for);
          out += fmt::format("'{}' waits for '{}', held by '{}'", t.name, t.waits_for->name(),
                             name_of(owner->second));
          out += std::next(it) == path.end() ? "" : "; ";
        }
        return out;
      }
      path.push_back(at);
      auto t = threads_.find(at);
      if (t == threads_.end() || !t->second.waits_for) break;
      auto owner = owner_.find(t->second.waits_for);
      if (owner == owner_.end()) break;  // the lock is free: this thread is about to get it
      at = owner->second;
    }
  }
  return "";
}

std::string LockMonitor::describe() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [id, t] : threads_) {
    std::string holds;
    for (const TrackedMutex* m : t.holds) holds += (holds.empty() ? "'" : ", '") + m->name() + "'";
    out += fmt::format(
        "{}'{}' holds {}{}", out.empty() ? "" : "; ", t.name, holds.empty() ? "nothing" : holds,
        t.waits_for ? fmt::format(" and waits for '{}'", t.waits_for->name()) : std::string());
  }
  return out;
}

// --- TrackedMutex ------------------------------------------------------------------------------

void TrackedMutex::lock() {
  monitor_.waiting(this);
  // Short slices, so an abort is noticed within a millisecond.
  while (!mu_.try_lock_for(std::chrono::milliseconds(1))) {
    if (monitor_.aborted()) {
      monitor_.gave_up(this);
      throw LockAborted("lock '" + name_ + "' abandoned: the watchdog aborted the run");
    }
  }
  monitor_.acquired(this);
  if (monitor_.window().count() > 0) std::this_thread::sleep_for(monitor_.window());
}

bool TrackedMutex::try_lock() {
  if (!mu_.try_lock()) return false;
  monitor_.acquired(this);
  return true;
}

void TrackedMutex::unlock() {
  monitor_.released(this);
  mu_.unlock();
}

// --- transfers ---------------------------------------------------------------------------------

void transfer_naive(Account& from, Account& to, std::int64_t amount) {
  std::lock_guard source(from.mu);
  std::lock_guard destination(to.mu);  // the other direction holds this one and wants ours
  from.balance -= amount;
  to.balance += amount;
}

void transfer_ordered(Account& from, Account& to, std::int64_t amount) {
  // std::scoped_lock locks both with std::lock's deadlock-avoidance algorithm: it never waits
  // for one lock while holding another (it locks one, try_locks the rest, and on failure
  // releases everything and starts again from the lock that failed).
  std::scoped_lock both(from.mu, to.mu);
  from.balance -= amount;
  to.balance += amount;
}

TransferOutcome run_transfers(TransferFn transfer, const TransferOptions& o) {
  if (o.threads == 0 || o.accounts < 2)
    throw std::invalid_argument("run_transfers: need threads >= 1 and accounts >= 2");
  LockMonitor monitor(o.window);
  std::vector<std::unique_ptr<Account>> accounts;
  for (unsigned a = 0; a < o.accounts; ++a)
    accounts.push_back(std::make_unique<Account>(fmt::format("account {}", a), 1'000'000, monitor));
  TransferOutcome out;
  for (const auto& a : accounts) out.total_before += a->balance;

  std::atomic<unsigned> running{o.threads};
  std::atomic<std::uint64_t> done{0};
  const auto start = std::chrono::steady_clock::now();
  {
    // The watchdog: polls the progress counter; no change for `timeout` means a stall. Then it
    // reports the wait-for graph and aborts the waits so that the workers end.
    std::jthread watchdog([&](std::stop_token stop) {
      std::uint64_t last = monitor.progress_count();
      auto last_change = std::chrono::steady_clock::now();
      while (!stop.stop_requested() && running.load(std::memory_order_acquire) > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const std::uint64_t now_count = monitor.progress_count();
        const auto now = std::chrono::steady_clock::now();
        if (now_count != last) {
          last = now_count;
          last_change = now;
        } else if (now - last_change >= o.timeout) {
          const std::string cycle = monitor.find_cycle();
          out.cycle_found = !cycle.empty();
          out.report =
              (cycle.empty() ? std::string("stall: no progress and no cycle") : cycle) +
              fmt::format(
                  " (no progress for {} ms; state: {})",
                  std::chrono::duration_cast<std::chrono::milliseconds>(now - last_change).count(),
                  monitor.describe());
          out.stalled_for = std::chrono::duration<double>(now - last_change).count();
          out.deadlock_detected = true;
          monitor.abort();
          return;
        }
      }
    });
    std::vector<std::jthread> workers;
    for (unsigned t = 0; t < o.threads; ++t)
      workers.emplace_back([&, t] {
        monitor.name_this_thread(fmt::format("worker {}", t));
        // Threads 2k and 2k+1 share the pair of accounts (k, k+1); the even one moves money
        // a -> b, the odd one b -> a: opposite lock orders on the same two locks.
        const unsigned k = t / 2;
        Account& a = *accounts[k % o.accounts];
        Account& b = *accounts[(k + 1) % o.accounts];
        const bool forward = t % 2 == 0;
        try {
          for (std::uint64_t i = 0; i < o.transfers_per_thread; ++i) {
            if (forward)
              transfer(a, b, 1);
            else
              transfer(b, a, 1);
            done.fetch_add(1, std::memory_order_relaxed);
            monitor.progress();
          }
        } catch (const LockAborted&) {
          // The watchdog ended the run; the locks this thread held were released on unwinding.
        }
        running.fetch_sub(1, std::memory_order_release);
      });
  }  // workers joined, then the watchdog (declared first, destroyed last) is stopped and joined
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.transfers_done = done.load();
  out.finished = out.transfers_done == o.threads * o.transfers_per_thread;
  for (const auto& a : accounts) out.total_after += a->balance;
  return out;
}

// --- livelock ----------------------------------------------------------------------------------

LivelockOutcome run_polite_workers(RetryPolicy policy, std::uint64_t target_successes,
                                   std::uint64_t max_rounds) {
  std::mutex locks[2];
  std::atomic<std::uint64_t> attempts{0}, successes{0};
  std::uint64_t rounds = 0;
  bool stop = false;  // written by the barrier's completion step only, read after the barrier
  // The completion step runs once per phase, on one thread, while the others wait: the round
  // count and the stop decision are made there, so both threads see the same decision.
  int phase = 0;
  auto on_phase_done = [&]() noexcept {
    if (++phase % 3 != 0) return;  // three phases per round
    ++rounds;
    stop = successes.load(std::memory_order_relaxed) >= target_successes || rounds >= max_rounds;
  };
  std::barrier sync(2, on_phase_done);
  {
    std::vector<std::jthread> workers;
    for (int me = 0; me < 2; ++me)
      workers.emplace_back([&, me] {
        std::mutex& first = locks[me];
        std::mutex& second = locks[1 - me];
        std::uint64_t sit_out = 0;  // rounds to skip before trying again
        std::uint32_t range = 1;    // randomised policy: the range of sit_out, doubling
        while (true) {
          const bool trying = sit_out == 0;
          // Phase 1: take the first lock (the two threads take different ones: always works).
          if (trying) first.lock();
          sync.arrive_and_wait();
          // Phase 2: politely try the second, which the other thread holds if it is trying.
          bool both = false;
          if (trying) {
            attempts.fetch_add(1, std::memory_order_relaxed);
            both = second.try_lock();
          }
          sync.arrive_and_wait();
          // Phase 3: do the work if we have both, else let go of the first and retry.
          if (trying) {
            if (both) {
              successes.fetch_add(1, std::memory_order_relaxed);
              second.unlock();
              range = 1;
            }
            first.unlock();
            if (!both && policy == RetryPolicy::randomised) {
              sit_out = thread_random() % (range + 1);
              range = std::min<std::uint32_t>(range * 2, 64);
            }
          } else {
            --sit_out;
          }
          sync.arrive_and_wait();
          if (stop) return;
        }
      });
  }
  LivelockOutcome out;
  out.rounds = rounds;
  out.attempts = attempts.load();
  out.successes = successes.load();
  out.gave_up = out.successes < target_successes;
  out.report = out.gave_up ? fmt::format(
                                 "livelock: {} rounds, {} attempts, {} successes: both threads "
                                 "busy every round and neither made progress",
                                 out.rounds, out.attempts, out.successes)
                           : fmt::format("progress: {} successes in {} rounds ({} attempts)",
                                         out.successes, out.rounds, out.attempts);
  return out;
}

}  // namespace concurdl::locks
