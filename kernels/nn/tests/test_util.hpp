// Helpers for the nn tests: sanitizer detection (to shrink the work under TSan/ASan), a
// scratch directory, and deterministic test data.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/nn/dataset.hpp"

namespace nn_test {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

class ScratchDir {
 public:
  ScratchDir() {
    const char* t = std::getenv("TMPDIR");
    std::string templ =
        std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/concurdl-nn-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Values in [-1, 1) from an LCG (test data only).
inline std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

// A small learnable data set: each class a fixed random prototype plus noise.
inline concurdl::nn::Dataset toy_dataset(std::size_t n, std::size_t dim, std::size_t classes,
                                         std::uint32_t seed) {
  concurdl::nn::Dataset d;
  d.n = n;
  d.dim = dim;
  d.classes = classes;
  const auto protos = values(classes * dim, 1000 + seed), noise = values(n * dim, seed);
  d.x.resize(n * dim);
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    d.y[i] = static_cast<std::uint8_t>((i * 7 + seed) % classes);
    for (std::size_t j = 0; j < dim; ++j)
      d.x[i * dim + j] = protos[d.y[i] * dim + j] + 0.8f * noise[i * dim + j];
  }
  return d;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace nn_test
