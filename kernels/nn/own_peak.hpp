// The peak of bfloat16's arithmetic (VDPBF16PS) on a row's threads, for the training
// experiments' rows whose GEMMs multiply in bfloat16 (kernels/train_breakdown's bf16 GEMM phases,
// kernels/train_throughput's bf16 and autocast rows): their metric own_peak_flops, which the
// harness holds them to instead of the float32 FMA peak.
#pragma once

#include <fmt/format.h>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/threads.hpp"

namespace concurdl::nn {

// Measured once per group (GroupCache), as kernels/gemm_bf16 measures it. The caller checks
// kernels::have_bf16() first: without AVX512_BF16 there is no such peak.
inline double bf16_peak_of_group(GroupCache& cache, int threads) {
  return cache.get<double>(fmt::format("bf16 peak {}", threads), [threads] {
    kernels::ComputeThreadsScope scope(threads);
    return kernels::bf16_peak_flops(threads);
  });
}

// `measure` with the metric own_peak_flops = peak added to each sample.
inline std::function<Sample()> with_own_peak(std::function<Sample()> measure, double peak) {
  return [measure = std::move(measure), peak] {
    Sample s = measure();
    s.metrics["own_peak_flops"] = peak;
    return s;
  };
}

}  // namespace concurdl::nn
