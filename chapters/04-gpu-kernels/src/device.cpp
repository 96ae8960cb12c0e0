// gpu_unavailable, device_roofline, device_sm_limits (device.hpp).
#include "concurdl/gpu/device.hpp"

#include <algorithm>
#include <stdexcept>

#include "concurdl/core/errors.hpp"

#if CONCURDL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "concurdl/core/cuda_device.hpp"
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

#if CONCURDL_HAVE_CUDA

namespace {

int attribute(cudaDeviceAttr what, int device) {
  int v = 0;
  CDL_CUDA_CHECK(cudaDeviceGetAttribute(&v, what, device));
  return v;
}

// Bytes read + written per second by cudaMemcpy device to device: the best of ten.
double measure_copy_bandwidth() {
  std::size_t free_bytes = 0, total = 0;
  CDL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  const std::size_t bytes = std::min<std::size_t>(std::size_t{256} << 20, free_bytes / 4);
  void *src = nullptr, *dst = nullptr;
  CDL_CUDA_CHECK(cudaMalloc(&src, bytes));
  CDL_CUDA_CHECK(cudaMalloc(&dst, bytes));
  cudaEvent_t start = nullptr, stop = nullptr;
  CDL_CUDA_CHECK(cudaEventCreate(&start));
  CDL_CUDA_CHECK(cudaEventCreate(&stop));
  CDL_CUDA_CHECK(cudaMemset(src, 1, bytes));
  CDL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));  // warm-up
  float best_ms = 0;
  for (int i = 0; i < 10; ++i) {
    CDL_CUDA_CHECK(cudaEventRecord(start));
    CDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    CDL_CUDA_CHECK(cudaEventRecord(stop));
    CDL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CDL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (i == 0 || ms < best_ms) best_ms = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(src);
  cudaFree(dst);
  return best_ms > 0 ? 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3) : 0;
}

}  // namespace

const GpuRoofline& device_roofline() {
  static const GpuRoofline r = [] {
    if (const std::string why = gpu_unavailable(); !why.empty()) throw UsageError(why);
    int d = 0;
    CDL_CUDA_CHECK(cudaGetDevice(&d));
    cudaDeviceProp prop{};
    CDL_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    // CUDA 13 dropped the clock fields of cudaDeviceProp: the attributes remain (kHz).
    const double clock_hz = 1e3 * attribute(cudaDevAttrClockRate, d);
    const double mem_hz = 1e3 * attribute(cudaDevAttrMemoryClockRate, d);
    const double bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, d);
    return make_roofline(prop.name, prop.major, prop.minor, prop.multiProcessorCount, clock_hz,
                         static_cast<double>(prop.l2CacheSize), 2.0 * mem_hz * bus_bits / 8.0,
                         measure_copy_bandwidth());
  }();
  return r;
}

SmLimits device_sm_limits() {
  if (const std::string why = gpu_unavailable(); !why.empty()) throw UsageError(why);
  int d = 0;
  CDL_CUDA_CHECK(cudaGetDevice(&d));
  const int major = attribute(cudaDevAttrComputeCapabilityMajor, d);
  const int minor = attribute(cudaDevAttrComputeCapabilityMinor, d);
  SmLimits sm;
  try {
    sm = sm_limits(major, minor);  // for the allocation units
  } catch (const std::invalid_argument&) {
    sm = sm_limits(8, 0);
  }
  sm.max_threads = attribute(cudaDevAttrMaxThreadsPerMultiProcessor, d);
  sm.max_blocks = attribute(cudaDevAttrMaxBlocksPerMultiprocessor, d);
  sm.registers = attribute(cudaDevAttrMaxRegistersPerMultiprocessor, d);
  sm.shared_bytes = attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, d);
  sm.reserved_shared_per_block = attribute(cudaDevAttrReservedSharedMemoryPerBlock, d);
  sm.warp_size = attribute(cudaDevAttrWarpSize, d);
  return sm;
}

#else

const GpuRoofline& device_roofline() { throw UsageError(gpu_unavailable()); }
SmLimits device_sm_limits() { throw UsageError(gpu_unavailable()); }

#endif

}  // namespace concurdl::gpu
