// Chapter 06's registrations with the harness. So far only the chapter itself: its experiments
// (tensor-parallel layer time and its communication share, pipeline schedules and their bubble)
// come with the pipeline code, on the layers of include/concurdl/mp/.
#include "concurdl/harness/experiment.hpp"

namespace {

const bool registered_chapter = concurdl::register_chapter(
    {"06-model-parallel", "Tensor and pipeline parallelism: Megatron's split layers, GPipe, 1F1B"});

}  // namespace
