// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain, read through zlib.
//   images: magic 2051 (0x00000803: unsigned bytes, 3 dimensions), count, rows, cols, pixels
//   labels: magic 2049 (0x00000801: unsigned bytes, 1 dimension), count, labels
// Integers are big-endian. Every check (magic, dimensions, length, no trailing bytes) fails with
// a DataError naming the file and the byte offset (error.hpp).
//
// Fashion-MNIST comes from Debian's dataset-fashion-mnist package:
//   /usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
// (CONCURDL_FASHION_MNIST=/other/dir overrides the directory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace concurdl::data {

inline constexpr std::uint32_t kIdxImagesMagic = 2051;
inline constexpr std::uint32_t kIdxLabelsMagic = 2049;

struct IdxImages {
  std::uint32_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count x rows x cols, row-major, one byte per pixel

  std::size_t image_bytes() const { return std::size_t{rows} * cols; }
  std::span<const std::uint8_t> image(std::size_t i) const {
    return {pixels.data() + i * image_bytes(), image_bytes()};
  }
};

struct IdxLabels {
  std::vector<std::uint8_t> labels;
};

IdxImages read_idx_images(const std::filesystem::path& path);
IdxLabels read_idx_labels(const std::filesystem::path& path);

// Images with their labels; the two files must hold the same count.
struct LabelledImages {
  IdxImages images;
  IdxLabels labels;
  std::size_t size() const { return labels.labels.size(); }
};
LabelledImages read_labelled_images(const std::filesystem::path& images,
                                    const std::filesystem::path& labels);

struct FashionMnist {
  LabelledImages train;  // 60000 images of 28 x 28
  LabelledImages test;   // 10000
};

inline constexpr std::uint32_t kFashionMnistTrain = 60000, kFashionMnistTest = 10000;
inline constexpr std::uint32_t kFashionMnistSide = 28, kFashionMnistClasses = 10;
// Pixel statistics of the training set (pixels / 255), for normalisation.
inline constexpr float kFashionMnistMean = 0.2860f, kFashionMnistStd = 0.3530f;

// $CONCURDL_FASHION_MNIST, else /usr/share/datasets/fashion-mnist.
std::filesystem::path fashion_mnist_dir();
// Whether the four files are there; if not, `why` says which is missing and how to get it.
bool fashion_mnist_present(const std::filesystem::path& dir, std::string* why = nullptr);
// Reads and checks both splits: sizes, 28 x 28, labels 0..9.
FashionMnist load_fashion_mnist(const std::filesystem::path& dir = fashion_mnist_dir());

}  // namespace concurdl::data
