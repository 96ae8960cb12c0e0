// Chapter 07's tests share a small learnable problem and a configuration for it.
#pragma once

#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/trainer.hpp"

namespace ch07_test {

namespace nn = concurdl::nn;

// 200 samples of 24 features; the label is the argmax of a fixed linear map of them.
inline const nn::Dataset& problem() {
  static const nn::Dataset d = nn::linear_problem(200, 24, 10, 99);
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
