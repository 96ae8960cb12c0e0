// A labelled data set in memory as the trainer wants it: float features, normalised
// ((pixel / 255 - mean) / std for Fashion-MNIST), one row per sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "concurdl/data/idx.hpp"
#include "concurdl/kernels/aligned.hpp"

namespace concurdl::nn {

struct Dataset {
  std::size_t n = 0, dim = 0, classes = 10;
  kernels::LineVector<float> x;  // n x dim, on a cache line (aligned.hpp)
  std::vector<std::uint8_t> y;   // n
  const float* row(std::size_t i) const { return x.data() + i * dim; }
};

// The first `limit` images (0: all), normalised with the Fashion-MNIST training statistics.
Dataset to_dataset(const data::LabelledImages& images, std::size_t limit = 0);

}  // namespace concurdl::nn
