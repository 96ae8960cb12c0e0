// Whether this machine can run chapter 04's GPU side, and what its GPU can do, in every build.
#pragma once

#include <string>

#include "concurdl/gpu/roofline.hpp"

namespace concurdl::gpu {

// "" when a CUDA device can be used; else why not: "built without CUDA (nvcc was not found when
// the build was configured)", or the CUDA runtime's own reason ("no CUDA device: CUDA driver
// version is insufficient for CUDA runtime version": error 35 where there is no driver at all,
// which is what a machine without a GPU says, not "no device").
std::string gpu_unavailable();

// The current device's roofline (roofline.hpp): its SMs, clock, L2 and memory from
// cudaDeviceGetAttribute, and its copy bandwidth measured once per process: the best of ten
// device-to-device copies of 256 MiB (a quarter of the free memory where that is less),
// counting the bytes read and written. Throws UsageError (gpu_unavailable's reason) without a
// device.
const GpuRoofline& device_roofline();
// What one SM of the current device holds (its attributes; the allocation units are
// sm_limits()'s for its compute capability, or theirs for sm_80 where it has none on record).
SmLimits device_sm_limits();

}  // namespace concurdl::gpu
