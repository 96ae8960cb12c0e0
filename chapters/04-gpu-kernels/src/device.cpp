// gpu_unavailable (device.hpp).
#include "concurdl/gpu/device.hpp"

#if CONCURDL_HAVE_CUDA
#include "concurdl/harness/cuda_timer.hpp"
#endif

namespace concurdl::gpu {

std::string gpu_unavailable() {
#if CONCURDL_HAVE_CUDA
  std::string why;
  return cuda_device_available(&why) ? std::string() : why;
#else
  return "built without CUDA (nvcc was not found when the build was configured)";
#endif
}

}  // namespace concurdl::gpu
