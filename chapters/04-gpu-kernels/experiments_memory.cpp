// Chapter 04's experiments on memory-bound kernels. The GPU ones run where a CUDA device is
// (and say why not elsewhere: Experiment::unavailable); the CPU one everywhere:
//   ch04/reduction      the sum of n floats: v1-v6 and CUB (kernel_tables.hpp), GB/s read
//   ch04/memory         vector add (grid-stride), a coalesced and a strided copy: GB/s
//   ch04/transpose      naive, shared-memory tile, padded tile: GB/s
//   ch04/cpu_reference  the same operations' CPU references on one thread, against the CPU's
//                       measured memory bandwidth (the CPU roofline)
// experiments_gemm.cpp has the GEMMs, experiments_streams.cpp the host-device transfers. Every
// GPU trial is timed with CUDA events, the L2 flushed before each repetition, and its result
// checked against the CPU reference after the warm-up and after the timed repetitions.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/gpu/device.hpp"
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernel_tables.hpp"
#include "concurdl/gpu/reference.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "gpu_trials.hpp"

#if CONCURDL_HAVE_CUDA
#include "concurdl/harness/cuda_timer.hpp"
#endif

namespace concurdl::gpu {

namespace {

#if CONCURDL_HAVE_CUDA

Trial reduction_trial(const Params& p, GroupCache& cache) {
  const ReduceKernel& k = reduce_kernels().find(p);
  Trial t = device_sum_trial(
      cache, static_cast<std::size_t>(param_int(p, "n")),
      [launch = k.launch](const float* in, std::size_t n, float* out, void* scratch,
                          std::size_t bytes) { launch(in, n, out, scratch, bytes, nullptr); });
  note_occupancy(t, k.occupancy);
  return t;
}

Trial memory_trial(const Params& p, GroupCache& cache) {
  const MemoryKernel& k = memory_kernels().find(p);
  const std::size_t n = odd(static_cast<std::size_t>(param_int(p, "n")));
  const auto a = device_input(cache, n, 1, "a");
  const auto b = device_input(cache, n, 2, "b");
  auto out = std::make_shared<DeviceBuffer<float>>(n);
  std::vector<float> want(n);
  k.reference(a->host, b->host, want);
  auto expected = std::make_shared<const std::vector<float>>(std::move(want));
  const double bytes = k.floats_moved * static_cast<double>(n) * sizeof(float);
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = poison_and_flush(out);
  t.run = [launch = k.launch, a, b, out, n] {
    launch(a->device.get(), b->device.get(), out->get(), n, nullptr);
  };
  t.check = [out, expected]() -> std::string {
    const std::vector<float> got = to_host(*out);
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &(*expected)[i], sizeof(float)) != 0)
        return fmt::format("element {} is {}, the CPU reference gives {}", i, got[i],
                           (*expected)[i]);
    return "";
  };
  t.work.items = static_cast<double>(n);
  t.work.bytes = bytes;
  t.bound = gpu_bound(bytes, Peak::none);
  note_occupancy(t, k.occupancy);
  return t;
}

Trial transpose_trial(const Params& p, GroupCache& cache) {
  const TransposeKernel& k = transpose_kernels().find(p);
  const int n = static_cast<int>(param_int(p, "n"));
  const int rows = n, cols = n + 1;  // not square: a wrong index shows
  const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const auto in = device_input(cache, count, 4, "in");
  auto out = std::make_shared<DeviceBuffer<float>>(count);
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = poison_and_flush(out);
  t.run = [launch = k.launch, in, out, rows, cols] {
    launch(in->device.get(), out->get(), rows, cols, nullptr);
  };
  t.check = [in, out, rows, cols]() -> std::string {
    const std::vector<float> got = to_host(*out);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        if (std::memcmp(&got[static_cast<std::size_t>(c) * rows + r],
                        &in->host[static_cast<std::size_t>(r) * cols + c], sizeof(float)) != 0)
          return fmt::format("out[{}][{}] is not in[{}][{}]", c, r, r, c);
    return "";
  };
  t.work.items = static_cast<double>(count);
  t.work.bytes = 2.0 * static_cast<double>(count) * sizeof(float);
  t.bound = gpu_bound(t.work.bytes, Peak::none);
  note_occupancy(t, k.occupancy);
  return t;
}

#else

Trial reduction_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial memory_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial transpose_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }

#endif

const bool registered_reduction = register_experiment({
    .id = "ch04/reduction",
    .chapter = "04-gpu-kernels",
    .title = "Sum of n floats on the GPU: six versions and CUB, bytes read per second",
    .axes = {reduce_kernels().axis("ch04/reduction"),
             {.name = "n",
              .values = {"16M", "64M", "256M"},
              .quick = {"64M"},
              .kind = AxisKind::size,
              .max = kMaxElements,
              .smoke = {"1M"}}},
    .baseline = {{"variant", "cub"}},
    .interleave = {"variant"},
    .repetitions = 21,
    .warmup = 2,
    .prepare = reduction_trial,
    .figures = {{.id = "bandwidth",
                 .title = "Reduction: bytes read per second, by version (CUB the peer)",
                 .kind = FigureKind::lines,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .log_x = true,
                 .y_label = "bytes/s read",
                 .models = {roofline_model("bytes_per_s")}}},
    .claims = {{.id = "v5_near_cub",
                // A magnitude: a ratio against a peer library, one H200 run.
                .statement = "The bytes/s of several elements per thread and one atomic per block "
                             "(v5) over CUB's, the worst over n (CUB loads 16 bytes a thread at a "
                             "time and keeps more of them in flight)",
                .select = {{"variant", "v5_multi_element"}},
                .field = "bytes_per_s",
                .versus = {{"variant", "cub"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::memory_bandwidth, ClaimCause::peer_kernels},
                .unit = "x",
                .needs_gpu = true},
               {.id = "vectorized_near_cub",
                // A magnitude: a ratio against a peer library's kernels on one device.
                .statement = "The bytes/s of v5 reading 16 bytes a load, four loads in flight a "
                             "thread (v6), over CUB's, the worst over n",
                .select = {{"variant", "v6_vectorized"}},
                .field = "bytes_per_s",
                .versus = {{"variant", "cub"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::memory_bandwidth, ClaimCause::peer_kernels},
                .unit = "x",
                .needs_gpu = true},
               {.id = "atomics_serialise",
                // A magnitude: one H200 run; the rate of atomics on one address is the device's.
                .statement =
                    "How many times slower one atomic per element on one address (v1) is than v5",
                .select = {{"variant", "v5_multi_element"}},
                .field = "bytes_per_s",
                .versus = {{"variant", "v1_atomic_global"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::memory_bandwidth, ClaimCause::caches},
                .unit = "x",
                .needs_gpu = true}},
    .unavailable = gpu_unavailable,
});

const bool registered_memory = register_experiment({
    .id = "ch04/memory",
    .chapter = "04-gpu-kernels",
    .title = "Memory access on the GPU: vector add (grid-stride), coalesced and strided copies",
    .axes = {memory_kernels().axis("ch04/memory"),
             {.name = "n",
              .values = {"16M", "64M", "256M"},
              .quick = {"64M"},
              .kind = AxisKind::size,
              .max = kMaxElements,
              .smoke = {"1M"}}},
    .baseline = {{"variant", "copy_coalesced"}},
    .interleave = {"variant"},
    .repetitions = 21,
    .warmup = 2,
    .prepare = memory_trial,
    .figures = {{.id = "bandwidth",
                 .title = "Bytes moved per second: coalesced vs strided access",
                 .kind = FigureKind::lines,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .log_x = true,
                 .y_label = "bytes/s (declared traffic / time)",
                 .models = {roofline_model("bytes_per_s")}}},
    .claims =
        {{.id = "coalesced_beats_strided",
          // A magnitude: one H200 run; how much of each 32-byte sector a strided warp wastes
          // depends on the device's caches.
          .statement =
              "A coalesced copy's bytes/s over one whose neighbouring threads read 32 floats apart",
          .select = {{"variant", "copy_coalesced"}},
          .field = "bytes_per_s",
          .versus = {{"variant", "copy_strided"}},
          .kind = Claim::Kind::magnitude,
          .causes = {ClaimCause::memory_bandwidth, ClaimCause::caches},
          .unit = "x",
          .needs_gpu = true},
         {.id = "copy_near_roofline",
          // A magnitude: one H200 run; the loads in flight a device needs to reach its bandwidth
          // are the device's.
          .statement = "A grid-stride coalesced copy's bytes/s, one 4-byte load in flight per "
                       "thread, as a fraction of the device's measured copy bandwidth at n = 64M",
          .select = {{"variant", "copy_coalesced"}, {"n", "64M"}},
          .field = "fraction_of_roofline",
          .kind = Claim::Kind::magnitude,
          .causes = {ClaimCause::memory_bandwidth},
          .needs_gpu = true}},
    .unavailable = gpu_unavailable,
});

const bool registered_transpose = register_experiment({
    .id = "ch04/transpose",
    .chapter = "04-gpu-kernels",
    .title = "Transpose on the GPU: naive, through a shared-memory tile, through a padded tile",
    .axes = {transpose_kernels().axis("ch04/transpose"),
             {.name = "n",
              .values = {"2048", "4096", "8192"},
              .quick = {"4096"},
              .kind = AxisKind::size,
              .max = 1 << 15,
              .smoke = {"256"}}},
    .baseline = {{"variant", "naive"}},
    .interleave = {"variant"},
    .repetitions = 21,
    .warmup = 2,
    .prepare = transpose_trial,
    .figures = {{.id = "bandwidth",
                 .title = "Transpose (n x n+1): bytes moved per second",
                 .kind = FigureKind::lines,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .log_x = true,
                 .y_label = "bytes/s (read + written / time)",
                 .models = {roofline_model("bytes_per_s")}}},
    .unavailable = gpu_unavailable,
});

// ---- ch04/cpu_reference: the references on the CPU, against its memory bandwidth ------------

Trial cpu_trial(const Params& p, GroupCache& cache) {
  const std::string op = param_str(p, "variant");
  const std::size_t n = odd(static_cast<std::size_t>(param_int(p, "n")));
  struct Inputs {
    std::vector<float> a, b, ints;
  };
  const auto& in = cache.get<Inputs>("inputs", [&] {
    return Inputs{test_values(n, 1), test_values(n, 2), small_integers(n, 3)};
  });
  struct Arrays {
    const Inputs* in;
    std::vector<float> out;  // this configuration's own (the variants run interleaved)
  };
  auto arr = std::make_shared<Arrays>(Arrays{&in, std::vector<float>(n)});
  auto sum = std::make_shared<float>(0.0f);
  Trial t;
  double bytes = 0;
  if (op == "sum") {
    t.run = [arr, sum] { *sum = sum_float(arr->in->ints); };
    t.check = [arr, sum]() -> std::string {
      return static_cast<double>(*sum) == sum_ref(arr->in->ints)
                 ? ""
                 : fmt::format("the sum is {}, in double {}", *sum, sum_ref(arr->in->ints));
    };
    bytes = static_cast<double>(n) * sizeof(float);
  } else if (op == "vector_add") {
    t.run = [arr] { vector_add_ref(arr->in->a, arr->in->b, arr->out); };
    t.check = [arr]() -> std::string {
      for (std::size_t i = 0; i < arr->out.size(); ++i)
        if (arr->out[i] != arr->in->a[i] + arr->in->b[i])
          return fmt::format("element {} is wrong", i);
      return "";
    };
    bytes = 3.0 * static_cast<double>(n) * sizeof(float);
  } else if (op == "copy_strided") {
    t.run = [arr] { copy_strided_ref(arr->in->a, arr->out, kStride); };
    t.check = [arr]() -> std::string {
      const std::size_t m = arr->out.size();
      for (std::size_t i = 0; i < m; ++i)
        if (arr->out[i] != arr->in->a[strided_source(i, kStride, m)])
          return fmt::format("element {} is wrong", i);
      return "";
    };
    bytes = 2.0 * static_cast<double>(n) * sizeof(float);
  } else {
    throw UsageError(
        fmt::format("parameter 'variant': '{}' is not sum, vector_add or copy_strided", op));
  }
  t.reset = [arr] { std::fill(arr->out.begin(), arr->out.end(), -1.0f); };
  t.work.items = static_cast<double>(n);
  t.work.bytes = bytes;
  return t;
}

const bool registered_cpu = register_experiment({
    .id = "ch04/cpu_reference",
    .chapter = "04-gpu-kernels",
    .title = "The kernels' CPU references on one thread, against the CPU's memory bandwidth",
    .axes = {{.name = "variant", .values = {"sum", "vector_add", "copy_strided"}},
             {.name = "n",
              .values = {"64M"},
              .quick = {"16M"},
              .kind = AxisKind::size,
              .max = kMaxElements,
              .smoke = {"64K"}}},
    .baseline = {{"variant", "sum"}},
    .ceiling = Ceiling::mem_bandwidth,
    .interleave = {"variant"},
    .repetitions = 9,
    .prepare = cpu_trial,
    .figures = {{.id = "bandwidth",
                 .title = "CPU references: bytes moved per second (one thread)",
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .y_label = "bytes/s (declared traffic / time)"}},
});

}  // namespace

}  // namespace concurdl::gpu
