// A bounded lock-free MPMC queue: Dmitry Vyukov's ring buffer with a sequence number per slot.
// No mutex: producers claim positions with a CAS on enqueue_pos_, consumers on dequeue_pos_, and
// each slot's sequence number says whose turn the slot is (so no thread ever waits for a lock
// holder who might be descheduled; a slot claimed but not yet filled does hold up the consumer
// of that slot, which is why this queue is "lock-free in practice", not wait-free).
//
//   slot i's seq:  == pos         free, for the producer of position pos
//                  == pos + 1     full, for the consumer of position pos
//                  == pos + N     free again, for the producer of pos + N (one lap later)
//
//   try_push: pos = enqueue_pos; seq = cells[pos % N].seq
//             seq == pos  -> CAS enqueue_pos pos -> pos+1; write value; seq = pos + 1 (release)
//             seq <  pos  -> the slot still holds last lap's item: full, return false
//             seq >  pos  -> another producer took pos: reload and retry
//   try_pop:  the same with dequeue_pos and seq == pos + 1; after reading, seq = pos + N
//
// Memory order: the value is plain data. The producer writes it, then stores seq with release;
// the consumer loads seq with acquire, then reads it: the value is published by the seq store.
// The position counters only hand out positions (relaxed CAS): they publish nothing.
// The two counters sit on separate cache lines: producers and consumers do not bounce one line.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>

#include "concurdl/locks/spin.hpp"

namespace concurdl::locks {

template <class T>
class MpmcRingQueue {
 public:
  // capacity: a power of two >= 2 (positions map to slots with a mask, not a division).
  explicit MpmcRingQueue(std::size_t capacity) : mask_(capacity - 1), cells_(new Cell[capacity]) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0)
      throw std::invalid_argument("MpmcRingQueue: capacity must be a power of two >= 2");
    for (std::size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  MpmcRingQueue(const MpmcRingQueue&) = delete;
  MpmcRingQueue& operator=(const MpmcRingQueue&) = delete;

  // Never blocks. false: the queue was full.
  bool try_push(T v) {
    Cell* cell;
    std::size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    while (true) {
      cell = &cells_[pos & mask_];
      const std::size_t seq = cell->seq.load(std::memory_order_acquire);
      const auto dif = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (dif == 0) {
        // Our turn at this slot, if no other producer claims pos first.
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
        // pos now holds the current value: retry there.
      } else if (dif < 0) {
        return false;  // last lap's item is still in the slot
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);
      }
    }
    cell->value = std::move(v);
    cell->seq.store(pos + 1, std::memory_order_release);  // publish the value to its consumer
    return true;
  }

  // Never blocks. false: the queue was empty (or its next item is claimed but not yet written).
  bool try_pop(T& out) {
    Cell* cell;
    std::size_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    while (true) {
      cell = &cells_[pos & mask_];
      const std::size_t seq = cell->seq.load(std::memory_order_acquire);
      const auto dif = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos + 1);
      if (dif == 0) {
        if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (dif < 0) {
        return false;
      } else {
        pos = dequeue_pos_.load(std::memory_order_relaxed);
      }
    }
    out = std::move(cell->value);
    // Free the slot for the producer one lap later; release: our read of the value happens
    // before its write.
    cell->seq.store(pos + mask_ + 1, std::memory_order_release);
    return true;
  }

  std::size_t capacity() const { return mask_ + 1; }

 private:
  // Packed, as in Vyukov's original: neighbouring slots share a line, so a producer and a
  // consumer a few slots apart do contend on it; padding each slot to 64 bytes trades memory
  // for that (moodycamel instead gives each producer its own block of slots).
  struct Cell {
    std::atomic<std::size_t> seq;
    T value;
  };

  const std::size_t mask_;
  const std::unique_ptr<Cell[]> cells_;
  alignas(kCacheLine) std::atomic<std::size_t> enqueue_pos_{0};
  alignas(kCacheLine) std::atomic<std::size_t> dequeue_pos_{0};
};

}  // namespace concurdl::locks
