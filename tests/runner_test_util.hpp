// What the runner's tests share: the configurations of one registered experiment.
#pragma once

#include <string>
#include <vector>

#include "concurdl/harness/runner.hpp"

namespace concurdl::test {

// The sweep of experiment `id` under `opt`, without the progress line.
inline std::vector<Config> configs_of(const std::string& id, RunOptions opt = {}) {
  opt.progress = false;
  return expand({find_experiment(id)}, opt);
}

}  // namespace concurdl::test
