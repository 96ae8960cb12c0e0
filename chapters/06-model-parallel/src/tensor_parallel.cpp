// Tensor-parallel Linear layers and Megatron's MLP block (tensor_parallel.hpp).
#include "concurdl/mp/tensor_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace concurdl::mp {

namespace {

using kernels::Trans;

std::size_t split(std::size_t features, int ranks, const char* what) {
  if (ranks < 1) throw std::invalid_argument("tensor parallel: ranks must be >= 1");
  const auto p = static_cast<std::size_t>(ranks);
  if (features % p != 0)
    throw std::invalid_argument(fmt::format(
        "tensor parallel: {} {} features do not divide over {} ranks", features, what, ranks));
  return features / p;
}

void check_shape(std::span<const float> w, std::span<const float> b, std::size_t in,
                 std::size_t out) {
  if (w.size() != in * out || b.size() != out)
    throw std::invalid_argument(fmt::format(
        "tensor parallel: a {} -> {} layer needs {} weights and {} biases, got {} and {}", in, out,
        in * out, out, w.size(), b.size()));
}

// rows x cols column sums of a row-major matrix into out (cols).
void column_sums(const float* m, std::size_t rows, std::size_t cols, float* out) {
  std::fill(out, out + cols, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out[c] += m[r * cols + c];
}

void add_bias(float* y, std::size_t rows, std::span<const float> b) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < b.size(); ++c) y[r * b.size() + c] += b[c];
}

void check_comm(const dp::Communicator& comm) {
  if (comm.memory() != dp::MemorySpace::host)
    throw std::invalid_argument("tensor parallel: the communicator must work on host memory");
}

}  // namespace

LinearShard column_shard(std::span<const float> w, std::span<const float> b, std::size_t in,
                         std::size_t out, int rank, int ranks) {
  check_shape(w, b, in, out);
  const std::size_t k = split(out, ranks, "output");
  const std::size_t first = k * static_cast<std::size_t>(rank);
  LinearShard s;
  s.in = in;
  s.out = k;
  s.w.assign(w.begin() + static_cast<std::ptrdiff_t>(first * in),
             w.begin() + static_cast<std::ptrdiff_t>((first + k) * in));
  s.b.assign(b.begin() + static_cast<std::ptrdiff_t>(first),
             b.begin() + static_cast<std::ptrdiff_t>(first + k));
  s.dw.assign(s.w.size(), 0.0f);
  s.db.assign(s.b.size(), 0.0f);
  return s;
}

LinearShard row_shard(std::span<const float> w, std::span<const float> b, std::size_t in,
                      std::size_t out, int rank, int ranks) {
  check_shape(w, b, in, out);
  const std::size_t k = split(in, ranks, "input");
  const std::size_t first = k * static_cast<std::size_t>(rank);
  LinearShard s;
  s.in = k;
  s.out = out;
  s.w.resize(out * k);
  for (std::size_t o = 0; o < out; ++o)
    std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(o * in + first), k,
                s.w.begin() + static_cast<std::ptrdiff_t>(o * k));
  s.b.assign(b.begin(), b.end());
  s.dw.assign(s.w.size(), 0.0f);
  s.db.assign(s.b.size(), 0.0f);
  return s;
}

// --- column-parallel -------------------------------------------------------------------------

ColumnParallelLinear::ColumnParallelLinear(dp::Communicator& comm, LinearShard shard,
                                           kernels::GemmVersion gemm)
    : comm_(comm), shard_(std::move(shard)), gemm_(gemm) {
  check_comm(comm_);
}

void ColumnParallelLinear::forward(const float* x, std::size_t batch, float* y_local) {
  const std::size_t in = shard_.in, k = shard_.out;
  kernels::gemm(gemm_, Trans::no, Trans::yes, batch, k, in, 1.0f, x, in, shard_.w.data(), in, 0.0f,
                y_local, k);
  add_bias(y_local, batch, shard_.b);
}

void ColumnParallelLinear::forward_gathered(const float* x, std::size_t batch, float* y) {
  const std::size_t k = shard_.out, p = static_cast<std::size_t>(comm_.size());
  std::vector<float> local(batch * k);
  forward(x, batch, local.data());
  gathered_.resize(p * batch * k);
  comm_.all_gather(local, gathered_);
  // The all-gather lays the ranks' blocks one after another; y wants them side by side.
  for (std::size_t r = 0; r < p; ++r)
    for (std::size_t row = 0; row < batch; ++row)
      std::copy_n(gathered_.data() + (r * batch + row) * k, k, y + row * p * k + r * k);
}

void ColumnParallelLinear::backward(const float* x, const float* dy_local, std::size_t batch,
                                    float* dx) {
  const std::size_t in = shard_.in, k = shard_.out;
  kernels::gemm(gemm_, Trans::yes, Trans::no, k, in, batch, 1.0f, dy_local, k, x, in, 0.0f,
                shard_.dw.data(), in);
  column_sums(dy_local, batch, k, shard_.db.data());
  if (dx == nullptr) return;
  kernels::gemm(gemm_, Trans::no, Trans::no, batch, in, k, 1.0f, dy_local, k, shard_.w.data(), in,
                0.0f, dx, in);
  comm_.all_reduce(std::span<float>(dx, batch * in));  // every shard touches every input
}

// --- row-parallel ----------------------------------------------------------------------------

RowParallelLinear::RowParallelLinear(dp::Communicator& comm, LinearShard shard,
                                     kernels::GemmVersion gemm)
    : comm_(comm), shard_(std::move(shard)), gemm_(gemm) {
  check_comm(comm_);
}

void RowParallelLinear::forward(const float* x_local, std::size_t batch, float* y) {
  const std::size_t k = shard_.in, out = shard_.out;
  kernels::gemm(gemm_, Trans::no, Trans::yes, batch, out, k, 1.0f, x_local, k, shard_.w.data(), k,
                0.0f, y, out);
  comm_.all_reduce(std::span<float>(y, batch * out));  // the partial products' sum
  add_bias(y, batch, shard_.b);                        // once, after the sum
}

void RowParallelLinear::backward(const float* x_local, const float* dy, std::size_t batch,
                                 float* dx_local) {
  const std::size_t k = shard_.in, out = shard_.out;
  kernels::gemm(gemm_, Trans::yes, Trans::no, out, k, batch, 1.0f, dy, out, x_local, k, 0.0f,
                shard_.dw.data(), k);
  column_sums(dy, batch, out, shard_.db.data());
  if (dx_local == nullptr) return;
  kernels::gemm(gemm_, Trans::no, Trans::no, batch, k, out, 1.0f, dy, out, shard_.w.data(), k, 0.0f,
                dx_local, k);
}

// --- the MLP block ---------------------------------------------------------------------------

ParallelMlpBlock::ParallelMlpBlock(dp::Communicator& comm, std::span<const float> w1,
                                   std::span<const float> b1, std::span<const float> w2,
                                   std::span<const float> b2, std::size_t in, std::size_t hidden,
                                   std::size_t out, kernels::GemmVersion gemm)
    : first_(comm, column_shard(w1, b1, in, hidden, comm.rank(), comm.size()), gemm),
      second_(comm, row_shard(w2, b2, hidden, out, comm.rank(), comm.size()), gemm) {}

void ParallelMlpBlock::forward(const float* x, std::size_t batch, float* y) {
  const std::size_t in = first_.shard().in, k = first_.shard().out;
  x_.assign(x, x + batch * in);
  h_.resize(batch * k);
  first_.forward(x, batch, h_.data());
  for (float& v : h_) v = std::max(v, 0.0f);  // ReLU on this rank's hidden units
  second_.forward(h_.data(), batch, y);
  ++all_reduces_;
}

void ParallelMlpBlock::backward(const float* dy, std::size_t batch, float* dx) {
  const std::size_t k = first_.shard().out;
  if (h_.size() != batch * k) throw std::logic_error("ParallelMlpBlock::backward before forward");
  dh_.resize(batch * k);
  second_.backward(h_.data(), dy, batch, dh_.data());
  for (std::size_t i = 0; i < dh_.size(); ++i)
    if (!(h_[i] > 0.0f)) dh_[i] = 0.0f;  // ReLU's gradient, from its output
  first_.backward(x_.data(), dh_.data(), batch, dx);
  if (dx != nullptr) ++all_reduces_;
}

}  // namespace concurdl::mp
