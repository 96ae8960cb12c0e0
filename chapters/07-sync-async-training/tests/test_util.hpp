// Chapter 07's tests share a small learnable problem and a configuration for it.
#pragma once

#include <cstdint>
#include <vector>

#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/trainer.hpp"

namespace ch07_test {

namespace nn = concurdl::nn;

// 200 samples of 24 features; the label is the argmax of a fixed linear map of them.
inline const nn::Dataset& problem() {
  static const nn::Dataset d = [] {
    nn::Dataset s;
    s.n = 200;
    s.dim = 24;
    s.classes = 10;
    s.x.resize(s.n * s.dim);
    s.y.resize(s.n);
    std::uint64_t state = 99;
    auto uniform = [&] {  // in [-1, 1)
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<float>(state >> 40) * 0x1.0p-23f - 1.0f;
    };
    for (float& v : s.x) v = uniform();
    std::vector<float> map(s.dim * s.classes);
    for (float& v : map) v = uniform();
    for (std::size_t i = 0; i < s.n; ++i) {
      std::size_t label = 0;
      float top = -1e30f;
      for (std::size_t c = 0; c < s.classes; ++c) {
        float z = 0;
        for (std::size_t k = 0; k < s.dim; ++k) z += s.x[i * s.dim + k] * map[k * s.classes + c];
        if (z > top) top = z, label = c;
      }
      s.y[i] = static_cast<std::uint8_t>(label);
    }
    return s;
  }();
  return d;
}

inline nn::TrainConfig small_config(std::size_t batch = 8) {
  nn::TrainConfig c;
  c.spec.widths = {24, 32, 16, 10};
  c.batch = batch;
  c.seed = 3;
  c.threads = 1;
  c.sgd.lr = 0.05f;
  return c;
}

}  // namespace ch07_test
