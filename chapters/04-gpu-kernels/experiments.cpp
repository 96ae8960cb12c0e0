// Chapter 04's entry in the harness; its experiments register in experiments_memory.cpp (the
// memory-bound kernels and their CPU references), experiments_gemm.cpp (the GEMMs) and
// experiments_streams.cpp (host-device transfers); its exercises in exercises.cpp.
#include "concurdl/harness/experiment.hpp"

namespace {
const bool registered = concurdl::register_chapter(
    {"04-gpu-kernels", "GPU kernels in CUDA: reductions, memory access, the GPU roofline"});
}  // namespace
