// Two facts about the hardware that every spinning or padding piece of the suite needs, written
// once: the cache-line size to pad to, and how to tell the core "I am spinning".
#pragma once

#include <cstddef>
#include <thread>

namespace concurdl {

// A cache line is 64 bytes on current x86 and most Arm cores. std::hardware_destructive_
// interference_size says the same, but GCC warns that its value may change between compiler
// versions and clang 14 with libstdc++ does not provide it. (Intel's adjacent-line prefetcher
// pairs lines, so some codebases pad to 128.)
inline constexpr std::size_t kCacheLine = 64;

// Tells the core "I am spinning". On x86, PAUSE lets the sibling hyperthread run, saves power,
// and avoids the memory-order machine clear when the awaited line finally changes (without it,
// leaving a spin loop costs a pipeline flush). Where there is no pause instruction, yield.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

}  // namespace concurdl
