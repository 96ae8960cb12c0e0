// Chapter 08's registrations with the harness. So far the chapter itself; its experiments
// (executors against oneTBB's flow graph, fusion against the bytes model) come next.
#include "concurdl/harness/experiment.hpp"

namespace {

const bool registered_chapter = concurdl::register_chapter(
    {"08-dataflow", "Dataflow graphs: eager vs graph execution, parallel executors, fusion"});

}  // namespace
