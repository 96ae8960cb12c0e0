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

#include <sys/mman.h>

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

// An allocator for a large buffer read at random places, such as the data set a batch is
// gathered from: a block of 2 MiB or more starts on a 2 MiB boundary, and Linux is asked to back
// its whole 2 MiB pages with huge pages (madvise MADV_HUGEPAGE, before the vector writes them,
// though memory glibc reuses from its heap may already be resident in small pages: a hint, its
// result not checked; with transparent huge pages "always" Linux tries them anyway,
// with "never", or a kernel without them, it gives none), so that rows far apart do not each
// need another 4 KiB page's translation. Smaller blocks start on a cache line. The gather of a
// batch of 64 rows from the 10 MB of 12 800 images took 6.0-6.5 us a step with 4 KiB pages, 5.4-5.5
// us on huge pages (Zen 5 guest, "madvise" mode, 1 thread: kernels/train_breakdown's gather, three
// interleaved pairs).
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: converting, as allocators are
  static std::size_t alignment(std::size_t bytes) {
    return bytes >= kHugePage ? kHugePage : kCacheLine;
  }
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T), align = alignment(bytes);
    T* p = static_cast<T*>(::operator new (bytes, std::align_val_t{align}));
    if (align == kHugePage) madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // a hint
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    ::operator delete (p, std::align_val_t{alignment(n * sizeof(T))});
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace concurdl::kernels
