// Did OpenMP really run the team it was asked for? num_threads(n) is a request: with
// OMP_DYNAMIC=true, OMP_THREAD_LIMIT or a nested region the runtime may give fewer threads, and
// a "4-thread" measurement taken on 2 would be mislabelled. The OpenMP variants' checks call
// this after timing: it opens a region with the same request under the same settings (the
// internal control variables that decide the team size) and reports a shortfall.
#pragma once

#include <omp.h>

#include <string>

namespace concurdl::threads {

// "" when a region asking for `threads` gets them, else what went wrong.
inline std::string omp_team_shortfall(int threads) {
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  if (team == threads) return "";
  return "OpenMP ran a team of " + std::to_string(team) + " threads, not " +
         std::to_string(threads) + " (OMP_DYNAMIC, OMP_THREAD_LIMIT or a nested region?)";
}

}  // namespace concurdl::threads
