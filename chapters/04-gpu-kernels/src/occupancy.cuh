// What each .cu's *_occupancy() asks the runtime about one of its kernels, at its launch's block
// size and dynamic shared memory.
#pragma once

#include "concurdl/gpu/kernels.hpp"

namespace concurdl::gpu {

template <class Kernel>
KernelOccupancy query_occupancy(Kernel* kernel, int threads, int dynamic_shared = 0) {
  cudaFuncAttributes a{};
  CDL_CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
  KernelOccupancy o;
  o.resources.threads = threads;
  o.resources.registers = a.numRegs;
  o.resources.shared_bytes = static_cast<int>(a.sharedSizeBytes) + dynamic_shared;
  CDL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o.runtime_blocks, kernel, threads,
                                                               dynamic_shared));
  return o;
}

}  // namespace concurdl::gpu
