// Shuffling: every epoch visits every sample once, in an order that differs between epochs and
// is the same on every machine for a given seed (PyTorch's RandomSampler with a seeded
// generator). Fisher-Yates over splitmix64; no <random> distribution, whose output differs
// between standard libraries.
#pragma once

#include <cstdint>
#include <vector>

#include "concurdl/data/synthetic.hpp"

namespace concurdl::async_io {

// A uniformly random permutation of 0 .. n-1, determined by `seed`.
template <class T = std::uint64_t>
std::vector<T> random_permutation(std::uint64_t n, std::uint64_t seed) {
  std::vector<T> p(n);
  for (std::uint64_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  std::uint64_t state = seed;
  for (std::uint64_t i = n; i > 1; --i) {
    // j uniform in [0, i): Lemire's multiply-shift (bias below 2^-40 for any i used here).
    const auto j = static_cast<std::uint64_t>(
        (static_cast<unsigned __int128>(data::splitmix64(state)) * i) >> 64);
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

// The order of epoch `epoch`: a fresh permutation per (seed, epoch), or 0 .. n-1 unshuffled.
inline std::vector<std::uint64_t> epoch_order(std::uint64_t n, bool shuffle, std::uint64_t seed,
                                              std::uint64_t epoch) {
  if (!shuffle) {
    std::vector<std::uint64_t> p(n);
    for (std::uint64_t i = 0; i < n; ++i) p[i] = i;
    return p;
  }
  std::uint64_t mix = seed ^ (epoch * 0xA24BAED4963EE407ull);
  return random_permutation(n, data::splitmix64(mix));
}

}  // namespace concurdl::async_io
