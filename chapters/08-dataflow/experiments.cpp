// Chapter 08's entry in the harness; its experiments register in experiments_executors.cpp
// (ch08/executors, ch08/inter_intra), experiments_fusion.cpp (ch08/fusion),
// experiments_mlp.cpp (ch08/mlp_train) and experiments_async.cpp (ch08/eager_async); its
// exercises in exercises.cpp.
#include "concurdl/harness/experiment.hpp"

namespace {
const bool registered = concurdl::register_chapter(
    {"08-dataflow", "Dataflow graphs: eager vs graph execution, parallel executors, fusion"});
}  // namespace
