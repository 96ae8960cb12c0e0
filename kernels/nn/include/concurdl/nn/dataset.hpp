// A labelled data set in memory as the trainer wants it: float features, normalised
// ((pixel / 255 - mean) / std for Fashion-MNIST), one row per sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "concurdl/data/idx.hpp"
#include "concurdl/kernels/aligned.hpp"
#include "concurdl/nn/precision.hpp"

namespace concurdl::nn {

struct Dataset {
  std::size_t n = 0, dim = 0, classes = 10;
  // x and pixels are read a row at a time at random places: on huge pages where Linux gives
  // them (aligned.hpp).
  kernels::HugePageVector<float> x;  // n x dim
  std::vector<std::uint8_t> y;       // n
  // The same images as the bytes they came from, where they came from bytes (to_dataset):
  // x[i] == normalise_pixel(pixels[i], pixel_scale, pixel_shift), bit for bit, so a batch can
  // be read as a quarter of the bytes and normalised on the way (the Trainer's gather). Empty
  // for a data set made of floats; then x is the only copy.
  kernels::HugePageVector<std::uint8_t> pixels;
  float pixel_scale = 0, pixel_shift = 0;
  const float* row(std::size_t i) const { return x.data() + i * dim; }
};

// A byte's feature: one fused multiply-add (rounded once, the same bits scalar or in a vector
// lane), p * scale + shift with scale = 1 / (255 std) and shift = -mean / std: (p / 255 - mean)
// / std to within an ulp.
inline float normalise_pixel(std::uint8_t p, float scale, float shift) {
  return __builtin_fmaf(static_cast<float>(p), scale, shift);
}

// A batch: the rows order[0 .. rows) of `data` into x (rows x dim floats) and their labels.
// Where the data set keeps its bytes, each row is read as bytes and normalised on the way
// (normalise_pixel: Dataset::x's bits), a quarter of the traffic of the float rows; the rows lie
// at random places, so within each thread's share of the rows each row first asks for the one
// kGatherAhead on. With `parallel`, split over the compute threads (kernels::for_range) from 16K
// values; each row is made whole by one thread, so the bytes are the same for any split. Bytes
// that are not one a feature (pixels.size() != x.size()) are std::invalid_argument.
void gather_batch(const Dataset& data, const std::uint32_t* order, std::size_t rows, float* x,
                  std::uint8_t* labels, bool parallel = false);
// The same rows rounded to `p`'s 16 bits as they are gathered (to_16bit of gather_batch's x,
// bit for bit), for a mixed-precision step that reads its batch in 16 bits: the float32 batch
// is neither written nor read back to be rounded. fp32 is std::invalid_argument.
void gather_batch_16bit(Precision p, const Dataset& data, const std::uint32_t* order,
                        std::size_t rows, std::uint16_t* x16, std::uint8_t* labels,
                        bool parallel = false);

// The first `limit` images (0: all), normalised with the Fashion-MNIST training statistics;
// keeps the bytes too (Dataset::pixels).
Dataset to_dataset(const data::LabelledImages& images, std::size_t limit = 0);

// A small learnable problem, for tests and examples that must not need Fashion-MNIST: n samples
// of `dim` features uniform in [-1, 1), each labelled with the argmax of a fixed random linear
// map of its features to `classes` scores (so a linear model can fit it exactly). The same seed
// gives the same data set, bit for bit, on every machine.
Dataset linear_problem(std::size_t n, std::size_t dim, std::size_t classes, std::uint32_t seed);

}  // namespace concurdl::nn
