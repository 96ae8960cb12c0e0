// ch05/dp_train's projection of weak scaling to 1024 workers (train_projection.cpp): the
// samples/s that one rank's measured step plus a ring all-reduce of the gradient would give on
// the links of cost_model.hpp, drawn as models beside the measured points.
#pragma once

#include <cstddef>
#include <vector>

#include "concurdl/harness/experiment.hpp"

namespace concurdl::dp::train_projection {

inline constexpr std::size_t kWeakRows = 64;  // rows per rank, weak scaling

// The models of the projection figure: the ring on each link of cost_model.hpp, after backward
// and perfectly overlapped.
std::vector<Model> projection_models();

}  // namespace concurdl::dp::train_projection
