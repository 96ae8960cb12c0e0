// Fashion-MNIST images as normalised float rows (dataset.hpp).
#include "concurdl/nn/dataset.hpp"

#include <algorithm>

namespace concurdl::nn {

Dataset to_dataset(const data::LabelledImages& images, std::size_t limit) {
  Dataset d;
  d.n = limit == 0 ? images.size() : std::min(limit, images.size());
  d.dim = images.images.image_bytes();
  d.classes = data::kFashionMnistClasses;
  d.x.resize(d.n * d.dim);
  d.y.assign(images.labels.labels.begin(),
             images.labels.labels.begin() + static_cast<std::ptrdiff_t>(d.n));
  // (p / 255 - mean) / std, looked up in a 256-entry table: one rounding path per byte value.
  float table[256];
  for (int p = 0; p < 256; ++p)
    table[p] = (static_cast<float>(p) / 255.0f - data::kFashionMnistMean) / data::kFashionMnistStd;
  const std::uint8_t* src = images.images.pixels.data();
  for (std::size_t i = 0; i < d.n * d.dim; ++i) d.x[i] = table[src[i]];
  return d;
}

}  // namespace concurdl::nn
