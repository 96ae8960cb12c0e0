// Hardware facts (hardware.hpp).
#include "concurdl/core/hardware.hpp"

#include <sched.h>

#include <thread>

namespace concurdl {

unsigned hardware_threads() {
  // The CPUs this process may run on (taskset, cgroups' cpusets, a batch scheduler's binding),
  // not every CPU the machine has.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return static_cast<unsigned>(CPU_COUNT(&set));
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

CpuBinding::CpuBinding(unsigned index) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;
  int chosen = -1;
  unsigned seen = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    previous_.push_back(c);
    if (seen++ == index) chosen = c;
  }
  if (chosen < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(chosen, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) cpu_ = chosen;
}

CpuBinding::~CpuBinding() {
  if (cpu_ < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int c : previous_) CPU_SET(c, &set);
  sched_setaffinity(0, sizeof set, &set);  // a mask the thread had: the system accepted it once
}

}  // namespace concurdl
