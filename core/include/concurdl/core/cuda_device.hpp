// Whether a CUDA device can be used here, for code that runs on one (chapter 04's kernels, the
// CUDA timer) and for tests that skip without one. Needs no CUDA header: a build without CUDA
// says so.
#pragma once

#include <string>

namespace concurdl {

// Whether a CUDA device can be used here, and if not why ("no CUDA device: this machine has no
// NVIDIA GPU (no device, no driver)", or the runtime's own words, error 35 on a machine whose
// driver is older than the runtime).
bool cuda_device_available(std::string* why = nullptr);

}  // namespace concurdl
