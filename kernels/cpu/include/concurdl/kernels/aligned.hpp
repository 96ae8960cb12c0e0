// A std::vector whose data starts on a cache line. glibc's malloc returns 16-byte aligned
// blocks (a large one sits 16 bytes into its page), so a plain std::vector<float> of weights
// puts every 64-byte vector load and store of a loop over it across two cache lines: the
// optimiser's update over the MLP's 235K parameters took 31 us from L3 that way on the Zen 5
// guest, 21 us with the arrays on cache lines (a micro-benchmark while this was written).
// Rows whose length is a multiple of 16 floats (784 = 49 x 16) then start on lines too.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace concurdl::kernels {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) {}  // NOLINT: converting, as allocators are
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const {
    return true;
  }
};

template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;

}  // namespace concurdl::kernels
