// Chapter 04's experiments. The GPU ones run where a CUDA device is (and say why not elsewhere:
// Experiment::unavailable); the CPU one everywhere:
//   ch04/reduction      the sum of n floats: v1-v5 (kernels.hpp) and CUB, GB/s read
//   ch04/memory         vector add (grid-stride), a coalesced and a strided copy: GB/s
//   ch04/transpose      naive, shared-memory tile, padded tile: GB/s
//   ch04/streams        copy in, kernel, copy out: pageable vs pinned, one stream vs chunks on
//                       several (timed on the host: the whole round trip)
//   ch04/gemm           square single-precision GEMM: v1-v4 (kernels.hpp) and cuBLAS, FLOP/s
//   ch04/gemm_mixed     FP16 inputs, FP32 accumulation: WMMA (v5) and cublasGemmEx, FLOP/s and
//                       the relative error against the FP32 product (metric rel_error)
//   ch04/cpu_reference  the same operations' CPU references on one thread, against the CPU's
//                       measured memory bandwidth (the CPU roofline)
// Every GPU trial is timed with CUDA events, the L2 flushed before each repetition, and its
// result checked against the CPU reference after the warm-up and after the timed repetitions.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/gpu/device.hpp"
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/reference.hpp"
#include "concurdl/harness/errors.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"

#if CONCURDL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "concurdl/gpu/kernels.hpp"
#include "concurdl/harness/cuda_timer.hpp"
#endif

namespace concurdl::gpu {

namespace {

const bool registered_chapter = register_chapter(
    {"04-gpu-kernels", "GPU kernels in CUDA: reductions, memory access, the GPU roofline"});

constexpr std::int64_t kMaxElements = std::int64_t{1} << 30;
constexpr std::size_t kStride = 32;  // floats between the reads of neighbouring threads

const std::vector<std::string> kReduceVariants = {"v1_atomic_global", "v2_tree_divergent",
                                                  "v3_sequential",    "v4_warp_shuffle",
                                                  "v5_multi_element", "cub"};

// An odd n: gcd(n, kStride) = 1, so the strided copy reads every element once.
std::size_t odd(std::size_t n) { return n | 1; }

#if CONCURDL_HAVE_CUDA

Reduce parse_reduce(const std::string& s) {
  for (int v = 0; v <= static_cast<int>(Reduce::cub); ++v)
    if (reduce_name(static_cast<Reduce>(v)) == s) return static_cast<Reduce>(v);
  throw UsageError(fmt::format("parameter 'variant': '{}' is not a reduction version", s));
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
std::shared_ptr<const DeviceInput> device_input(GroupCache& cache, std::size_t n,
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

Trial reduction_trial(const Params& p, GroupCache& cache) {
  const Reduce v = parse_reduce(param_str(p, "variant"));
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  const auto in = device_input(cache, n, 1, "x", true);
  const auto flush = std::make_shared<L2Flush>();
  auto out = std::make_shared<DeviceBuffer<float>>(1);
  const std::size_t scratch_bytes = reduce_scratch_bytes(n);
  auto scratch = std::make_shared<DeviceBuffer<char>>(scratch_bytes);
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = [flush, out] {
    const float nan = std::nanf("");
    CDL_CUDA_CHECK(cudaMemcpy(out->get(), &nan, sizeof nan, cudaMemcpyHostToDevice));
    (*flush)();
  };
  t.run = [=] {
    reduce_sum(v, in->device.get(), n, out->get(), scratch->get(), scratch_bytes, nullptr);
  };
  t.check = [in, out]() -> std::string {
    float got = 0;
    CDL_CUDA_CHECK(cudaMemcpy(&got, out->get(), sizeof got, cudaMemcpyDeviceToHost));
    if (static_cast<double>(got) == sum_ref(in->host)) return "";  // exact: small integers
    return fmt::format("the sum is {}, the CPU's {} (small integers: exact in any order)", got,
                       sum_ref(in->host));
  };
  t.work.items = static_cast<double>(n);
  t.work.bytes = static_cast<double>(n) * sizeof(float);
  t.work.flops = static_cast<double>(n);
  return t;
}

Trial memory_trial(const Params& p, GroupCache& cache) {
  const std::string op = param_str(p, "variant");
  const std::size_t n = odd(static_cast<std::size_t>(param_int(p, "n")));
  const auto a = device_input(cache, n, 1, "a");
  const auto b = device_input(cache, n, 2, "b");
  const auto flush = std::make_shared<L2Flush>();
  auto out = std::make_shared<DeviceBuffer<float>>(n);
  std::function<void()> run;
  std::vector<float> want(n);
  double bytes = 0;
  if (op == "vector_add") {
    vector_add_ref(a->host, b->host, want);
    run = [=] { vector_add(a->device.get(), b->device.get(), out->get(), n, nullptr); };
    bytes = 3.0 * static_cast<double>(n) * sizeof(float);
  } else if (op == "copy_coalesced") {
    want = a->host;
    run = [=] { copy_coalesced(a->device.get(), out->get(), n, nullptr); };
    bytes = 2.0 * static_cast<double>(n) * sizeof(float);
  } else if (op == "copy_strided") {
    copy_strided_ref(a->host, want, kStride);
    run = [=] { copy_strided(a->device.get(), out->get(), n, kStride, nullptr); };
    bytes = 2.0 * static_cast<double>(n) * sizeof(float);
  } else {
    throw UsageError(fmt::format(
        "parameter 'variant': '{}' is not vector_add, copy_coalesced or copy_strided", op));
  }
  auto expected = std::make_shared<const std::vector<float>>(std::move(want));
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = [flush, out] {
    CDL_CUDA_CHECK(cudaMemset(out->get(), 0xff, out->size() * sizeof(float)));  // NaNs
    (*flush)();
  };
  t.run = run;
  t.check = [out, expected]() -> std::string {
    std::vector<float> got(expected->size());
    CDL_CUDA_CHECK(
        cudaMemcpy(got.data(), out->get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &(*expected)[i], sizeof(float)) != 0)
        return fmt::format("element {} is {}, the CPU reference gives {}", i, got[i],
                           (*expected)[i]);
    return "";
  };
  t.work.items = static_cast<double>(n);
  t.work.bytes = bytes;
  return t;
}

Gemm parse_gemm(const std::string& s) {
  for (int v = 0; v <= static_cast<int>(Gemm::cublas); ++v)
    if (gemm_name(static_cast<Gemm>(v)) == s) return static_cast<Gemm>(v);
  throw UsageError(fmt::format("parameter 'variant': '{}' is not a GEMM version", s));
}

// The product's reference, once per size: OpenBLAS on the CPU (every core), and the relative
// Frobenius error ‖C - ref‖ / ‖ref‖ a version may have against it (float sums in another order).
struct GemmInputs {
  std::shared_ptr<const DeviceInput> a, b;
  std::vector<float> want;
};

Trial gemm_trial(const Params& p, GroupCache& cache) {
  const Gemm v = parse_gemm(param_str(p, "variant"));
  const int n = static_cast<int>(param_int(p, "n"));
  const auto& in = cache.get<GemmInputs>("inputs", [&] {
    GemmInputs g;
    const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    g.a = device_input(cache, nn, 1, "a");
    g.b = device_input(cache, nn, 2, "b");
    g.want.resize(nn);
    kernels::gemm(kernels::GemmVersion::openblas, kernels::Trans::no, kernels::Trans::no,
                  static_cast<std::size_t>(n), static_cast<std::size_t>(n),
                  static_cast<std::size_t>(n), 1.0f, g.a->host.data(), static_cast<std::size_t>(n),
                  g.b->host.data(), static_cast<std::size_t>(n), 0.0f, g.want.data(),
                  static_cast<std::size_t>(n));
    return g;
  });
  const GemmInputs* inputs = &in;
  const auto flush = std::make_shared<L2Flush>();
  auto out = std::make_shared<DeviceBuffer<float>>(static_cast<std::size_t>(n) * n);
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = [flush, out] {
    CDL_CUDA_CHECK(cudaMemset(out->get(), 0xff, out->size() * sizeof(float)));  // NaNs
    (*flush)();
  };
  t.run = [v, inputs, out, n] {
    gemm(v, inputs->a->device.get(), inputs->b->device.get(), out->get(), n, n, n, nullptr);
  };
  t.check = [inputs, out]() -> std::string {
    std::vector<float> got(out->size());
    CDL_CUDA_CHECK(
        cudaMemcpy(got.data(), out->get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double d = static_cast<double>(got[i]) - inputs->want[i];
      err += d * d;
      norm += static_cast<double>(inputs->want[i]) * inputs->want[i];
    }
    const double rel = std::sqrt(err / (norm > 0 ? norm : 1));
    if (rel <= 1e-5) return "";  // NaN (an element not written) fails too
    return fmt::format("relative error {:.3g} against OpenBLAS on the CPU (at most 1e-5)", rel);
  };
  const double nd = static_cast<double>(n);
  t.work.items = nd * nd;
  t.work.flops = 2.0 * nd * nd * nd;
  t.work.bytes = 3.0 * nd * nd * sizeof(float);  // compulsory traffic: A, B read, C written
  return t;
}

Transpose parse_transpose(const std::string& s) {
  for (const Transpose v : {Transpose::naive, Transpose::shared, Transpose::padded})
    if (transpose_name(v) == s) return v;
  throw UsageError(fmt::format("parameter 'variant': '{}' is not naive, shared or padded", s));
}

Trial transpose_trial(const Params& p, GroupCache& cache) {
  const Transpose v = parse_transpose(param_str(p, "variant"));
  const int n = static_cast<int>(param_int(p, "n"));
  const int rows = n, cols = n + 1;  // not square: a wrong index shows
  const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const auto in = device_input(cache, count, 4, "in");
  const auto flush = std::make_shared<L2Flush>();
  auto out = std::make_shared<DeviceBuffer<float>>(count);
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = [flush, out] {
    CDL_CUDA_CHECK(cudaMemset(out->get(), 0xff, out->size() * sizeof(float)));
    (*flush)();
  };
  t.run = [v, in, out, rows, cols] {
    transpose(v, in->device.get(), out->get(), rows, cols, nullptr);
  };
  t.check = [in, out, rows, cols]() -> std::string {
    std::vector<float> got(out->size());
    CDL_CUDA_CHECK(
        cudaMemcpy(got.data(), out->get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        if (std::memcmp(&got[static_cast<std::size_t>(c) * rows + r],
                        &in->host[static_cast<std::size_t>(r) * cols + c], sizeof(float)) != 0)
          return fmt::format("out[{}][{}] is not in[{}][{}]", c, r, r, c);
    return "";
  };
  t.work.items = static_cast<double>(count);
  t.work.bytes = 2.0 * static_cast<double>(count) * sizeof(float);
  return t;
}

// ‖got − want‖ / ‖want‖ (Frobenius), in double.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(err / (norm > 0 ? norm : 1));
}

Trial gemm_mixed_trial(const Params& p, GroupCache& cache) {
  const std::string name = param_str(p, "variant");
  if (name != "v5_wmma" && name != "cublas_fp16")
    throw UsageError(fmt::format("parameter 'variant': '{}' is not v5_wmma or cublas_fp16", name));
  const GemmMixed v = name == "v5_wmma" ? GemmMixed::v5_wmma : GemmMixed::cublas_fp16;
  const int n = static_cast<int>(param_int(p, "n"));
  if (n % 16) throw UsageError(fmt::format("parameter 'n': {} is not a multiple of 16", n));
  struct Inputs {
    std::shared_ptr<const DeviceInput> a, b;
    DeviceBuffer<char> ha, hb;  // FP16 copies
    std::vector<float> want;    // the FP32 product of the FP32 inputs (OpenBLAS)
  };
  const auto& in = cache.get<Inputs>("inputs", [&] {
    Inputs g;
    const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    g.a = device_input(cache, nn, 1, "a");
    g.b = device_input(cache, nn, 2, "b");
    g.ha = DeviceBuffer<char>(2 * nn);
    g.hb = DeviceBuffer<char>(2 * nn);
    to_half(g.a->device.get(), g.ha.get(), nn, nullptr);
    to_half(g.b->device.get(), g.hb.get(), nn, nullptr);
    CDL_CUDA_CHECK(cudaDeviceSynchronize());
    g.want.resize(nn);
    const auto un = static_cast<std::size_t>(n);
    kernels::gemm(kernels::GemmVersion::openblas, kernels::Trans::no, kernels::Trans::no, un, un,
                  un, 1.0f, g.a->host.data(), un, g.b->host.data(), un, 0.0f, g.want.data(), un);
    return g;
  });
  const Inputs* inputs = &in;
  const auto flush = std::make_shared<L2Flush>();
  auto out = std::make_shared<DeviceBuffer<float>>(static_cast<std::size_t>(n) * n);
  auto error = std::make_shared<double>(0);
  const auto measure_error = [inputs, out, error] {
    std::vector<float> got(out->size());
    CDL_CUDA_CHECK(
        cudaMemcpy(got.data(), out->get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    *error = relative_error(got, inputs->want);
  };
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = [flush, out] {
    CDL_CUDA_CHECK(cudaMemset(out->get(), 0xff, out->size() * sizeof(float)));
    (*flush)();
  };
  t.run = [v, inputs, out, n] {
    gemm_mixed(v, inputs->ha.get(), inputs->hb.get(), out->get(), n, n, n, nullptr);
  };
  t.observe = [measure_error, error](Sample& s) {
    measure_error();
    s.metrics["rel_error"] = *error;
  };
  // FP16 inputs carry 11 significant bits: about 5e-4 relative per element, and the product's
  // error of the same order. Far above that, the kernel is wrong, not imprecise.
  t.check = [measure_error, error]() -> std::string {
    measure_error();
    if (*error <= 5e-3) return "";
    return fmt::format("relative error {:.3g} against the FP32 product (at most 5e-3)", *error);
  };
  const double nd = static_cast<double>(n);
  t.work.items = nd * nd;
  t.work.flops = 2.0 * nd * nd * nd;
  t.work.bytes = (2.0 + 2.0 + 4.0) * nd * nd;  // A and B in FP16, C in FP32
  return t;
}

Trial streams_trial(const Params& p, GroupCache& cache) {
  const std::string name = param_str(p, "variant");
  Transfer v = Transfer::pageable_sync;
  if (name == "pinned_sync")
    v = Transfer::pinned_sync;
  else if (name == "pinned_streams")
    v = Transfer::pinned_streams;
  else if (name != "pageable_sync")
    throw UsageError(fmt::format(
        "parameter 'variant': '{}' is not pageable_sync, pinned_sync or pinned_streams", name));
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  const int chunks = v == Transfer::pinned_streams ? static_cast<int>(param_int(p, "chunks")) : 1;
  struct Buffers {
    std::vector<float> host_in, want;
    PinnedBuffer pin_in, pin_out;
    DeviceBuffer<float> d_in, d_out;
    explicit Buffers(std::size_t m)
        : host_in(test_values(m, 7)), want(m), pin_in(m), pin_out(m), d_in(m), d_out(m) {
      for (std::size_t i = 0; i < m; ++i) want[i] = 2.0f * host_in[i] + 1.0f;
      std::copy(host_in.begin(), host_in.end(), pin_in.get());
    }
  };
  auto& buffers =
      cache.get<std::shared_ptr<Buffers>>("buffers", [&] { return std::make_shared<Buffers>(n); });
  auto b = buffers;
  auto out = std::make_shared<std::vector<float>>(n);  // the pageable output, this config's own
  const bool pinned = v != Transfer::pageable_sync;
  Trial t;  // host timer: the round trip, copies included, is what is measured
  t.reset = [b, out, pinned] {
    if (pinned)
      std::fill(b->pin_out.get(), b->pin_out.get() + b->pin_out.size(), -1.0f);
    else
      std::fill(out->begin(), out->end(), -1.0f);
  };
  t.run = [v, b, out, n, chunks, pinned] {
    copy_compute_copy(v, pinned ? b->pin_in.get() : b->host_in.data(),
                      pinned ? b->pin_out.get() : out->data(), b->d_in.get(), b->d_out.get(), n,
                      chunks);
  };
  t.check = [b, out, pinned]() -> std::string {
    const float* got = pinned ? b->pin_out.get() : out->data();
    for (std::size_t i = 0; i < b->want.size(); ++i)
      if (got[i] != b->want[i])
        return fmt::format("element {} is {}, 2 x + 1 is {}", i, got[i], b->want[i]);
    return "";
  };
  t.work.items = static_cast<double>(n);
  t.work.bytes = 2.0 * static_cast<double>(n) * sizeof(float);  // across the bus, both ways
  return t;
}

#else

Trial reduction_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial memory_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial gemm_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial transpose_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial gemm_mixed_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial streams_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }

#endif

const bool registered_reduction = register_experiment({
    .id = "ch04/reduction",
    .chapter = "04-gpu-kernels",
    .title = "Sum of n floats on the GPU: five versions and CUB, bytes read per second",
    .axes = {{.name = "variant", .values = kReduceVariants},
             {.name = "n",
              .values = {"256M"},
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
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .y_label = "bytes/s read"}},
    .unavailable = gpu_unavailable,
});

const bool registered_memory = register_experiment({
    .id = "ch04/memory",
    .chapter = "04-gpu-kernels",
    .title = "Memory access on the GPU: vector add (grid-stride), coalesced and strided copies",
    .axes = {{.name = "variant", .values = {"vector_add", "copy_coalesced", "copy_strided"}},
             {.name = "n",
              .values = {"256M"},
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
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .y_label = "bytes/s (declared traffic / time)"}},
    .unavailable = gpu_unavailable,
});

const bool registered_transpose = register_experiment({
    .id = "ch04/transpose",
    .chapter = "04-gpu-kernels",
    .title = "Transpose on the GPU: naive, through a shared-memory tile, through a padded tile",
    .axes = {{.name = "variant", .values = {"naive", "shared", "padded"}},
             {.name = "n",
              .values = {"8192"},
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
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .y_label = "bytes/s (read + written / time)"}},
    .unavailable = gpu_unavailable,
});

const bool registered_gemm = register_experiment({
    .id = "ch04/gemm",
    .chapter = "04-gpu-kernels",
    .title = "Single-precision GEMM on the GPU: naive, coalesced, shared tiles, register blocking "
             "and cuBLAS",
    .axes = {{.name = "variant",
              .values = {"v1_naive", "v2_coalesced", "v3_shared_tiles", "v4_register_blocking",
                         "cublas"}},
             {.name = "n",
              .values = {"4096"},
              .quick = {"2048"},
              .kind = AxisKind::size,
              .max = 1 << 15,
              .smoke = {"128"}}},
    .baseline = {{"variant", "cublas"}},
    .interleave = {"variant"},
    .repetitions = 11,
    .warmup = 2,
    .prepare = gemm_trial,
    .figures = {{.id = "flops",
                 .title = "GEMM: FLOP/s by version (cuBLAS the peer)",
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "flops_per_s",
                 .series = "variant",
                 .y_label = "FLOP/s"}},
    .unavailable = gpu_unavailable,
});

const bool registered_gemm_mixed = register_experiment({
    .id = "ch04/gemm_mixed",
    .chapter = "04-gpu-kernels",
    .title = "Mixed-precision GEMM (FP16 in, FP32 accumulated) on the tensor cores: WMMA and "
             "cuBLAS, with the error against the FP32 product",
    .axes = {{.name = "variant", .values = {"v5_wmma", "cublas_fp16"}},
             {.name = "n",
              .values = {"8192"},
              .quick = {"4096"},
              .kind = AxisKind::size,
              .max = 1 << 15,
              .smoke = {"256"}}},
    .baseline = {{"variant", "cublas_fp16"}},
    .metrics = {{.name = "rel_error",
                 .unit = "",
                 .lower_is_better = true,
                 .what = "the relative Frobenius error of C against the FP32 product of the FP32 "
                         "inputs (FP16 inputs: about 1e-3)"}},
    .interleave = {"variant"},
    .repetitions = 11,
    .warmup = 2,
    .prepare = gemm_mixed_trial,
    .figures = {{.id = "flops",
                 .title = "Mixed-precision GEMM: FLOP/s (cuBLAS the peer)",
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "flops_per_s",
                 .series = "variant",
                 .y_label = "FLOP/s"}},
    .unavailable = gpu_unavailable,
});

const bool registered_streams = register_experiment({
    .id = "ch04/streams",
    .chapter = "04-gpu-kernels",
    .title = "Copy in, kernel, copy out: pageable vs pinned host memory, one stream vs chunks on "
             "several streams",
    .axes =
        {{.name = "variant", .values = {"pageable_sync", "pinned_sync", "pinned_streams"}},
         {.name = "chunks", .values = {"4"}, .kind = AxisKind::count, .max = 1024, .smoke = {"2"}},
         {.name = "n",
          .values = {"256M"},
          .quick = {"64M"},
          .kind = AxisKind::size,
          .max = kMaxElements,
          .smoke = {"1M"}}},
    .baseline = {{"variant", "pageable_sync"}},
    .inapplicable = {{{{"variant", "pageable_sync"}}, {"chunks"}},
                     {{{"variant", "pinned_sync"}}, {"chunks"}}},
    .interleave = {"variant", "chunks"},
    .repetitions = 11,
    .warmup = 2,
    .prepare = streams_trial,
    .figures = {{.id = "bandwidth",
                 .title = "Bytes across the bus per second, round trip with the kernel",
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .y_label = "bytes/s (in + out / round-trip time)"}},
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
