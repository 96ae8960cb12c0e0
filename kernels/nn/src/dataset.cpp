// Fashion-MNIST images as normalised float rows, and the bytes they came from (dataset.hpp).
#include "concurdl/nn/dataset.hpp"

#include <algorithm>
#include <vector>

namespace concurdl::nn {

Dataset to_dataset(const data::LabelledImages& images, std::size_t limit) {
  Dataset d;
  d.n = limit == 0 ? images.size() : std::min(limit, images.size());
  d.dim = images.images.image_bytes();
  d.classes = data::kFashionMnistClasses;
  d.x.resize(d.n * d.dim);
  d.y.assign(images.labels.labels.begin(),
             images.labels.labels.begin() + static_cast<std::ptrdiff_t>(d.n));
  const std::uint8_t* src = images.images.pixels.data();
  d.pixels.assign(src, src + d.n * d.dim);
  d.pixel_scale = 1.0f / (255.0f * data::kFashionMnistStd);
  d.pixel_shift = -data::kFashionMnistMean / data::kFashionMnistStd;
  for (std::size_t i = 0; i < d.n * d.dim; ++i)
    d.x[i] = normalise_pixel(src[i], d.pixel_scale, d.pixel_shift);
  return d;
}

Dataset linear_problem(std::size_t n, std::size_t dim, std::size_t classes, std::uint32_t seed) {
  Dataset s;
  s.n = n;
  s.dim = dim;
  s.classes = classes;
  s.x.resize(n * dim);
  s.y.resize(n);
  std::uint32_t state = seed;
  auto next = [&] {  // Numerical Recipes' 32-bit LCG, the top 24 bits as a float in [-1, 1)
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) * 0x1.0p-23f - 1.0f;
  };
  for (float& v : s.x) v = next();
  std::vector<float> map(dim * classes);
  for (float& v : map) v = next();
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t best = 0;
    float best_score = -1e30f;
    for (std::size_t c = 0; c < classes; ++c) {
      float score = 0;
      for (std::size_t k = 0; k < dim; ++k) score += s.x[i * dim + k] * map[k * classes + c];
      if (score > best_score) best_score = score, best = c;
    }
    s.y[i] = static_cast<std::uint8_t>(best);
  }
  return s;
}

}  // namespace concurdl::nn
