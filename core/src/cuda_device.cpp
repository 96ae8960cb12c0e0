// Whether a CUDA device can be used here (cuda_device.hpp).
#include "concurdl/core/cuda_device.hpp"

#include <filesystem>

#ifdef CONCURDL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace concurdl {

#ifdef CONCURDL_WITH_CUDA
bool cuda_device_available(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  // Without a GPU the runtime says 35 (insufficient driver), not 100 (no device): either way.
  // Said plainly where the machine simply has no NVIDIA driver (no /proc/driver/nvidia): the
  // runtime's own words, "CUDA driver version is insufficient", read as a version problem.
  if (rc != cudaSuccess || n == 0) {
    const bool driver = std::filesystem::exists("/proc/driver/nvidia/version");
    if (why) {
      if (n == 0 && rc == cudaSuccess)
        *why = "no CUDA device";
      else if (!driver && (rc == cudaErrorInsufficientDriver || rc == cudaErrorNoDevice))
        *why = "no CUDA device: this machine has no NVIDIA GPU (no device, no driver)";
      else
        *why = std::string("no CUDA device: ") + cudaGetErrorString(rc);
    }
    return false;
  }
  return true;
}
#else
bool cuda_device_available(std::string* why) {
  if (why) *why = "built without CUDA (nvcc was not found when the build was configured)";
  return false;
}
#endif

}  // namespace concurdl
