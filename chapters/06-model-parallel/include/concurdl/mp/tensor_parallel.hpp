// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): one Linear layer's weight split over p
// ranks, each rank holding and computing 1/p of it, on chapter 05's communicator.
//
//   column-parallel   W (out x in) split by rows = output features: rank r computes
//                     y_r = x W_r^T + b_r, its out/p columns of y. x is the same on every rank.
//                     The full y needs an all-gather; backward needs an all-reduce of dx
//                     (every rank's W_r contributes to every input feature).
//   row-parallel      W split by columns = input features: rank r holds W[:, in_r] and takes
//                     only its slice x_r of the input; y = sum over r of x_r W_r^T needs an
//                     all-reduce forward; backward is local (dx_r = dy W_r).
//   MLP block         column-parallel Linear, ReLU on each rank's slice, row-parallel Linear:
//                     the column layer's split output is exactly the row layer's split input, so
//                     the block communicates once forward (the row layer's all-reduce) and once
//                     backward (the column layer's dx), whatever its hidden width.
//
//      x ──► [W1_0 | W1_1] ──► relu(h_0), relu(h_1) ──► [W2_0 ; W2_1] ──► Σ (all-reduce) ──► y
//            column-parallel        (no communication)     row-parallel
//
// Layouts are nn::Mlp's: row-major, W is out x in, activations are batch x features. A rank's
// shard is a contiguous block of the split dimension (the features must divide by the ranks:
// a std::invalid_argument says so otherwise). Every rank calls every method in the same order
// (collectives match by order); the communicator's memory must be host.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "concurdl/dp/communicator.hpp"
#include "concurdl/kernels/gemm.hpp"

namespace concurdl::mp {

// One rank's shard of a Linear layer (in -> out features) and its gradients.
struct LinearShard {
  std::size_t in = 0, out = 0;  // the shard's own dimensions
  std::vector<float> w, b;      // out x in, out (a row-parallel shard holds the whole bias)
  std::vector<float> dw, db;
};

// Rank `rank` of `ranks`'s shard of a full layer (w: out x in row-major, b: out).
LinearShard column_shard(std::span<const float> w, std::span<const float> b, std::size_t in,
                         std::size_t out, int rank, int ranks);
LinearShard row_shard(std::span<const float> w, std::span<const float> b, std::size_t in,
                      std::size_t out, int rank, int ranks);

class ColumnParallelLinear {
 public:
  ColumnParallelLinear(dp::Communicator& comm, LinearShard shard,
                       kernels::GemmVersion gemm = kernels::GemmVersion::openblas);
  // x: batch x in (the same on every rank). y_local: batch x shard.out, this rank's columns.
  void forward(const float* x, std::size_t batch, float* y_local);
  // The full output, batch x (ranks * shard.out), on every rank: forward, then an all-gather.
  void forward_gathered(const float* x, std::size_t batch, float* y);
  // dy_local: batch x shard.out (this rank's columns of dy). Writes the shard's dw, db; when
  // dx is not null, the full input gradient (batch x in, summed over the ranks: an all-reduce).
  void backward(const float* x, const float* dy_local, std::size_t batch, float* dx);
  LinearShard& shard() { return shard_; }

 private:
  dp::Communicator& comm_;
  LinearShard shard_;
  kernels::GemmVersion gemm_;
  std::vector<float> gathered_;
};

class RowParallelLinear {
 public:
  RowParallelLinear(dp::Communicator& comm, LinearShard shard,
                    kernels::GemmVersion gemm = kernels::GemmVersion::openblas);
  // x_local: batch x shard.in (this rank's input features). y: batch x out, the full output on
  // every rank (the partial products all-reduced, then the bias added).
  void forward(const float* x_local, std::size_t batch, float* y);
  // dy: batch x out (the same on every rank). Writes dw, db (db is the full bias's gradient,
  // the same on every rank); dx_local (batch x shard.in), when not null: no communication.
  void backward(const float* x_local, const float* dy, std::size_t batch, float* dx_local);
  LinearShard& shard() { return shard_; }

 private:
  dp::Communicator& comm_;
  LinearShard shard_;
  kernels::GemmVersion gemm_;
};

// Megatron's MLP block: Linear(in -> hidden), ReLU, Linear(hidden -> out), the first column-
// and the second row-parallel. One all-reduce forward, one backward (when dx is asked for).
class ParallelMlpBlock {
 public:
  // w1: hidden x in, b1: hidden, w2: out x hidden, b2: out (the full layers; each rank keeps
  // its shards).
  ParallelMlpBlock(dp::Communicator& comm, std::span<const float> w1, std::span<const float> b1,
                   std::span<const float> w2, std::span<const float> b2, std::size_t in,
                   std::size_t hidden, std::size_t out,
                   kernels::GemmVersion gemm = kernels::GemmVersion::openblas);
  void forward(const float* x, std::size_t batch, float* y);     // y: batch x out
  void backward(const float* dy, std::size_t batch, float* dx);  // after forward; dx may be null
  ColumnParallelLinear& first() { return first_; }
  RowParallelLinear& second() { return second_; }
  // All-reduces this block has made since construction (the lesson's "once each way").
  std::size_t all_reduces() const { return all_reduces_; }

 private:
  ColumnParallelLinear first_;
  RowParallelLinear second_;
  std::vector<float> x_, h_, dh_;
  std::size_t all_reduces_ = 0;
};

}  // namespace concurdl::mp
