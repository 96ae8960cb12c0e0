// The SGD step on a 16-bit gradient (gemm.hpp: sgd_update_16bit), a vector at a time with GEMM
// v4's vector type: the update GemmSgd's epilogue applies to a tile, here to a gradient that was
// summed and rounded elsewhere (a data-parallel all-reduce's).
#include <algorithm>

#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/ops.hpp"
#include "gemm_v4.hpp"

namespace concurdl::kernels {

void sgd_update_16bit(Half format, float* params, float* velocity, const std::uint16_t* grads16,
                      float grad_scale, float lr, float momentum, float weight_decay,
                      std::uint16_t* params16, std::size_t n) {
  using namespace detail::v4;
  using detail::round_16bit;
  // Each kLanes gradients widened into L1 (one vector pass), then per vector: scaled, the
  // update in registers, parameters and velocities stored, the parameters rounded to 16 bits.
  alignas(64) float g[kLanes];
  const auto run = [&]<Half H, bool Scaled>() {
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      widen_run<H>(grads16 + i, g, kLanes);
      Vec pv = load(params + i), vv = load(velocity + i);
      if constexpr (Scaled)
        sgd_update_scaled(pv, vv, load(g), grad_scale, lr, momentum, weight_decay);
      else
        sgd_update(pv, vv, load(g), lr, momentum, weight_decay);
      store(params + i, pv);
      store(velocity + i, vv);
      if (params16 != nullptr) store_16bit(H, params16 + i, pv);
    }
    for (; i < n; ++i) {
      const float gi = get<H>(grads16 + i);
      if constexpr (Scaled)
        sgd_update_scaled(params[i], velocity[i], gi, grad_scale, lr, momentum, weight_decay);
      else
        sgd_update(params[i], velocity[i], gi, lr, momentum, weight_decay);
      if (params16 != nullptr) params16[i] = round_16bit(H, params[i]);
    }
  };
  const bool scaled = grad_scale != 1.0f;
  if (format == Half::bf16)
    scaled ? run.template operator()<Half::bf16, true>()
           : run.template operator()<Half::bf16, false>();
  else
    scaled ? run.template operator()<Half::fp16, true>()
           : run.template operator()<Half::fp16, false>();
}

}  // namespace concurdl::kernels
