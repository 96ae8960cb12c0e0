// CUDA events as a Timer (cuda_timer.hpp).
#include "concurdl/harness/cuda_timer.hpp"

#include <cuda_runtime.h>

#include <filesystem>
#include <string>

#include "concurdl/harness/errors.hpp"

namespace concurdl {

namespace {

class CudaEventTimer final : public Timer {
 public:
  explicit CudaEventTimer(cudaStream_t stream) : stream_(stream) {
    CDL_CUDA_CHECK(cudaEventCreate(&start_));
    if (const cudaError_t rc = cudaEventCreate(&stop_); rc != cudaSuccess) {
      cudaEventDestroy(start_);
      CDL_CUDA_CHECK(rc);
    }
  }
  ~CudaEventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  std::string name() const override { return "cuda_events"; }
  double time(const std::function<void()>& run) override {
    CDL_CUDA_CHECK(cudaEventRecord(start_, stream_));
    run();
    CDL_CUDA_CHECK(cudaGetLastError());  // a bad launch inside run()
    CDL_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    CDL_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CDL_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) / 1e3;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

std::shared_ptr<Timer> cuda_event_timer(cudaStream_t stream) {
  return std::make_shared<CudaEventTimer>(stream);
}

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

}  // namespace concurdl
