// Exercise 7.3 (chapter 07, exercises.md): Hogwild!'s lock-free update loop.
// The reference is hogwild_step in include/concurdl/asgd/hogwild.hpp and src/hogwild.cpp: try
// first, read after.
// Check it:  concurdl exercise ch07 7.3     (tests, then a timing against the reference)
// or faster: ch07_tests --gtest_filter='LockFreeStepEx7_3/student.*'
// Race-free: the same filter in a ThreadSanitizer build (cmake --preset tsan).
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <stdexcept>

#include "concurdl/core/errors.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::asgd {

// Exercise 7.3: one SGD-with-momentum step on parameters and velocity that other threads read
// and update at the same moment, without any lock (Niu et al., 2011). Element by element, as
// nn::Sgd::step (kernels/nn/src/sgd.cpp) does it:
//     v[i] = momentum * v[i] + (grad[i] + weight_decay * p[i]);   p[i] = p[i] - lr * v[i]
// Every element of `params` and `velocity` is read and written through std::atomic_ref<float>
// with std::memory_order_relaxed: one atomic load and one atomic store each, no lock, no
// read-modify-write. `grad` is the caller's own (no other thread writes it): read it plainly.
// Alone (no other thread), the result must be exactly nn::Sgd's step, bit for bit: write the
// expression as nn::Sgd does, in the same order, so that the compiler rounds (and fuses
// multiply-adds) alike. With other threads, an update may be lost (two threads load the same
// value and both store theirs). That is this loop's relaxation, not Hogwild!'s model: the
// paper assumes an atomic add per coordinate, so that no update is lost; a load and a store are
// cheaper and can lose one. The tests count the losses.
// params, velocity and grad of different sizes: std::invalid_argument.
// Think about: why plain float loads and stores are not allowed, although an aligned float is
// never torn on x86; what memory_order_relaxed promises and what it does not; what a
// fetch_add per element would cost, and whether it would make the step exact.
inline void student_hogwild_step([[maybe_unused]] std::span<float> params,
                                 [[maybe_unused]] std::span<float> velocity,
                                 [[maybe_unused]] std::span<const float> grad,
                                 [[maybe_unused]] const nn::SgdOptions& sgd) {
  CDL_TODO("7.3 Hogwild update");
}

}  // namespace concurdl::asgd
