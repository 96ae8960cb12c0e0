// Chapter 04's GEMM experiments (GPU; left out with their reason where no device is):
//   ch04/gemm           square single-precision GEMM: v1-v4, v6, v7 and cuBLAS (kernel_tables.hpp),
//                       FLOP/s
//   ch04/gemm_mixed     FP16 or BF16 inputs, FP32 accumulation: WMMA (v5, v6) and cublasGemmEx,
//                       FLOP/s and the relative error against the float64 product (rel_error)
// Both check the product on the CPU (OpenBLAS) after the warm-up and after timing.
#include <cblas.h>
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

Trial gemm_trial(const Params& p, GroupCache& cache) {
  const GemmKernel& k = gemm_kernels().find(p);
  Trial t = device_gemm_trial(cache, static_cast<int>(param_int(p, "n")),
                              [launch = k.launch](const float* a, const float* b, float* c, int n) {
                                launch(a, b, c, n, n, n, nullptr);
                              });
  note_occupancy(t, k.occupancy);
  return t;
}

Trial gemm_mixed_trial(const Params& p, GroupCache& cache) {
  const GemmMixedKernel& k = gemm_mixed_kernels().find(p);
  const int n = static_cast<int>(param_int(p, "n"));
  if (n % 16) throw UsageError(fmt::format("parameter 'n': {} is not a multiple of 16", n));
  struct Inputs {
    std::shared_ptr<const DeviceInput> a, b;
    DeviceBuffer<char> ha, hb;  // FP16 or BF16 copies
    std::vector<double> want;   // the float64 product of the inputs (OpenBLAS's dgemm)
  };
  const auto& in = cache.get<Inputs>(k.bf16 ? "inputs_bf16" : "inputs_fp16", [&] {
    Inputs g;
    const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    g.a = device_input(cache, nn, 1, "a");
    g.b = device_input(cache, nn, 2, "b");
    g.ha = DeviceBuffer<char>(2 * nn);
    g.hb = DeviceBuffer<char>(2 * nn);
    const auto round = k.bf16 ? &to_bfloat16 : &to_half;
    round(g.a->device.get(), g.ha.get(), nn, nullptr);
    round(g.b->device.get(), g.hb.get(), nn, nullptr);
    CDL_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<double> a64(g.a->host.begin(), g.a->host.end());
    const std::vector<double> b64(g.b->host.begin(), g.b->host.end());
    g.want.resize(nn);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a64.data(), n, b64.data(),
                n, 0.0, g.want.data(), n);
    return g;
  });
  const Inputs* inputs = &in;
  auto out = std::make_shared<DeviceBuffer<float>>(static_cast<std::size_t>(n) * n);
  auto error = std::make_shared<double>(0);
  const auto measure_error = [inputs, out, error] {
    const std::vector<float> got = to_host(*out);
    *error = relative_error(got, inputs->want);
  };
  Trial t;
  t.timer = cuda_event_timer();
  t.reset = poison_and_flush(out);
  t.run = [launch = k.launch, inputs, out, n] {
    launch(inputs->ha.get(), inputs->hb.get(), out->get(), n, n, n, nullptr);
  };
  t.observe = [measure_error, error](Sample& s) {
    measure_error();
    s.metrics["rel_error"] = *error;
  };
  // FP16 inputs carry 11 significant bits, BF16 8: rounding errs by at most 2^-11 (4.9e-4) or
  // 2^-8 (3.9e-3) relative, and the product's error is of that order (the claims below). Ten
  // times that, the kernel is wrong, not imprecise.
  const double most = k.bf16 ? 4e-2 : 5e-3;
  t.check = [measure_error, error, most]() -> std::string {
    measure_error();
    if (*error <= most) return "";
    return fmt::format("relative error {:.3g} against the float64 product (at most {:g})", *error,
                       most);
  };
  const double nd = static_cast<double>(n);
  t.work.items = nd * nd;
  t.work.flops = 2.0 * nd * nd * nd;
  t.work.bytes = (2.0 + 2.0 + 4.0) * nd * nd;  // A and B in 16 bits, C in FP32
  t.bound = gpu_bound(t.work.bytes, Peak::tensor);
  note_occupancy(t, k.occupancy);
  return t;
}

#else

Trial gemm_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial gemm_mixed_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }

#endif

const bool registered_gemm = register_experiment({
    .id = "ch04/gemm",
    .chapter = "04-gpu-kernels",
    .title = "Single-precision GEMM on the GPU: naive, coalesced, shared tiles, register "
             "blocking, warp tiles, double buffering and cuBLAS",
    .axes = {gemm_kernels().axis("ch04/gemm"),
             {.name = "n",
              .values = {"1024", "2048", "4096"},
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
                 .kind = FigureKind::lines,
                 .x = "n",
                 .y = "flops_per_s",
                 .series = "variant",
                 .log_x = true,
                 .y_label = "FLOP/s",
                 .models = {roofline_model("flops_per_s")}}},
    .claims = {{.id = "register_blocking_beats_tiles",
                // A magnitude: one H200 run; no roofline of the device bounds it.
                .statement = "At n = 2048, the FLOP/s of an 8 x 8 tile of C per thread in "
                             "registers (v4) over one element per thread from shared tiles (v3); "
                             "at n = 1024 v4's 256 blocks do not fill the GPU",
                .select = {{"variant", "v4_register_blocking"}, {"n", "2048"}},
                .field = "flops_per_s",
                .versus = {{"variant", "v3_shared_tiles"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::caches, ClaimCause::memory_bandwidth},
                .unit = "x",
                .needs_gpu = true},
               {.id = "double_buffered_near_cublas",
                // A magnitude: a ratio against a peer library's kernels on one device.
                .statement = "At n = 4096, the FLOP/s of the double-buffered warp tiles (v7) over "
                             "cuBLAS's SGEMM",
                .select = {{"variant", "v7_double_buffered"}, {"n", "4096"}},
                .field = "flops_per_s",
                .versus = {{"variant", "cublas"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::peer_kernels, ClaimCause::caches},
                .unit = "x",
                .needs_gpu = true}},
    .unavailable = gpu_unavailable,
});

const bool registered_gemm_mixed = register_experiment({
    .id = "ch04/gemm_mixed",
    .chapter = "04-gpu-kernels",
    .title = "Mixed-precision GEMM (FP16 or BF16 in, FP32 accumulated) on the tensor cores: "
             "WMMA and cuBLAS, with the error against the float64 product",
    .axes = {gemm_mixed_kernels().axis("ch04/gemm_mixed"),
             {.name = "n",
              .values = {"2048", "4096", "8192"},
              .quick = {"4096"},
              .kind = AxisKind::size,
              .max = 1 << 15,
              .smoke = {"256"}}},
    .baseline = {{"variant", "cublas_fp16"}},
    .metrics = {{.name = "rel_error",
                 .unit = "",
                 .lower_is_better = true,
                 .what = "the relative Frobenius error of C against the float64 product of the "
                         "FP32 inputs (the rounding model: 2.6e-4 with FP16 inputs, 2.1e-3 with "
                         "BF16)"}},
    .interleave = {"variant"},
    .repetitions = 11,
    .warmup = 2,
    .prepare = gemm_mixed_trial,
    .figures = {{.id = "flops",
                 .title = "Mixed-precision GEMM: FLOP/s (cuBLAS the peer)",
                 .kind = FigureKind::lines,
                 .x = "n",
                 .y = "flops_per_s",
                 .series = "variant",
                 .log_x = true,
                 .y_label = "FLOP/s",
                 .models = {roofline_model("flops_per_s")}}},
    .claims = {{.id = "fp16_error_bounded",
                // Law by a statistical rounding model: rounding an input to FP16 (p = 11
                // significant bits, u = 2^-11) errs uniformly within half an ulp of its binade;
                // over inputs uniform in [-1, 1) that is u^2 / 21 mean square against E[x^2] =
                // 1/3, u / sqrt(7) rms relative. With independent inputs the n terms' errors add
                // like the terms themselves, so the product's relative Frobenius error is about
                // sqrt(2/7) u = 2.6e-4 (FP32 accumulation adds far less at n <= 8192: v5, v6
                // and cuBLAS, which sum in different orders, record the same error).
                // The bound 2e-3 is 7.7x that model. (Higham, Accuracy and Stability of Numerical
                // Algorithms, 2002, sections 2.8 and 3.5: the worst case, relative to |A||B|, is
                // far looser for inputs of both signs.)
                .statement = "FP16 inputs with FP32 accumulation (WMMA) stay within 2e-3 of the "
                             "float64 product (relative Frobenius error)",
                .select = {{"variant", "v5_wmma"}},
                .field = "rel_error",
                .compare = Claim::Compare::at_most,
                .bound = 2e-3,
                .needs_gpu = true,
                .timing = false},
               {.id = "bf16_error_bounded",
                // The same model with BF16's u = 2^-8: sqrt(2/7) u = 2.1e-3, and the bound 1.6e-2
                // is 7.7x that.
                .statement = "BF16 inputs with FP32 accumulation (WMMA) stay within 1.6e-2 of the "
                             "float64 product (relative Frobenius error)",
                .select = {{"variant", "v6_wmma_tiles_bf16"}},
                .field = "rel_error",
                .compare = Claim::Compare::at_most,
                .bound = 1.6e-2,
                .needs_gpu = true,
                .timing = false},
               {.id = "wmma_tiles_vs_cublas",
                // A magnitude: a ratio against a peer library's kernels on one device.
                .statement = "At n = 8192, the FLOP/s of WMMA with shared-memory tiles (v6, FP16) "
                             "over cuBLAS's FP16 GEMM",
                .select = {{"variant", "v6_wmma_tiles"}, {"n", "8192"}},
                .field = "flops_per_s",
                .versus = {{"variant", "cublas_fp16"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::peer_kernels, ClaimCause::memory_bandwidth},
                .unit = "x",
                .needs_gpu = true}},
    .unavailable = gpu_unavailable,
});

}  // namespace

}  // namespace concurdl::gpu
