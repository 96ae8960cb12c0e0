// Fashion-MNIST images as normalised float rows, and the bytes they came from (dataset.hpp).
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
  const std::uint8_t* src = images.images.pixels.data();
  d.pixels.assign(src, src + d.n * d.dim);
  d.pixel_scale = 1.0f / (255.0f * data::kFashionMnistStd);
  d.pixel_shift = -data::kFashionMnistMean / data::kFashionMnistStd;
  for (std::size_t i = 0; i < d.n * d.dim; ++i)
    d.x[i] = normalise_pixel(src[i], d.pixel_scale, d.pixel_shift);
  return d;
}

}  // namespace concurdl::nn
