// Expert-parallel training: `concurdl train --moe-experts E --ep P [--dp D]`. The MLP with a
// mixture-of-experts block inside it (nn::MoeMlp's model) trained over R = P x D ranks (threads
// or MPI processes): the block's E experts spread over the P ranks of an expert-parallel group
// (ExpertParallelMoe, rows to their experts and back by all-to-all), D such groups each holding
// every expert once, and everything else (the MLP's layers, the router) replicated on every
// rank: the layout of GShard (Lepikhin et al. 2020, arXiv:2006.16668) for D = 1, and of expert
// and data parallelism as DeepSpeed trains MoE models (Kim et al. 2021, arXiv:2109.10465;
// Rajbhandari et al. 2022, arXiv:2201.05596) for D > 1.
//
//   world rank w = g P + p: group g (its ranks w = g P ... g P + P - 1), place p in it
//   one step, every rank: its block of the global batch of R x batch rows (block_of, as chapter
//     05's data parallelism) -> lower layers -> ExpertParallelMoe over the group -> upper layers
//     -> loss; backward the same way back; then three sums
//       the MLP's gradients and the router's   over all R ranks
//       each expert's gradients                 over the D ranks that hold it (one per group)
//     and SGD on every rank, on what it holds.
//
// The objective is the global batch's mean cross-entropy plus the mean of the groups' auxiliary
// losses: each group routes its own P x batch rows, with its own capacity (as a device group of
// GShard routes its own tokens). With D = 1 a step's gradients are nn::MoeMlp's on the whole
// global batch, so an epoch ends where nn::MoeTrainer with --batch R x batch ends it, up to the
// order of float additions (tests/test_expert_trainer.cpp holds them to it). Those differences
// grow over many steps, and a token whose top two router scores are close can then go to
// another expert: on Fashion-MNIST one epoch's test loss at 2 ranks and as one process differ in
// the third decimal.
//
// Evaluation and checkpoints use the whole model, put together on every rank at the end of each
// epoch (each expert's parameters and momentum summed into place over the group, a collective):
// a checkpoint is nn::MoeTrainer's, so a run can resume over another rank count or as one
// process.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/dp/communicator.hpp"
#include "concurdl/mp/expert_parallel.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/moe_trainer.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::mp {

struct ExpertTrainerOptions {
  int data = 1;  // D: groups; the expert-parallel group is world.size() / D ranks
  TokenExchange exchange = TokenExchange::native;
};

// The epoch's routing (in this rank's group) and its phases (on every rank), as the records
// carry them.
struct ExpertEpochStats {
  std::size_t steps = 0;
  double dropped_fraction = 0;  // choices dropped / choices made, over the epoch
  double imbalance = 0;         // max / mean choices per expert, mean over the steps
  double rank_imbalance = 0;    // max / mean rows per rank's experts, mean over the steps
  double aux_loss = 0;          // the group's auxiliary loss, mean over the steps
  // Per rank of the world: seconds in each phase over the epoch, forward and backward together
  // (ExpertParallelStats::Phases), and the rows its experts computed.
  std::vector<ExpertParallelStats::Phases> phases;
  std::vector<double> expert_rows;
  double step_s = 0;  // the epoch's seconds per step, on this rank
};

class ExpertParallelTrainer final : public nn::RankTrainer {
 public:
  // std::invalid_argument for a world that D does not divide, fewer experts than a group's
  // ranks, a block the model does not take, 16-bit precision, or data that does not fit.
  ExpertParallelTrainer(dp::Communicator& world, nn::TrainConfig config, nn::MoeBlock block,
                        const nn::Dataset& train, ExpertTrainerOptions options = {});
  ~ExpertParallelTrainer() override;

  int rank() const override { return world_.rank(); }
  int size() const override { return world_.size(); }
  // Collective.
  nn::EpochResult run_epoch(const std::function<void(const nn::StepProgress&)>& on_progress,
                            std::size_t report_every) override;
  // The whole model as of the last epoch's end (or the start, or the resume): not collective.
  nn::EvalResult evaluate(const nn::Dataset& d) override;
  void save(const std::filesystem::path& checkpoint) const override;
  void resume(const std::filesystem::path& checkpoint) override;  // every rank
  const nn::TrainState& state() const override { return state_; }
  std::string describe() const override;
  // moe_dropped_fraction, moe_imbalance, moe_rank_imbalance, moe_aux_loss, and per rank r:
  // moe_route_s_r{r}, moe_dispatch_s_r{r}, moe_experts_s_r{r}, moe_combine_s_r{r},
  // moe_exchange_s_r{r} (seconds per step), moe_rows_r{r} (rows per step).
  std::map<std::string, double> epoch_metrics() const override;

  // One step's forward and backward on this rank's `rows` of a global batch of `global_rows`
  // (every rank's rows, in world-rank order), its gradients summed as a step sums them, no
  // update: the mean loss and correct count of this rank's rows. Collective.
  nn::MoeMlp::Loss forward_backward(const float* x, const std::uint8_t* labels, std::size_t rows,
                                    std::size_t global_rows);
  nn::Mlp& mlp() { return model_.mlp(); }
  ExpertParallelMoe& moe() { return *moe_; }
  const ExpertEpochStats& epoch_stats() const { return stats_; }
  // Puts the whole model (and the optimisers' momentum) together on every rank; model() is
  // then nn::MoeMlp's with the same parameters. Collective; run_epoch calls it at its end.
  void gather_model();
  const nn::MoeMlp& model() const { return model_; }

 private:
  dp::Communicator& world_;
  nn::TrainConfig config_;
  const nn::Dataset& train_;
  ExpertTrainerOptions options_;
  std::unique_ptr<dp::Communicator> group_, data_;  // data_: null when D = 1
  // The MLP that trains, and the whole block as gather_model() last put it together.
  nn::MoeMlp model_;
  std::unique_ptr<ExpertParallelMoe> moe_;
  nn::Sgd mlp_opt_, moe_opt_;
  nn::Sgd whole_opt_;  // the block's momentum put together (checkpoints)
  nn::TrainState state_;
  ExpertEpochStats stats_;
  std::vector<std::uint32_t> order_;
  nn::Activations lower_, upper_;
  std::vector<float> batch_x_, mixed_, dlogits_, dmixed_, dlower_, whole_;
  std::vector<std::uint8_t> batch_y_;

  void scatter_model();  // model_'s block -> this rank's router and experts
};

}  // namespace concurdl::mp
