// SGD with momentum and weight decay (sgd.hpp): one fused pass over the flat buffers, so a step
// reads p, g, v and writes p, v once (5 floats of traffic per parameter).
#include "concurdl/nn/sgd.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/threads.hpp"

namespace concurdl::nn {

Sgd::Sgd(std::size_t parameters, SgdOptions options, MemoryAccount* account)
    : options_(options),
      velocity_(parameters, 0.0f, kernels::LineAllocator<float>(account, MemoryKind::optimizer)) {}

namespace {
void check_sizes(const char* who, std::size_t params, std::size_t grads, std::size_t velocities) {
  if (params != velocities || grads != velocities)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(params) +
                                " parameters and " + std::to_string(grads) +
                                " gradients, but the optimiser holds " +
                                std::to_string(velocities) + " velocities");
}

// Updates of at least this many parameters run on the compute threads (step, step_slice).
constexpr std::size_t kSgdParallelMin = std::size_t{1} << 16;

}  // namespace

void Sgd::step_range(std::span<float> params, std::span<const float> grads, std::size_t first,
                     std::size_t count) {
  check_sizes("Sgd::step_range", params.size(), grads.size(), velocity_.size());
  if (first > velocity_.size() || count > velocity_.size() - first)
    throw std::invalid_argument("Sgd::step_range: [" + std::to_string(first) + ", +" +
                                std::to_string(count) + ") is outside the " +
                                std::to_string(velocity_.size()) + " parameters");
  const float lr = options_.lr, mu = options_.momentum, wd = options_.weight_decay;
  float* p = params.data() + first;
  const float* g = grads.data() + first;
  float* v = velocity_.data() + first;
  kernels::for_range(count, count >= kSgdParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) kernels::sgd_update(p[i], v[i], g[i], lr, mu, wd);
  });
}

void Sgd::step(std::span<float> params, std::span<const float> grads) {
  check_sizes("Sgd::step", params.size(), grads.size(), velocity_.size());
  const float lr = options_.lr, mu = options_.momentum, wd = options_.weight_decay;
  float* p = params.data();
  const float* g = grads.data();
  float* v = velocity_.data();
  const std::size_t n = velocity_.size();
  // Element-wise, so any split gives the same bits. On the compute threads from kSgdParallelMin
  // parameters, unless OpenBLAS ran the GEMMs (for_range: its spinning workers would take the
  // cores). After GEMM v4 on 2 threads the team also reads the gradient lines the GEMM's other
  // thread wrote, in its own cache: the 784-256-128-10 MLP's update took 120 us on the calling
  // thread (every line the other core wrote fetched across), 51 us in the team, 27 us at 1
  // thread.
  kernels::for_range(n, n >= kSgdParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) kernels::sgd_update(p[i], v[i], g[i], lr, mu, wd);
  });
}

void Sgd::step_16bit(std::span<float> params, std::span<const std::uint16_t> grads16, Precision p,
                     float loss_scale, std::span<std::uint16_t> params16) {
  step_16bit_range(params, grads16, p, loss_scale, params16, 0, velocity_.size());
}

void Sgd::step_16bit_range(std::span<float> params, std::span<const std::uint16_t> grads16,
                           Precision p, float loss_scale, std::span<std::uint16_t> params16,
                           std::size_t first, std::size_t count) {
  check_sizes("Sgd::step_16bit", params.size(), grads16.size(), velocity_.size());
  if (first > velocity_.size() || count > velocity_.size() - first)
    throw std::invalid_argument("Sgd::step_16bit_range: [" + std::to_string(first) + ", +" +
                                std::to_string(count) + ") is outside the " +
                                std::to_string(velocity_.size()) + " parameters");
  if (!params16.empty() && params16.size() != params.size())
    throw std::invalid_argument("Sgd::step_16bit: " + std::to_string(params16.size()) +
                                " 16-bit copies for " + std::to_string(params.size()) +
                                " parameters");
  if (p == Precision::fp32) throw std::invalid_argument("Sgd::step_16bit: fp32 is step()'s");
  const float lr = options_.lr, mu = options_.momentum, wd = options_.weight_decay;
  float* pp = params.data() + first;
  const std::uint16_t* g16 = grads16.data() + first;
  float* v = velocity_.data() + first;
  std::uint16_t* const p16 = params16.empty() ? nullptr : params16.data() + first;
  const std::size_t n = count;
  // Dividing by a power of two is multiplying by its reciprocal, exactly, where that is a
  // normal float (the loss scales are powers of two): then one pass a vector at a time
  // (kernels::sgd_update_16bit: the same bits), else the division element by element.
  int exponent = 0;
  const float inverse = 1.0f / loss_scale;
  if (std::frexp(loss_scale, &exponent) == 0.5f && std::isnormal(inverse)) {
    const kernels::Half h = p == Precision::bf16 ? kernels::Half::bf16 : kernels::Half::fp16;
    kernels::for_range(n, n >= kSgdParallelMin, [=](std::size_t b, std::size_t e) {
      kernels::sgd_update_16bit(h, pp + b, v + b, g16 + b, inverse, lr, mu, wd,
                                p16 == nullptr ? nullptr : p16 + b, e - b);
    });
    return;
  }
  kernels::for_range(n, n >= kSgdParallelMin, [=](std::size_t b, std::size_t e) {
    constexpr std::size_t kChunk = 512;
    float g[kChunk];
    for (std::size_t at = b; at < e; at += kChunk) {
      const std::size_t c = std::min(kChunk, e - at);
      from_16bit(p, {g16 + at, c}, {g, c});
      for (std::size_t i = 0; i < c; ++i) g[i] /= loss_scale;
      for (std::size_t i = 0; i < c; ++i)
        kernels::sgd_update(pp[at + i], v[at + i], g[i], lr, mu, wd);
      if (p16 != nullptr) to_16bit(p, {pp + at, c}, {p16 + at, c});
    }
  });
}

void Sgd::step_slice(std::span<float> params, std::span<const float> grads, std::size_t first) {
  check_sizes("Sgd::step_slice", params.size(), velocity_.size(), velocity_.size());
  const std::size_t n = grads.size();
  if (first > velocity_.size() || n > velocity_.size() - first)
    throw std::invalid_argument("Sgd::step_slice: [" + std::to_string(first) + ", +" +
                                std::to_string(n) + ") is outside the " +
                                std::to_string(velocity_.size()) + " parameters");
  const float lr = options_.lr, mu = options_.momentum, wd = options_.weight_decay;
  float* p = params.data() + first;
  const float* g = grads.data();
  float* v = velocity_.data() + first;
  kernels::for_range(n, n >= kSgdParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) kernels::sgd_update(p[i], v[i], g[i], lr, mu, wd);
  });
}

}  // namespace concurdl::nn
