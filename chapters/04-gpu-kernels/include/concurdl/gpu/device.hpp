// Whether this machine can run chapter 04's GPU side, in every build.
#pragma once

#include <string>

namespace concurdl::gpu {

// "" when a CUDA device can be used; else why not: "built without CUDA (nvcc was not found when
// the build was configured)", or the CUDA runtime's own reason ("no CUDA device: CUDA driver
// version is insufficient for CUDA runtime version": error 35 where there is no driver at all,
// which is what a machine without a GPU says, not "no device").
std::string gpu_unavailable();

}  // namespace concurdl::gpu
