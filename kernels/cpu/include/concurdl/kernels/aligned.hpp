// A std::vector whose data starts on a cache line. glibc's malloc returns 16-byte aligned
// blocks (a large one sits 16 bytes into its page), so a plain std::vector<float> of weights
// puts every 64-byte vector load and store of a loop over it across two cache lines: the
// optimiser's update over the MLP's 235K parameters took 31 us from L3 that way on the Zen 5
// guest, 21 us with the arrays on cache lines (a micro-benchmark while this was written).
// Rows whose length is a multiple of 16 floats (784 = 49 x 16) then start on lines too.
//
// An allocator given a MemoryAccount (core/memory.hpp) and a kind counts every block it hands
// out and takes back there: the training stack's buffers are made with one, so a rank's memory
// is read from its buffers. A default-made one counts nothing. The account travels with a
// vector's moves and swaps (a moved buffer is freed where it was counted); a copy-assignment
// keeps the target's.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <vector>

#include "concurdl/core/memory.hpp"

namespace concurdl::kernels {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct LineAllocator {
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using is_always_equal = std::false_type;
  LineAllocator() = default;
  LineAllocator(MemoryAccount* a, MemoryKind k) : account(a), kind(k) {}
  template <class U>
  LineAllocator(const LineAllocator<U>& o)  // NOLINT: converting, as allocators are
      : account(o.account), kind(o.kind) {}
  T* allocate(std::size_t n) {
    T* p = static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLine}));
    if (account != nullptr) account->add(kind, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    if (account != nullptr) account->remove(kind, n * sizeof(T));
    ::operator delete (p, std::align_val_t{kCacheLine});
  }
  template <class U>
  bool operator==(const LineAllocator<U>& o) const {
    return account == o.account && kind == o.kind;
  }
  MemoryAccount* account = nullptr;  // null: not counted
  MemoryKind kind = MemoryKind::workspace;
};

// Frees what v holds (clear() keeps the capacity): the buffer's bytes leave its account now.
template <class T>
void release(std::vector<T, LineAllocator<T>>& v) {
  std::vector<T, LineAllocator<T>>(v.get_allocator()).swap(v);
}

template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;

}  // namespace concurdl::kernels
