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

}  // namespace concurdl
