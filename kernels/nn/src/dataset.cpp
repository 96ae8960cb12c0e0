// Fashion-MNIST images as normalised float rows, and the bytes they came from (dataset.hpp).
#include "concurdl/nn/dataset.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/kernels/aligned.hpp"
#include "concurdl/kernels/threads.hpp"

namespace concurdl::nn {

namespace {
constexpr std::size_t kGatherParallelMin = std::size_t{1} << 14;
constexpr std::size_t kGatherAhead = 4;

// (From bytes: a quarter of the float rows' traffic from the last-level cache or memory, which
// bounded their copy, ~13 GB/s on one core of the Zen 5 guest: 13 us a step of 64 rows at 1
// thread against ~6 us from bytes, the `gather` phase of kernels/train_breakdown.)
// Row order[i] of `data` as floats, for i in [0, rows): into dst's row i, or (dst null) into
// a row of scratch in L1, handed to `put(i, row)` once it is whole, where the 16-bit batch rounds
// it (a data set of floats alone: put is handed the data set's own row).
template <class Put>
void gather_rows(const Dataset& data, const std::uint32_t* order, std::size_t rows,
                 std::uint8_t* labels, bool parallel, float* dst, Put put) {
  const std::size_t dim = data.dim;
  const bool to_scratch = dst == nullptr;
  const bool bytes = !data.pixels.empty();
  if (bytes && data.pixels.size() != data.x.size())
    throw std::invalid_argument("gather_batch: the data set holds " +
                                std::to_string(data.pixels.size()) + " bytes for " +
                                std::to_string(data.x.size()) + " features");
  const std::size_t row_bytes = bytes ? dim : dim * sizeof(float);
  kernels::for_range(
      rows, parallel && rows * dim >= kGatherParallelMin, [&](std::size_t b, std::size_t e) {
        thread_local kernels::LineVector<float> scratch;
        if (to_scratch && scratch.size() < dim) scratch.resize(dim);
        for (std::size_t i = b; i < e; ++i) {
          if (i + kGatherAhead < e) {
            const std::size_t ahead_idx = order[i + kGatherAhead];
            const auto* ahead = bytes ? data.pixels.data() + ahead_idx * dim
                                      : reinterpret_cast<const std::uint8_t*>(data.row(ahead_idx));
            for (std::size_t off = 0; off < row_bytes; off += kernels::kCacheLine)
              __builtin_prefetch(ahead + off, 0, 3);
          }
          const std::uint32_t idx = order[i];
          float* row = to_scratch ? scratch.data() : dst + i * dim;
          if (bytes) {
            const std::uint8_t* src = data.pixels.data() + std::size_t{idx} * dim;
            const float scale = data.pixel_scale, shift = data.pixel_shift;
            for (std::size_t k = 0; k < dim; ++k) row[k] = normalise_pixel(src[k], scale, shift);
            put(i, row);
          } else if (to_scratch) {
            put(i, data.row(idx));  // already whole: rounded from where it lies
          } else {
            std::memcpy(row, data.row(idx), dim * sizeof(float));
          }
          labels[i] = data.y[idx];
        }
      });
}
}  // namespace

void gather_batch(const Dataset& data, const std::uint32_t* order, std::size_t rows, float* x,
                  std::uint8_t* labels, bool parallel) {
  gather_rows(data, order, rows, labels, parallel, x, [](std::size_t, const float*) {});
}

void gather_batch_16bit(Precision p, const Dataset& data, const std::uint32_t* order,
                        std::size_t rows, std::uint16_t* x16, std::uint8_t* labels, bool parallel) {
  if (p == Precision::fp32)
    throw std::invalid_argument("gather_batch_16bit: fp32 is not a 16-bit format");
  const std::size_t dim = data.dim;
  gather_rows(data, order, rows, labels, parallel, nullptr, [&](std::size_t i, const float* row) {
    to_16bit(p, {row, dim}, {x16 + i * dim, dim});
  });
}

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
