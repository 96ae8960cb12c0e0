// Hogwild!'s lock-free read and update (hogwild.hpp).
#include "concurdl/asgd/hogwild.hpp"

#include <atomic>
#include <cstddef>
#include <stdexcept>

namespace concurdl::asgd {

static_assert(std::atomic_ref<float>::is_always_lock_free,
              "Hogwild needs lock-free float atomics (a lock per element would be no Hogwild)");

void hogwild_read(std::span<float> shared, std::span<float> out) {
  if (out.size() != shared.size()) throw std::invalid_argument("hogwild_read: wrong size");
  for (std::size_t i = 0; i < shared.size(); ++i)
    out[i] = std::atomic_ref<float>(shared[i]).load(std::memory_order_relaxed);
}

void hogwild_step(std::span<float> params, std::span<float> velocity, std::span<const float> grad,
                  const nn::SgdOptions& sgd) {
  if (velocity.size() != params.size() || grad.size() != params.size())
    throw std::invalid_argument("hogwild_step: params, velocity and grad differ in size");
  const float lr = sgd.lr, mu = sgd.momentum, wd = sgd.weight_decay;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::atomic_ref<float> p(params[i]), v(velocity[i]);
    const float pi = p.load(std::memory_order_relaxed);
    const float vi = mu * v.load(std::memory_order_relaxed) + (grad[i] + wd * pi);
    v.store(vi, std::memory_order_relaxed);
    p.store(pi - lr * vi, std::memory_order_relaxed);
  }
}

}  // namespace concurdl::asgd
