// CUDA events as a Timer (cuda_timer.hpp).
#include "concurdl/harness/cuda_timer.hpp"

#include <cuda_runtime.h>

#include <string>

#include "concurdl/core/errors.hpp"

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

}  // namespace concurdl
