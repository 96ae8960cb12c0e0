// Facts about the hardware that the suite needs in many places, written once: how many hardware
// threads this process may use, the cache-line size to pad to, and how to tell the core "I am
// spinning".
#pragma once

#include <cstddef>
#include <thread>
#include <vector>

namespace concurdl {

// The hardware threads this process may run on: the size of its CPU affinity mask (taskset,
// cgroups' cpusets, a batch scheduler's binding), not every CPU the machine has. At least 1.
unsigned hardware_threads();

// Binds the calling thread to the `index`-th CPU of those it may run on (its affinity mask, in
// the mask's order), as a launcher binds each rank of a job to a CPU of its own (Open MPI's
// `--bind-to hwthread`, or `--bind-to core` where a core runs one): threads it starts afterwards
// inherit the binding. The mask it had is back when the scope ends. Not bound (cpu() is -1, the
// mask unchanged) where the mask holds no such CPU or the system refuses.
class CpuBinding {
 public:
  explicit CpuBinding(unsigned index);
  ~CpuBinding();
  CpuBinding(const CpuBinding&) = delete;
  CpuBinding& operator=(const CpuBinding&) = delete;
  // The operating system's number of the CPU bound to, or -1.
  int cpu() const { return cpu_; }

 private:
  std::vector<int> previous_;  // the mask before, as CPU numbers
  int cpu_ = -1;
};

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
