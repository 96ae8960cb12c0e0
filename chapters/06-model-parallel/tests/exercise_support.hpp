// Chapter 06's exercise tests, shared by their files (test_exercises.cpp: 6.1 and 6.2;
// test_exercise_zb.cpp: 6.3): the deadline, the test data and its comparison, the pipeline
// tests' sizes and the name of each typed instance.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../exercises/student_1f1b.hpp"
#include "../exercises/student_column_parallel.hpp"
#include "../exercises/student_zb_h1.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/tensor_parallel.hpp"
#include "concurdl/nn/mlp.hpp"

namespace {

using namespace concurdl::mp;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;
namespace kernels = concurdl::kernels;

// Every test takes well under a second here; sanitizer builds are about 10x slower.
constexpr int kDeadline = 30;
constexpr int kRankCounts[] = {1, 2, 3, 4};

inline std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;  // [-1, 1)
  }
  return v;
}

using concurdl::testing::finishes_within;  // a hang is a failed test, not a stuck program

// The first element of `got` further than float tolerance from `want`, or success.
inline ::testing::AssertionResult near(std::span<const float> got, std::span<const float> want,
                                       const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " values, expected " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i]))))
      return ::testing::AssertionFailure()
             << what << "[" << i << "] is " << got[i] << ", expected " << want[i];
  return ::testing::AssertionSuccess();
}

// Sizes of the pipeline tests (6.2, 6.3): at most this many stages and micro-batches, and a
// batch of kRows (divides by none of m > 1: uneven micro-batches) through a 7-layer MLP.
constexpr int kMaxStages = 8;
constexpr std::size_t kMaxMicroBatches = 16;
constexpr std::size_t kRows = 17;
const nn::MlpSpec kSpec{{6, 10, 9, 8, 7, 8, 9, 5}};

// Names the typed tests' instances "reference" and "student" (T::student says which).
struct ImplNames {
  template <class T>
  static std::string GetName(int) {
    return T::student ? "student" : "reference";
  }
};

}  // namespace
