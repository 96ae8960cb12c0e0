// What chapter 06's two experiment files share (experiments.cpp: the chapter and
// ch06/pipeline; experiments_tensor.cpp: ch06/tensor_parallel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace concurdl::mp::detail {

inline constexpr std::int64_t kMaxWidth = 16384;
inline constexpr std::int64_t kMaxRows = 1 << 16;

// n floats in [-1, 1) from a linear congruential generator: inputs and weights that do not
// depend on the platform's random library.
inline std::vector<float> pseudo_random(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

// The device counts the α–β projections are drawn at.
inline std::vector<double> projection_devices() { return {1, 2, 4, 8, 16, 32, 64}; }

}  // namespace concurdl::mp::detail
