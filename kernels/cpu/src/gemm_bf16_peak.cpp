// The peaks the GEMMs of bf16.hpp are read against: flop/s of independent chains of VDPBF16PS
// (bf16_peak_flops) and of float32 FMAs (fp32_peak_flops) in registers, measured alike.
#include <immintrin.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "bf16_target.hpp"
#include "concurdl/kernels/bf16.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace concurdl::kernels {

namespace {

#if CONCURDL_BF16_KERNEL
CONCURDL_BF16_TARGET double dp_chains(std::size_t iters) {
  constexpr int kChains = 24;  // as many as the GEMM's tile keeps (28): latency x throughput
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512i a = _mm512_set1_epi32(0x3c003c00);  // (2^-7, 2^-7): the sums stay small
  const __m512i b = _mm512_set1_epi32(0x3f803f80);  // (1, 1)
  for (std::size_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)a, (__m512bh)b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  double total = 0;
  for (const float x : lanes) total += static_cast<double>(x);
  return total;
}
constexpr double kFlopsPerChainIter = 24 * 64.0;
#endif

// float32 FMA chains, as wide as the build targets (the compiler vectorises the lanes).
double fma_chains(std::size_t iters) {
  constexpr int kChains = 24;
  constexpr int kWidth = 16;  // one zmm with AVX-512; two ymm, or four xmm, otherwise
  float acc[kChains][kWidth];
  for (int i = 0; i < kChains; ++i)
    for (int l = 0; l < kWidth; ++l) acc[i][l] = static_cast<float>(i + l);
  const float x = 0.999999f, y = 1e-7f;
  for (std::size_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i)
#pragma GCC unroll 16
      for (int l = 0; l < kWidth; ++l) acc[i][l] = std::fma(acc[i][l], x, y);
  }
  double total = 0;
  for (int i = 0; i < kChains; ++i)
    for (int l = 0; l < kWidth; ++l) total += static_cast<double>(acc[i][l]);
  return total;
}
constexpr double kFmaFlopsPerIter = 24 * 16 * 2.0;

// flop/s of `chains(iters)` on `threads` threads for about `seconds` (iterations from a probe
// on one thread), `flops_per_iter` a call's iteration.
template <class Chains>
double chains_rate(Chains chains, double flops_per_iter, int threads, double seconds) {
  threads = std::max(1, threads);
  using Clock = std::chrono::steady_clock;
  std::size_t iters = 1 << 12;
  std::vector<double> sink(static_cast<std::size_t>(threads) * 8, 0.0);  // a line per thread
  for (;;) {
    const auto t0 = Clock::now();
    sink[0] += chains(iters);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0.02 || iters > (std::size_t{1} << 34)) {
      iters = static_cast<std::size_t>(static_cast<double>(iters) * seconds / std::max(s, 1e-9));
      break;
    }
    iters *= 4;
  }
  iters = std::max<std::size_t>(iters, 1024);
  const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
#else
    const std::size_t t = 0;
#endif
    sink[t * 8] += chains(iters);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!(sink[0] == sink[0])) throw std::logic_error("peak: the chains went NaN");
  return flops_per_iter * static_cast<double>(iters) * threads / s;
}

}  // namespace

double fp32_peak_flops(int threads, double seconds) {
  return chains_rate(&fma_chains, kFmaFlopsPerIter, threads, seconds);
}

double bf16_peak_flops(int threads, double seconds) {
  if (!have_bf16()) throw std::runtime_error("bf16_peak_flops: " + bf16_why_not());
#if CONCURDL_BF16_KERNEL
  return chains_rate(&dp_chains, kFlopsPerChainIter, threads, seconds);
#else
  (void)threads, (void)seconds;
  return 0;
#endif
}
}  // namespace concurdl::kernels
