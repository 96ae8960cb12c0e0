// Hogwild! (Niu, Recht, Ré, Wright, 2011): every worker reads and updates one shared copy of the
// parameters with no lock at all. In C++ two threads touching the same float, one of them
// writing, is a data race and so undefined behaviour, even on x86 where the hardware would do
// something sensible; std::atomic_ref<float> with memory_order_relaxed makes each element's
// load and store atomic (no torn floats, no UB) and promises nothing else: no order between
// elements, no read-modify-write atomicity across load and store. Two workers updating one
// element at once can lose one of the updates; a reader may see some elements from before an
// update and some after. Niu et al.'s analysis assumes more than this code gives: each
// coordinate's update atomic (an atomic add, so no update is lost), and sparse updates that
// rarely touch the same coordinate. Here the load, the arithmetic and the store are three steps
// and the MLP's updates are dense, so updates are lost (the tests count them); the experiments
// of this chapter measure what that costs.
#pragma once

#include <span>

#include "concurdl/nn/sgd.hpp"

namespace concurdl::asgd {

// Copies the shared parameters into `out`, one relaxed atomic load per element.
void hogwild_read(std::span<float> shared, std::span<float> out);

// One SGD step with momentum on the shared parameters and velocity, nn::Sgd's rule element by
// element (v = momentum v + (g + weight_decay p); p -= lr v), each element read and written
// with relaxed atomic loads and stores, no lock. Alone, it takes exactly nn::Sgd's step.
void hogwild_step(std::span<float> params, std::span<float> velocity, std::span<const float> grad,
                  const nn::SgdOptions& sgd);

}  // namespace concurdl::asgd
