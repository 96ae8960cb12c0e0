// The MLP with a mixture-of-experts block inside it, and its trainer: `concurdl train
// --moe-experts E`. One process, one trainer (expert parallelism over ranks is chapter 06's).
//
//   x -> MLP layers [0, L) -> MoeLayer (d -> E experts of hidden h -> d, plus the residual)
//     -> MLP layers [L, end) -> softmax cross-entropy (+ the MoE's aux loss)
//
// L is MoeBlock::after, the hidden layer the block follows (1: after the first hidden layer),
// and d = widths[L], so the MLP keeps its spec and its one flat buffer: layers [0, L) and
// [L, end) run through Mlp::forward_layers / backward_layers on one Mlp, with the block between
// them. The ReLU of layer L - 1 stays where it was (the block's input is the hidden layer's
// activation); the block's output goes on without one.
//
// Parameters: the Mlp's flat buffer and the MoeLayer's, each with an Sgd of the same settings
// and the same learning-rate schedule. A checkpoint holds their concatenation (Mlp first) and
// names the block in its header (TrainState::moe), so dense and MoE checkpoints do not mix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "concurdl/kernels/aligned.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/moe.hpp"
#include "concurdl/nn/sgd.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::nn {

// Where the block sits in the MLP and what it is.
struct MoeBlock {
  std::size_t after = 1;    // after hidden layer L, 1 <= L < layers: d = widths[L]
  std::size_t hidden = 0;   // each expert's hidden width h; 0: d
  std::size_t experts = 0;  // E >= 2
  std::size_t top_k = 1;    // 1 (Switch) or 2 (GShard)
  double capacity_factor = 1.25;
  bool dropless = false;
  float aux_alpha = 0.01f;

  // The layer's spec inside `mlp` (width d, hidden h resolved, residual on); throws
  // std::invalid_argument naming what is wrong (after out of range, E < 2, a bad k or factor).
  MoeSpec layer_spec(const MlpSpec& mlp) const;
  // "4x256-top1-cap1.25-after1-aux0.01" ("dropless" for the capacity): what checkpoints and
  // records name the block by. No spaces (a checkpoint header field).
  std::string describe(const MlpSpec& mlp) const;
};

// The model. Threads: one call at a time (the block keeps its routing for backward).
class MoeMlp {
 public:
  // The Mlp from `seed` as a dense run's; the block from a stream of its own.
  MoeMlp(MlpSpec spec, MoeBlock block, std::uint64_t seed,
         kernels::GemmVersion gemm = kernels::GemmVersion::openblas);

  Mlp& mlp() { return mlp_; }
  const Mlp& mlp() const { return mlp_; }
  MoeLayer& moe() { return moe_; }
  const MoeLayer& moe() const { return moe_; }
  const MoeBlock& block() const { return block_; }
  std::string describe() const { return block_.describe(mlp_.spec()); }
  std::size_t parameter_count() const {
    return mlp_.parameters().size() + moe_.parameters().size();
  }

  struct Loss {
    float loss = 0;  // mean cross-entropy over the batch
    double aux = 0;  // the block's load-balancing loss (added to the objective)
    std::size_t correct = 0;
  };
  // Forward and backward on one batch (batch >= 1): overwrites mlp().gradients() and
  // moe().gradients() with the gradient of loss + aux. The block's routing is over this batch
  // (its capacity from the batch's rows); moe().stats() are this step's.
  Loss forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch);
  // The same forward, no backward: what finite differences of the objective need.
  Loss forward_loss(const float* x, const std::uint8_t* labels, std::size_t batch);
  // Mean cross-entropy and accuracy over n rows, routed `batch` rows at a time, as in training.
  EvalResult evaluate(const float* x, const std::uint8_t* labels, std::size_t n,
                      std::size_t batch = 1000);

 private:
  MoeBlock block_;
  std::size_t after_;
  Mlp mlp_;
  MoeLayer moe_;
  Activations lower_, upper_;
  kernels::LineVector<float> mixed_, dlogits_, dmixed_, dlower_;

  void forward(const float* x, std::size_t batch);
};

// The block's routing over an epoch: what the records carry beside loss and accuracy.
struct MoeEpochStats {
  std::size_t steps = 0;
  double dropped_fraction = 0;  // choices dropped / choices made, over the epoch
  double imbalance = 0;         // max / mean choices per expert, mean over the steps
  double aux_loss = 0;          // mean over the steps
  std::vector<double> share;    // per expert: its share of the last step's choices
};

class MoeTrainer {
 public:
  // config.precision must be fp32 (std::invalid_argument); config.fuse_update does not apply.
  MoeTrainer(TrainConfig config, MoeBlock block, const Dataset& train);

  // As Trainer::run_epoch: the permutation for (seed, epoch), one SGD step per batch, both
  // optimisers at epoch_lr(config, epoch).
  EpochResult run_epoch(const std::function<void(const StepProgress&)>& on_progress = {},
                        std::size_t report_every = 50);
  EvalResult evaluate(const Dataset& d, std::size_t batch = 1000);
  void save(const std::filesystem::path& checkpoint) const;
  // CheckpointError for another architecture, a dense checkpoint or another block.
  void resume(const std::filesystem::path& checkpoint);

  const TrainState& state() const { return state_; }
  const TrainConfig& config() const { return config_; }
  MoeMlp& model() { return model_; }
  const MoeEpochStats& epoch_stats() const { return stats_; }
  // The last epoch's stats as record metrics: moe_dropped_fraction, moe_imbalance,
  // moe_aux_loss, moe_share_e0 ... moe_share_e{E-1}.
  std::map<std::string, double> epoch_metrics() const;

 private:
  TrainConfig config_;
  const Dataset& train_;
  MoeMlp model_;
  Sgd mlp_opt_, moe_opt_;
  TrainState state_;
  MoeEpochStats stats_;
  std::vector<std::uint32_t> order_;
  kernels::LineVector<float> batch_x_;
  std::vector<std::uint8_t> batch_y_;
};

// Writes `model` and its two optimisers' momentum (Mlp first) as a MoE checkpoint, the block
// named in its header: what load_moe_checkpoint reads.
void save_moe_checkpoint(const std::filesystem::path& path, const MoeMlp& model, const Sgd& mlp_opt,
                         const Sgd& moe_opt, const TrainState& state);
// Reads a MoE checkpoint into `model` and its two optimisers (Mlp first), refusing a dense one
// or one of another block (CheckpointError); nothing changes on error.
TrainState load_moe_checkpoint(const std::filesystem::path& path, MoeMlp& model, Sgd& mlp_opt,
                               Sgd& moe_opt);

}  // namespace concurdl::nn
