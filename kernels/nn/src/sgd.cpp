// SGD with momentum and weight decay (sgd.hpp): one fused pass over the flat buffers, so a step
// reads p, g, v and writes p, v once (5 floats of traffic per parameter).
#include "concurdl/nn/sgd.hpp"

#include <stdexcept>
#include <string>

#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/threads.hpp"

namespace concurdl::nn {

Sgd::Sgd(std::size_t parameters, SgdOptions options)
    : options_(options), velocity_(parameters, 0.0f) {}

void Sgd::step(std::span<float> params, std::span<const float> grads) {
  if (params.size() != velocity_.size() || grads.size() != velocity_.size())
    throw std::invalid_argument("Sgd::step: " + std::to_string(params.size()) + " parameters and " +
                                std::to_string(grads.size()) +
                                " gradients, but the optimiser holds " +
                                std::to_string(velocity_.size()) + " velocities");
  const float lr = options_.lr, mu = options_.momentum, wd = options_.weight_decay;
  float* p = params.data();
  const float* g = grads.data();
  float* v = velocity_.data();
  const std::size_t n = velocity_.size();
  // Element-wise, so any split gives the same bits. Threads only for models beyond
  // kernels::kParallelMin parameters: below it, a team's spinning workers cost more than they
  // save, next to OpenBLAS's pool (ops.hpp has the numbers).
#pragma omp parallel for num_threads(kernels::compute_threads()) \
    schedule(static) if (n >= kernels::kParallelMin)
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + (g[i] + wd * p[i]);
    p[i] -= lr * v[i];
  }
}

}  // namespace concurdl::nn
