// The steady clock every timing in the project reads, and the one way to read an elapsed time.
#pragma once

#include <chrono>

namespace concurdl {

// Seconds from `t` to now on the steady clock (never the wall clock: it does not jump).
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace concurdl
