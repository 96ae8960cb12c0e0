// Row-major float matrices: an owning Matrix and a non-owning MatrixView (rows x cols with a
// leading dimension), enough for the training stack; no broadcasting magic.
#pragma once

#include <cstddef>
#include <vector>

namespace concurdl::nn {

struct MatrixView {
  float* data = nullptr;
  std::size_t rows = 0, cols = 0, ld = 0;  // ld >= cols
  float& operator()(std::size_t r, std::size_t c) const { return data[r * ld + c]; }
  float* row(std::size_t r) const { return data + r * ld; }
};

class Matrix {
 public:
  Matrix() = default;
  Matrix(std::size_t rows, std::size_t cols, float fill = 0.0f)
      : rows_(rows), cols_(cols), data_(rows * cols, fill) {}
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator()(std::size_t r, std::size_t c) { return data_[r * cols_ + c]; }
  float operator()(std::size_t r, std::size_t c) const { return data_[r * cols_ + c]; }
  MatrixView view() { return {data_.data(), rows_, cols_, cols_}; }

 private:
  std::size_t rows_ = 0, cols_ = 0;
  std::vector<float> data_;
};

}  // namespace concurdl::nn
