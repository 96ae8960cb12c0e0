// The figures of a pipeline trainer's epoch that depend neither on time nor on the process: the
// memory its stages' accounts counted, the activation counts and the model (test_pipeline_trainer
// and mpi_tests hold a trainer of one stage a rank to the threaded one's with them).
#pragma once

#include <map>
#include <string>

namespace concurdl::mp::testing {

inline std::map<std::string, double> counted(const std::map<std::string, double>& metrics) {
  std::map<std::string, double> out;
  for (const auto& [k, v] : metrics)
    if (k.find("seconds") == std::string::npos && k.find("resident") == std::string::npos &&
        k != "bubble_fraction")
      out[k] = v;
  return out;
}

}  // namespace concurdl::mp::testing
