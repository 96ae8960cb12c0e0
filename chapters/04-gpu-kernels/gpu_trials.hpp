// What chapter 04's experiment files (experiments*.cpp) share: sizes, and for the GPU trials the
// L2 flush, device inputs with their host copies, the poisoned output reset and the relative
// error. Internal to the chapter: not part of its include/ API.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/gpu/device.hpp"
#include "concurdl/gpu/reference.hpp"
#include "concurdl/gpu/roofline.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

#if CONCURDL_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "concurdl/gpu/kernels.hpp"
#include "concurdl/harness/cuda_timer.hpp"
#include "concurdl/kernels/gemm.hpp"
#endif

namespace concurdl::gpu {

inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 30;
// An odd n: gcd(n, kStride) = 1 (index.hpp), so the strided copy reads every element once.
inline std::size_t odd(std::size_t n) { return n | 1; }

// ‖got − want‖ / ‖want‖ (Frobenius), in double; `want` in float or double.
template <class T>
double relative_error(const std::vector<float>& got, const std::vector<T>& want) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(err / (norm > 0 ? norm : 1));
}

// The device's roofline drawn beside a figure of `y` ("bytes_per_s", "flops_per_s"): at each
// measured size, the rate the roofline allows the work declared there (Trial::bound).
inline Model roofline_model(std::string y) {
  return Model{.label = "roofline of the device (its query and a measured copy)",
               .y = [y](const ModelPoint& p) -> std::optional<double> {
                 for (const Record* r : p.records) {
                   const auto rate = r->derived.find(y),
                              f = r->derived.find("fraction_of_roofline");
                   if (rate != r->derived.end() && f != r->derived.end() && f->second > 0)
                     return rate->second / f->second;
                 }
                 return std::nullopt;
               }};
}

#if CONCURDL_HAVE_CUDA

// Which peak bounds a trial's FLOPs: none (memory-bound), FP32, or the FP16 tensor cores'.
enum class Peak { none, fp32, tensor };

// A trial's roofline from device_roofline(): the measured copy bandwidth where its data are at
// least twice the L2 (smaller ones may be served from it, its writes above all), and the peak.
inline Trial::Bound gpu_bound(double bytes, Peak peak) {
  const GpuRoofline& r = device_roofline();
  Trial::Bound b;
  b.source = r.describe();
  if (bytes >= 2 * r.l2_bytes)
    b.bytes_per_s = r.copy_bytes_per_s;
  else
    b.source += "; bandwidth not bounded here: the data fit twice in the L2";
  if (peak == Peak::fp32) b.flops_per_s = r.fp32_flops_per_s;
  if (peak == Peak::tensor) b.flops_per_s = r.tensor_flops_per_s;
  return b;
}

// The kernel's occupancy in the trial's notes (its row's query): computed (roofline.hpp, with
// the reason) and as the runtime gives it; the peers' kernels are theirs (no query).
inline void note_occupancy(Trial& t, OccupancyQuery* query) {
  if (query == nullptr) {
    t.notes["occupancy"] = "the library chooses its kernels and their launches";
    return;
  }
  const KernelOccupancy k = query();
  const Occupancy o = occupancy(device_sm_limits(), k.resources);
  t.notes["occupancy"] = fmt::format(
      "{}; {} registers a thread, {} bytes of shared memory a block; the runtime: {} blocks",
      o.describe(), k.resources.registers, k.resources.shared_bytes, k.runtime_blocks);
}

// A buffer of twice the L2's size, written before each timed repetition: what the kernel reads
// then comes from memory, not from the cache the previous repetition filled.
struct L2Flush {
  DeviceBuffer<char> buffer;
  L2Flush() {
    int device = 0, bytes = 0;
    CDL_CUDA_CHECK(cudaGetDevice(&device));
    CDL_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device));
    buffer = DeviceBuffer<char>(2 * static_cast<std::size_t>(bytes > 0 ? bytes : 1 << 20));
  }
  void operator()() const {
    CDL_CUDA_CHECK(cudaMemsetAsync(buffer.get(), 0, buffer.size()));
    CDL_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

struct DeviceInput {
  std::vector<float> host;
  DeviceBuffer<float> device;
};

// integers: small_integers (a sum's exact check) rather than values in [-1, 1).
inline std::shared_ptr<const DeviceInput> device_input(GroupCache& cache, std::size_t n,
                                                       std::uint32_t seed, const char* key,
                                                       bool integers = false) {
  return cache.get<std::shared_ptr<const DeviceInput>>(key, [&] {
    auto in = std::make_shared<DeviceInput>();
    in->host = integers ? small_integers(n, seed) : test_values(n, seed);
    in->device = DeviceBuffer<float>(n);
    CDL_CUDA_CHECK(
        cudaMemcpy(in->device.get(), in->host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return std::shared_ptr<const DeviceInput>(std::move(in));
  });
}

// A trial's reset for a kernel that writes `out`: NaNs in it (an element the kernel fails to
// write shows), then the L2 flushed.
inline std::function<void()> poison_and_flush(std::shared_ptr<DeviceBuffer<float>> out) {
  auto flush = std::make_shared<L2Flush>();
  return [out = std::move(out), flush] {
    CDL_CUDA_CHECK(cudaMemset(out->get(), 0xff, out->size() * sizeof(float)));
    (*flush)();
  };
}

inline std::vector<float> to_host(const DeviceBuffer<float>& d) {
  std::vector<float> host(d.size());
  if (!host.empty())
    CDL_CUDA_CHECK(
        cudaMemcpy(host.data(), d.get(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// The sum of n small integers on the device, timed: `run(d_in, n, d_out, d_scratch,
// scratch_bytes)` leaves it in *d_out (CUB's scratch given, as reduce_scratch_bytes sizes it),
// checked for equality with the CPU's sum (exact in any order), n floats read, bounded by the
// copy bandwidth. ch04/reduction and exercise 4.2.
using SumRun = std::function<void(const float*, std::size_t, float*, void*, std::size_t)>;
inline Trial device_sum_trial(GroupCache& cache, std::size_t n, SumRun run) {
  const auto in = device_input(cache, n, 1, "x", true);
  auto out = std::make_shared<DeviceBuffer<float>>(1);
  const std::size_t scratch_bytes = reduce_scratch_bytes(n);
  auto scratch = std::make_shared<DeviceBuffer<char>>(scratch_bytes);
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = poison_and_flush(out);
  t.run = [=] { run(in->device.get(), n, out->get(), scratch->get(), scratch_bytes); };
  t.check = [in, out]() -> std::string {
    const float got = to_host(*out)[0];
    if (static_cast<double>(got) == sum_ref(in->host)) return "";
    return fmt::format("the sum is {}, the CPU's {} (small integers: exact in any order)", got,
                       sum_ref(in->host));
  };
  t.work.items = static_cast<double>(n);
  t.work.bytes = static_cast<double>(n) * sizeof(float);
  t.work.flops = static_cast<double>(n);
  t.bound = gpu_bound(t.work.bytes, Peak::none);
  return t;
}

// C = A B for n x n inputs on the device, timed: `run(d_a, d_b, d_c, n)`, checked against
// OpenBLAS's product on the CPU (relative error at most 1e-5; computed once per size), 2 n^3
// FLOPs on the compulsory traffic, bounded by the FP32 peak. ch04/gemm and exercise 4.1.
using GemmRun = std::function<void(const float*, const float*, float*, int)>;
inline Trial device_gemm_trial(GroupCache& cache, int n, GemmRun run) {
  struct Inputs {
    std::shared_ptr<const DeviceInput> a, b;
    std::vector<float> want;
  };
  const auto un = static_cast<std::size_t>(n);
  const Inputs* inputs = &cache.get<Inputs>("gemm_inputs", [&] {
    Inputs g{device_input(cache, un * un, 1, "a"), device_input(cache, un * un, 2, "b"), {}};
    g.want.resize(un * un);
    kernels::gemm(kernels::GemmVersion::openblas, kernels::Trans::no, kernels::Trans::no, un, un,
                  un, 1.0f, g.a->host.data(), un, g.b->host.data(), un, 0.0f, g.want.data(), un);
    return g;
  });
  auto out = std::make_shared<DeviceBuffer<float>>(un * un);
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = poison_and_flush(out);
  t.run = [=] { run(inputs->a->device.get(), inputs->b->device.get(), out->get(), n); };
  t.check = [inputs, out]() -> std::string {
    const double rel = relative_error(to_host(*out), inputs->want);
    if (rel <= 1e-5) return "";  // NaN (an element not written) fails too
    return fmt::format("relative error {:.3g} against OpenBLAS on the CPU (at most 1e-5)", rel);
  };
  const double nd = n;
  t.work.items = nd * nd;
  t.work.flops = 2.0 * nd * nd * nd;
  t.work.bytes = 3.0 * nd * nd * sizeof(float);  // compulsory traffic: A, B read, C written
  t.bound = gpu_bound(t.work.bytes, Peak::fp32);
  return t;
}

#endif

}  // namespace concurdl::gpu
