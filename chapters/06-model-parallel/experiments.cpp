// Chapter 06's entry in the harness; its experiments register in experiments_pipeline.cpp
// (ch06/pipeline) and experiments_tensor.cpp (ch06/tensor_parallel); its exercises in
// exercises.cpp, its training mode in train_mode.cpp.
#include "concurdl/harness/experiment.hpp"

namespace {
const bool registered = concurdl::register_chapter(
    {"06-model-parallel", "Tensor and pipeline parallelism: Megatron's split layers, GPipe, 1F1B"});
}  // namespace
