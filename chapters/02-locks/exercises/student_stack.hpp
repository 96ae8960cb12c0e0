// Exercise 2.5 (chapter 02, exercises.md): the Treiber stack's push and pop.
// Read the header of include/concurdl/locks/treiber_stack.hpp first: it explains ABA and the
// scheme used here (tagged indices into a node pool). The pool is given (NodePool: allocate()
// and release() a node index, pool_[i] is the node); you write the stack on top of it.
// Check it:  concurdl exercise ch02
// or faster: ch02_tests --gtest_filter='StackEx2_5/*'
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>

#include "concurdl/core/errors.hpp"
#include "concurdl/locks/treiber_stack.hpp"

namespace concurdl::locks {

// head_ holds {index of the top node, tag} packed by pack_tagged(index, tag); kNil is empty.
// Every successful CAS on head_ must store tag + 1, so that a head that came back to the same
// index (ABA) no longer compares equal.
//   push(v): take a node from the pool (none free: return false), store v in it, then loop:
//            set node.next to the current head's index, CAS head_ from the head you read to
//            {your index, its tag + 1}.
//   pop():   loop: read head_; kNil means empty (nullopt); read the top node's next; CAS head_
//            to {next, tag + 1}. Only after winning, move the value out; then give the node back
//            to the pool.
// Think about: which memory orders make the value written in push() visible to the pop() that
// wins it? Why may pop() read a node's next that another thread is rewriting, and why is that
// harmless here (and with `delete`d nodes would not be)?
template <class T>
class StudentTreiberStack {
 public:
  explicit StudentTreiberStack(std::uint32_t capacity) : pool_(capacity) {}
  StudentTreiberStack(const StudentTreiberStack&) = delete;
  StudentTreiberStack& operator=(const StudentTreiberStack&) = delete;

  bool push([[maybe_unused]] T v) { CDL_TODO("2.5 Treiber stack push and pop"); }
  std::optional<T> pop() { CDL_TODO("2.5 Treiber stack push and pop"); }

  std::uint32_t capacity() const { return pool_.capacity(); }

 private:
  NodePool<T> pool_;
  alignas(kCacheLine) std::atomic<std::uint64_t> head_{pack_tagged(kNil, 0)};
};

}  // namespace concurdl::locks
