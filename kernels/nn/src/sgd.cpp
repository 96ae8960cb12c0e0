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
  // Element-wise, so any split gives the same bits. On the compute threads from kSgdParallelMin
  // parameters, unless OpenBLAS ran the GEMMs (for_range: its spinning workers would take the
  // cores). After GEMM v4 on 2 threads the team also reads the gradient lines the GEMM's other
  // thread wrote, in its own cache: the 784-256-128-10 MLP's update took 120 us on the calling
  // thread (every line the other core wrote fetched across), 51 us in the team, 27 us at 1
  // thread.
  constexpr std::size_t kSgdParallelMin = std::size_t{1} << 16;
  kernels::for_range(n, n >= kSgdParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      v[i] = mu * v[i] + (g[i] + wd * p[i]);
      p[i] -= lr * v[i];
    }
  });
}

}  // namespace concurdl::nn
