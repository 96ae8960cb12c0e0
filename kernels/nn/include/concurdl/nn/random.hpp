// The training stack's randomness, from the suite's own generator (splitmix64, as the data sets
// and chapter 03's sampler use) and nothing from <random>, whose distributions give different
// numbers under different standard libraries: weight initialisation and the epoch's shuffle
// are the same on every machine and compiler for a given seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "concurdl/data/synthetic.hpp"

namespace concurdl::nn {

// A stream seeded from several words (seed, epoch, layer ...): each word is folded in through
// splitmix64, so nearby inputs give unrelated streams.
inline std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) {
  std::uint64_t s = seed;
  s = data::splitmix64(s) ^ a;
  s = data::splitmix64(s) ^ b;
  return data::splitmix64(s);
}

// Uniform in [0, 1): the top 24 bits, so every value is an exact float.
inline float uniform01(std::uint64_t& state) {
  return static_cast<float>(data::splitmix64(state) >> 40) * 0x1.0p-24f;
}

// Uniform in [0, n) (Lemire's multiply-shift; bias below n / 2^64, negligible here).
inline std::uint64_t uniform_below(std::uint64_t& state, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(data::splitmix64(state)) * n) >>
                                    64);
}

// The order of epoch `epoch`: a permutation of 0 .. n-1 drawn from (seed, epoch) alone, by
// Fisher-Yates (so a resumed run shuffles exactly as the uninterrupted one would).
inline void epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch,
                              std::vector<std::uint32_t>& out) {
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint32_t>(i);
  std::uint64_t state = mix_seed(seed, 0x53485546464C45ull /* "SHUFFLE" */, epoch);
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = uniform_below(state, i);
    const std::uint32_t t = out[i - 1];
    out[i - 1] = out[j];
    out[j] = t;
  }
}

}  // namespace concurdl::nn
