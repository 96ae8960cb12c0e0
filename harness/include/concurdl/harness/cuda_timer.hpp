// Timing device work (CUDA builds only: include it from code built with REQUIRES/OPTIONAL cuda).
// A CPU clock around a kernel launch measures the launch, not the kernel: the launch returns
// at once. cuda_event_timer records an event on `stream` before and after the trial's run and
// waits for the second, so the time is the device's, and the trial returns only when its device
// work is done.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "concurdl/core/cuda_device.hpp"
#include "concurdl/harness/experiment.hpp"

namespace concurdl {

// Throws LibraryError when the events cannot be created (no device, for one).
std::shared_ptr<Timer> cuda_event_timer(cudaStream_t stream = nullptr);

}  // namespace concurdl
