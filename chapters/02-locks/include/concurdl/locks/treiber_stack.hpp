// A lock-free stack (Treiber, 1986) and the two problems every lock-free structure with nodes
// must solve: ABA, and when a popped node's memory may be reused (safe memory reclamation).
//
//   push(v): node.next = head; CAS(head: node.next -> node)        retry if head moved
//   pop():   h = head; next = h.next; CAS(head: h -> next)         retry if head moved
//
// ABA. Thread 1 in pop() reads head = A and A.next = B, and is preempted before its CAS.
// Thread 2 pops A, pops B, and pushes A back (A's node was free, so it was reused). head is A
// again, so thread 1's CAS(head: A -> B) succeeds, and head now points at B, a node that is no
// longer in the stack (it is free, or holds someone else's item): the stack is corrupt. The CAS
// compared an address that had come back, not the state it had seen.
//
// Reclamation. Thread 1 also read A.next after loading head = A: if thread 2 had popped A and
// freed it with `delete`, that read is a use after free. A popped node cannot be freed while a
// thread may still be looking at it.
//
// The scheme here: tagged indices into a node pool.
//   - Nodes live in one array that the stack owns and never frees while it lives (the pool).
//     A stale thread can read a recycled node's `next`: the memory is always valid, and `next`
//     is an atomic, so the read is not even a data race; its value may be stale, and then...
//   - ...head is not a pointer but {index: 32 bits, tag: 32 bits} in one 64-bit atomic, and
//     every successful CAS increments the tag. Thread 1's CAS expects {A, tag t}; after thread 2's
//     three operations head is {A, t + 3}: the CAS fails, and thread 1 retries with fresh values.
//   - The pool's free list is itself a Treiber stack of indices, with its own tag, so taking and
//     returning nodes is lock-free too.
// Why this and not the alternatives: a tagged *pointer* needs a 128-bit CAS (cmpxchg16b, -mcx16,
// and libatomic on some compilers) or stealing pointer bits; hazard pointers (each thread
// publishes the node it is about to read; a node is freed only when no hazard names it) work
// for unbounded structures but cost a store-load fence per pop and a scan per free; epoch
// schemes defer frees in batches. A fixed pool is what a bounded buffer of batches or tensors
// already is, the 64-bit CAS is everywhere, and the code fits on a screen. The price: a fixed
// capacity (push fails when the pool is empty), and a tag that wraps after 2^32 operations, so a
// thread preempted across exactly that many operations on one stack could still see ABA.
//
// Memory order: push's CAS releases (the value and node.next are written before it); pop's CAS
// acquires (and reads the value only after winning). Each stack operation is a read-modify-write
// on head, so all pushes and pops form one release sequence: the acquire in pop synchronises
// with the push that published the node.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include "concurdl/locks/spin.hpp"

namespace concurdl::locks {

// {index, tag} packed in 64 bits; kNil is the empty list.
inline constexpr std::uint32_t kNil = 0xFFFFFFFFu;
inline constexpr std::uint64_t pack_tagged(std::uint32_t index, std::uint32_t tag) {
  return (static_cast<std::uint64_t>(tag) << 32) | index;
}
inline constexpr std::uint32_t tagged_index(std::uint64_t t) {
  return static_cast<std::uint32_t>(t);
}
inline constexpr std::uint32_t tagged_tag(std::uint64_t t) {
  return static_cast<std::uint32_t>(t >> 32);
}

// A fixed array of nodes and a lock-free free list of their indices (a tagged Treiber stack of
// indices, the same algorithm as TreiberStack below). allocate() gives a node index or kNil
// when none is free; release(i) gives it back.
template <class T>
class NodePool {
 public:
  struct Node {
    std::atomic<std::uint32_t> next{kNil};  // atomic: a stale reader may read it at any time
    T value{};                              // plain: only the node's current owner touches it
  };

  explicit NodePool(std::uint32_t capacity) : nodes_(new Node[capacity]), capacity_(capacity) {
    if (capacity == 0 || capacity == kNil)
      throw std::invalid_argument("NodePool: capacity must be in [1, 2^32 - 2]");
    for (std::uint32_t i = 0; i < capacity; ++i)
      nodes_[i].next.store(i + 1 < capacity ? i + 1 : kNil, std::memory_order_relaxed);
    free_.store(pack_tagged(0, 0), std::memory_order_relaxed);
  }

  std::uint32_t allocate() {
    std::uint64_t h = free_.load(std::memory_order_acquire);
    while (true) {
      const std::uint32_t i = tagged_index(h);
      if (i == kNil) return kNil;
      const std::uint32_t next = nodes_[i].next.load(std::memory_order_relaxed);
      if (free_.compare_exchange_weak(h, pack_tagged(next, tagged_tag(h) + 1),
                                      std::memory_order_acquire, std::memory_order_acquire))
        return i;
    }
  }

  void release(std::uint32_t i) {
    std::uint64_t h = free_.load(std::memory_order_relaxed);
    do {
      nodes_[i].next.store(tagged_index(h), std::memory_order_relaxed);
    } while (!free_.compare_exchange_weak(h, pack_tagged(i, tagged_tag(h) + 1),
                                          std::memory_order_release, std::memory_order_relaxed));
  }

  Node& operator[](std::uint32_t i) { return nodes_[i]; }
  std::uint32_t capacity() const { return capacity_; }

 private:
  const std::unique_ptr<Node[]> nodes_;
  const std::uint32_t capacity_;
  alignas(kCacheLine) std::atomic<std::uint64_t> free_;
};

// The stack. push() returns false when all `capacity` nodes are in use.
template <class T>
class TreiberStack {
 public:
  explicit TreiberStack(std::uint32_t capacity) : pool_(capacity) {}
  TreiberStack(const TreiberStack&) = delete;
  TreiberStack& operator=(const TreiberStack&) = delete;

  bool push(T v) {
    const std::uint32_t i = pool_.allocate();
    if (i == kNil) return false;
    auto& node = pool_[i];
    node.value = std::move(v);
    std::uint64_t h = head_.load(std::memory_order_relaxed);
    do {
      node.next.store(tagged_index(h), std::memory_order_relaxed);
      // release: the value and next are written before the node becomes reachable.
    } while (!head_.compare_exchange_weak(h, pack_tagged(i, tagged_tag(h) + 1),
                                          std::memory_order_release, std::memory_order_relaxed));
    return true;
  }

  std::optional<T> pop() {
    std::uint64_t h = head_.load(std::memory_order_acquire);
    while (true) {
      const std::uint32_t i = tagged_index(h);
      if (i == kNil) return std::nullopt;
      // May be stale if i was popped and reused meanwhile; then the tag has moved on and the
      // CAS below fails. The pool never frees the memory, so reading it is safe.
      const std::uint32_t next = pool_[i].next.load(std::memory_order_relaxed);
      // acquire (also on failure: the retry reads the new head's node).
      if (head_.compare_exchange_weak(h, pack_tagged(next, tagged_tag(h) + 1),
                                      std::memory_order_acquire, std::memory_order_acquire)) {
        std::optional<T> v(std::move(pool_[i].value));  // only the winner reads the value
        pool_.release(i);
        return v;
      }
    }
  }

  std::uint32_t capacity() const { return pool_.capacity(); }

 private:
  NodePool<T> pool_;
  alignas(kCacheLine) std::atomic<std::uint64_t> head_{pack_tagged(kNil, 0)};
};

}  // namespace concurdl::locks
