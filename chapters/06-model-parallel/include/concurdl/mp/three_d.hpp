// 3D parallelism: data x tensor x pipeline parallelism on one communicator, split into groups by
// colour (Megatron-LM's layout: Narayanan et al., "Efficient Large-Scale Language Model Training
// on GPU Clusters Using Megatron-LM", SC21, arXiv:2104.04473).
//
// D x T x P ranks. World rank r sits at tensor rank t = r mod T, data rank d = (r / T) mod D
// and pipeline stage p = r / (T D): the T ranks of a tensor-parallel group are neighbours (on a
// GPU cluster, the GPUs of one node, whose links carry the most traffic). Each rank is in three
// groups (split_grid): its tensor group (the ranks of its d and p), its pipeline (its t and d)
// and its data group (its t and p).
//
//   one step: the batch cut into D shards; each shard goes through its pipeline of P stages
//   (pipeline_step over the pipeline group), each stage's layers split over its T tensor ranks
//   (TensorParallelStage: Megatron's column- then row-parallel pairs, one all-reduce each way
//   per pair); then every rank's gradient shard is averaged over its data group (all-reduce).
//
// Every rank of the grid ends with the gradient one process computes on the whole batch, for
// its shard of its stage's layers (tests/test_three_d.cpp holds them to it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "concurdl/dp/communicator.hpp"
#include "concurdl/dp/cost_model.hpp"
#include "concurdl/kernels/aligned.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/nn/mlp.hpp"

namespace concurdl::mp {

// A pipeline stage's layers [first, last) of an MLP, tensor-parallel over the ranks of `tp`:
// the layers in pairs from `first`, the first of a pair column-parallel (its output features
// split: each rank computes its slice of the hidden activations, ReLU included), the second
// row-parallel (its input features split: the partial products all-reduced, then the bias and
// ReLU). An unpaired last layer is replicated: every rank computes it whole, on the same input,
// to the same bits. A pair's hidden width must divide by the ranks.
//
// The activations a stage keeps per micro-batch are this rank's: a column layer's slice, the
// other layers' whole outputs. It has the model interface pipeline_step runs (nn::Mlp's
// forward_layers / backward_layers over its own Activations); its backward is not split (the
// zb-h1 schedule is refused).
class TensorParallelStage {
 public:
  enum class Split { column, row, replicated };

  class Activations {
   public:
    // Outputs counted in `account` as activations, backward's scratch as workspace.
    explicit Activations(MemoryAccount* account = nullptr);
    void release();  // frees every buffer
    // The range's output (batch x widths[last]), whole on every rank.
    const float* output() const;
    // Bytes of layer outputs held for backward, this rank's, by capacity.
    std::size_t output_bytes() const;
    std::size_t pending_gradient_bytes() const { return 0; }

   private:
    friend class TensorParallelStage;
    std::size_t batch_ = 0;
    const float* input_ = nullptr;
    kernels::LineAllocator<float> kept_, scratch_;
    std::vector<kernels::LineVector<float>> outputs_;  // per layer, as this rank holds it
    kernels::LineVector<float> grad_[2], hidden_grad_;
  };

  // This rank's shards of layers [first, last) of `spec`, sliced from `params` (the whole
  // model's flat parameters, nn::Mlp's layout). The communicator must outlive the stage, or be
  // replaced by set_communicator before its next use.
  TensorParallelStage(dp::Communicator& tp, const nn::MlpSpec& spec, std::span<const float> params,
                      std::size_t first, std::size_t last,
                      kernels::GemmVersion gemm = kernels::GemmVersion::openblas);

  // The tensor group to communicate on from now on: the same ranks in a later run_threads
  // (std::invalid_argument if its size or this rank's place in it differ).
  void set_communicator(dp::Communicator& tp);

  const nn::MlpSpec& spec() const { return spec_; }
  std::size_t layers() const { return spec_.widths.size() - 1; }
  std::size_t first() const { return first_; }
  std::size_t last() const { return last_; }
  Split split(std::size_t l) const { return splits_[l - first_]; }

  // As nn::Mlp's, over exactly this stage's range (else std::invalid_argument).
  void forward_layers(std::size_t first, std::size_t last, const float* in, std::size_t batch,
                      Activations& a);
  void backward_layers(std::size_t first, std::size_t last, Activations& a, const float* dout,
                       float* din, bool accumulate = false);
  [[noreturn]] void backward_input_layers(std::size_t, std::size_t, Activations&, const float*,
                                          float*);
  [[noreturn]] void backward_weight_layers(std::size_t, std::size_t, Activations&, bool);

  // This rank's parameters and their gradients, layer after layer (each W then b, as its shard
  // holds them): what its optimizer steps and its data group all-reduces.
  std::span<float> parameters() { return params_; }
  std::span<float> gradients() { return grads_; }
  // Writes this rank's gradients into their places in `full` (the whole model's flat layout);
  // the rest of `full` is left as it was.
  void scatter_gradients(std::span<float> full) const;
  // The same for the parameters, and for any values laid out as them (an optimizer's
  // velocity); gather is the other way: this rank's share of `full` into `shard`.
  void scatter_parameters(std::span<float> full) const;
  void scatter(std::span<const float> shard, std::span<float> full) const;
  void gather(std::span<const float> full, std::span<float> shard) const;

 private:
  struct Layer {
    Split split;
    std::size_t in, out;  // the shard's GEMM dimensions (out x in)
    std::size_t offset;   // of its W in params_ / grads_ (b follows)
    std::size_t full_in, full_out;
    bool relu;  // the whole model's layer has a ReLU after it
  };
  float* w(std::size_t l) { return params_.data() + layer_[l - first_].offset; }
  float* b(std::size_t l) { return w(l) + layer_[l - first_].out * layer_[l - first_].in; }
  float* dw(std::size_t l) { return grads_.data() + layer_[l - first_].offset; }
  float* db(std::size_t l) { return dw(l) + layer_[l - first_].out * layer_[l - first_].in; }
  void check(const char* who, std::size_t first, std::size_t last) const;
  // Visits the shard's elements with their index in the whole model's layout.
  template <class F>
  void for_each_element(F f) const;

  dp::Communicator* tp_;
  int tp_size_, tp_rank_;
  nn::MlpSpec spec_;
  std::size_t first_, last_;
  kernels::GemmVersion gemm_;
  std::vector<Split> splits_;
  std::vector<Layer> layer_;
  std::vector<std::size_t> full_offsets_;  // the whole model's layer offsets
  std::vector<float> params_, grads_;
};

// The grid of ranks.
struct Grid {
  int data = 1, tensor = 1, pipeline = 1;
  int size() const { return data * tensor * pipeline; }
  std::string describe() const;  // "2x2x2 (data x tensor x pipeline)"
};
struct GridPosition {
  int data = 0, tensor = 0, pipeline = 0;
};
// Where world rank `rank` sits: tensor fastest, then data, then pipeline.
GridPosition grid_position(const Grid& g, int rank);

// A rank's three groups, split from the world (collective: every rank calls it).
struct GridGroups {
  std::unique_ptr<dp::Communicator> data, tensor, pipeline;
};
// std::invalid_argument when the world's size is not the grid's.
GridGroups split_grid(dp::Communicator& world, const Grid& g);

// What one rank needs across steps: its stage, its pipeline's buffers.
struct ThreeDRank {
  GridPosition at;
  std::vector<std::size_t> bounds;  // the stages' layer boundaries (P + 1)
  std::unique_ptr<TensorParallelStage> stage;
  BasicPipelineWorkspace<TensorParallelStage::Activations> ws;
};
// This rank's stage of `spec` (parameters `params`, the whole model's) in `groups`.
ThreeDRank make_three_d_rank(GridGroups& groups, const Grid& g, const nn::MlpSpec& spec,
                             std::span<const float> params,
                             kernels::GemmVersion gemm = kernels::GemmVersion::openblas);

struct ThreeDStepResult {
  PipelineStepResult pipeline;   // this rank's pipeline step (its data shard)
  double loss_sum = 0;           // the whole batch's summed loss, on every rank
  std::size_t correct = 0;       // the whole batch's rows predicted right, on every rank
  double allreduce_seconds = 0;  // the data group's gradient all-reduce
};

// One training step on the grid: rows of x (rows x widths[0]) and labels, the same on every
// rank; data rank d takes block d of the rows (dp::block_of) in `micro_batches` micro-batches
// (fewer when its block has fewer rows; a block of none adds nothing) under `schedule` (naive,
// gpipe or 1f1b). Overwrites the rank's stage gradients with the whole batch's mean-loss
// gradient. Reads x on the first stages and labels on the last only.
ThreeDStepResult three_d_step(GridGroups& groups, ThreeDRank& rank, const float* x,
                              const std::uint8_t* labels, std::size_t rows,
                              std::size_t micro_batches, Schedule schedule);

// The α–β model of one 3D step (a projection, not a measurement). Each data replica trains on
// `rows` rows of an MLP of `layers` layers of `width` (their gradient `parameters` floats), cut
// into P stages of `pairs` column/row pairs each, T tensor ranks a stage, m micro-batches; one
// rank computing the replica's whole step takes `one_rank_s`. Then, with no overlap:
//   compute   one_rank_s / (T P) x (m + P - 1) / m           the pipeline's slots (its bubble)
//   tensor    (m + P - 1) x 2 pairs x ring(T, micro-batch activations)   on `tensor_link`
//   pipeline  2 (m + P - 1) x (α + micro-batch activations x β)          on `link` (P > 1)
//   data      ring(D, parameters / (T P) x 4 bytes)                     on `link`
// where ring(n, b) is chapter 05's ring all-reduce, 2(n - 1) α + 2(n - 1)/n b β. A tensor
// group lives within a node (`tensor_link`: NVLink-class), pipelines and data groups across
// nodes. It leaves out the replicated last layer's work, the loss, stragglers and overlap.
struct ThreeDShape {
  double rows = 512, micro_batches = 4, width = 256, parameters = 0, pairs_per_stage = 1;
};
struct ThreeDCost {
  double compute = 0, tensor = 0, pipeline = 0, data = 0;
  double total() const { return compute + tensor + pipeline + data; }
};
ThreeDCost three_d_step_model(const Grid& g, double one_rank_s, const ThreeDShape& shape,
                              const dp::Link& tensor_link, const dp::Link& link);

// pipeline_step over tensor-parallel stages (v = 1: boundaries of pipe.size() + 1 entries).
PipelineStepResult pipeline_step(dp::Communicator& pipe, TensorParallelStage& stage,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, Schedule schedule,
                                 BasicPipelineWorkspace<TensorParallelStage::Activations>* ws,
                                 const StepOptions& options = {});

}  // namespace concurdl::mp
