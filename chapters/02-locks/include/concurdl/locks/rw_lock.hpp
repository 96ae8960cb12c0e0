// Readers-writer locks: many readers at once, or one writer alone. The lesson's question is when
// that pays: a read-mostly structure (a model's parameter table read by many inference threads,
// a cache of tokenised samples) whose reads take long enough that running them side by side
// beats the extra bookkeeping. Run: concurdl run ch02/rw_lock.
//
//   std_mutex             every reader excludes every other reader: the baseline
//   std_shared_mutex      the standard RW lock (pthread_rwlock here, which prefers readers)
//   v1_writer_preferring  ours: one atomic word, readers enter with one CAS, and a waiting
//                         writer stops new readers from entering, so writers cannot starve
//
// Writer preference has its own starvation: a steady stream of writers can keep readers out.
// Reader preference (pthread's default) starves writers instead. There is no free lunch; the
// lesson compares the two at 50, 90 and 99% reads.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/locks/lock_variants.hpp"
#include "concurdl/locks/spin.hpp"

namespace concurdl::locks {

// One 32-bit word holds the whole state, so every transition is one CAS:
//
//   bit 31          a writer holds the lock
//   bits 16..30     writers waiting (up to 32767)
//   bits 0..15      readers holding the lock (up to 65535)
//
// Readers enter only when no writer holds AND no writer waits (that is the writer preference).
// Threads that cannot enter sleep with C++20 atomic wait() on the word (a futex on Linux) and are
// woken with notify_all() by whoever changes the state in a way that could let them in.
// SharedLockable and Lockable: std::shared_lock and std::unique_lock work with it.
class WriterPreferringRwLock {
 public:
  void lock_shared() {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    while (true) {
      if (s & (kWriter | kWaitingMask)) {
        state_.wait(s, std::memory_order_relaxed);  // sleeps only while the word still equals s
        s = state_.load(std::memory_order_relaxed);
        continue;
      }
      // acquire: see the last writer's writes (its release in unlock()).
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return;
    }
  }
  bool try_lock_shared() {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    while (!(s & (kWriter | kWaitingMask)))
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    return false;
  }
  void unlock_shared() {
    // release: a reader writes nothing shared, but its reads must not move after the writer
    // that enters next starts writing.
    const std::uint32_t before = state_.fetch_sub(1, std::memory_order_release);
    // The last reader out lets a waiting writer in.
    if ((before & kReaderMask) == 1 && (before & kWaitingMask)) state_.notify_all();
  }

  void lock() {
    // Announce ourselves first: from now on no new reader enters.
    std::uint32_t s = state_.fetch_add(kWaitingOne, std::memory_order_relaxed) + kWaitingOne;
    while (true) {
      if (s & (kWriter | kReaderMask)) {
        state_.wait(s, std::memory_order_relaxed);
        s = state_.load(std::memory_order_relaxed);
        continue;
      }
      // acquire: see the previous writer's writes; and the readers' release, so their reads
      // happened before our writes.
      if (state_.compare_exchange_weak(s, (s - kWaitingOne) | kWriter, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return;
    }
  }
  bool try_lock() {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    while (!(s & (kWriter | kReaderMask)))
      if (state_.compare_exchange_weak(s, s | kWriter, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    return false;
  }
  void unlock() {
    // release: publish the writer's writes. Wake everyone: the next writer if one waits (the
    // readers will go back to sleep, seeing it waiting), otherwise all readers.
    state_.fetch_and(~kWriter, std::memory_order_release);
    state_.notify_all();
  }

  // Snapshots for tests.
  std::uint32_t waiting_writers() const {
    return (state_.load(std::memory_order_relaxed) & kWaitingMask) >> 16;
  }
  std::uint32_t readers() const { return state_.load(std::memory_order_relaxed) & kReaderMask; }

 private:
  static constexpr std::uint32_t kWriter = 1u << 31;
  static constexpr std::uint32_t kWaitingOne = 1u << 16;
  static constexpr std::uint32_t kWaitingMask = 0x7FFFu << 16;
  static constexpr std::uint32_t kReaderMask = 0xFFFFu;

  std::atomic<std::uint32_t> state_{0};
};

// A plain mutex dressed as a RW lock: lock_shared() is lock(). The baseline row.
class ExclusiveRwLock {
 public:
  void lock_shared() { m_.lock(); }
  bool try_lock_shared() { return m_.try_lock(); }
  void unlock_shared() { m_.unlock(); }
  void lock() { m_.lock(); }
  bool try_lock() { return m_.try_lock(); }
  void unlock() { m_.unlock(); }

 private:
  std::mutex m_;
};

// --- the driver --------------------------------------------------------------------------------

// The protected table: kCells plain counters that a writer increments together. A reader checks
// that it sees them all equal (a torn read means a writer was inside at the same time).
inline constexpr std::size_t kRwCells = 16;

struct RwResult {
  std::uint64_t reads = 0, writes = 0;
  std::uint64_t torn_reads = 0;   // readers that saw a half-written table: must be 0
  std::uint64_t final_value = 0;  // every cell at the end: must equal `writes`
  bool cells_equal = true;
  double seconds = 0;
};

// `threads` threads for `duration`; each operation is a read with probability read_per_mille /
// 1000, else a write. Both critical sections also do `cs_steps` of cs_work, so a read takes long
// enough that running reads side by side can pay.
template <class RW>
RwResult rw_contend(unsigned threads, unsigned read_per_mille, std::uint32_t cs_steps,
                    std::chrono::nanoseconds duration) {
  RW lock;
  alignas(kCacheLine) std::array<std::uint64_t, kRwCells> cells{};
  std::uint64_t writer_data = 1;  // the writers' critical-section work, protected too
  alignas(kCacheLine) std::atomic<bool> stop{false};
  detail::StartGate gate;
  // Each reader stores its work's result in its own slot INSIDE the critical section: a store
  // cannot move past the unlock's release, so neither can the work that feeds it.
  struct alignas(kCacheLine) ReaderSink {
    std::uint64_t value = 0;
  };
  std::vector<ReaderSink> sinks(threads);
  std::vector<RwResult> per(threads);
  std::chrono::steady_clock::time_point start;
  {
    std::vector<std::jthread> team;
    for (unsigned t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        gate.arrive_and_wait();
        RwResult mine;
        do {  // at least one operation per thread (see contend() in lock_variants.hpp)
          if (thread_random() % 1000 < read_per_mille) {
            std::shared_lock guard(lock);
            const std::uint64_t first = cells[0];
            bool torn = false;
            for (std::uint64_t c : cells) torn |= c != first;
            mine.torn_reads += torn;
            sinks[t].value = cs_work(sinks[t].value + first, cs_steps);
            ++mine.reads;
          } else {
            std::unique_lock guard(lock);
            for (std::uint64_t& c : cells) ++c;
            writer_data = cs_work(writer_data, cs_steps);
            ++mine.writes;
          }
        } while (!stop.load(std::memory_order_relaxed));
        per[t] = mine;
      });
    gate.open_when(threads);
    start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(duration);
    stop.store(true, std::memory_order_relaxed);
  }
  RwResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const RwResult& p : per) {
    r.reads += p.reads;
    r.writes += p.writes;
    r.torn_reads += p.torn_reads;
  }
  r.final_value = cells[0];
  for (std::uint64_t c : cells) r.cells_equal &= c == cells[0];
  return r;
}

struct RwVariant : VariantInfo {
  bool shared_readers;     // readers really run side by side
  bool writer_preferring;  // a waiting writer blocks new readers
  RwResult (*contend)(unsigned threads, unsigned read_per_mille, std::uint32_t cs_steps,
                      std::chrono::nanoseconds duration);
};

inline constexpr RwVariant kRwRows[] = {
    {{"std_mutex", "one std::mutex for readers and writers alike: reads serialise"},
     false,
     false,
     &rw_contend<ExclusiveRwLock>},
    {{"std_shared_mutex",
      "std::shared_mutex (pthread_rwlock): readers share; glibc prefers readers by default"},
     true,
     false,
     &rw_contend<std::shared_mutex>},
    {{"v1_writer_preferring",
      "ours: one atomic word, a CAS per reader, futex sleep; waiting writers hold new readers "
      "back"},
     true,
     true,
     &rw_contend<WriterPreferringRwLock>},
};
inline constexpr VariantTable kRwVariants{kRwRows};

}  // namespace concurdl::locks
