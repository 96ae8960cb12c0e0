// 3D-parallel training: `concurdl train --dp D --tp T --pp P`. D x T x P thread ranks in
// three_d.hpp's grid; every step runs three_d_step on the global batch (config.batch rows: D
// data shards, each through a pipeline of P stages of T tensor ranks, M micro-batches) and then
// each rank takes an SGD step on its own shard of its stage's layers, with its own momentum.
// Evaluation, checkpoints and parameters() put the shards together (data replica 0's).
//
// The batches, learning rates and SGD are nn::Trainer's, and a step's gradients are the whole
// batch's, so an epoch ends where one process ends it, up to the order of float additions
// (tests/test_three_d.cpp holds them to it).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/mp/three_d.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/sgd.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::mp {

struct ThreeDOptions {
  Grid grid;
  MicroBatching batching;  // a schedule of naive, gpipe or 1f1b
};

class ThreeDTrainer final : public nn::RankTrainer {
 public:
  // std::invalid_argument for a grid of more stages than layers, a pair's hidden width that
  // does not divide over the tensor ranks, a schedule other than naive / gpipe / 1f1b, no
  // micro-batches, or data that does not fit the model.
  ThreeDTrainer(nn::TrainConfig config, const nn::Dataset& train, ThreeDOptions options);
  ~ThreeDTrainer() override;

  int rank() const override { return 0; }
  int size() const override { return 1; }
  nn::EpochResult run_epoch(const std::function<void(const nn::StepProgress&)>& on_progress,
                            std::size_t report_every) override;
  nn::EvalResult evaluate(const nn::Dataset& d) override;
  // The whole model's checkpoint, mode "3d" and the grid's rank count in its header.
  void save(const std::filesystem::path& checkpoint) const override;
  void resume(const std::filesystem::path& checkpoint) override;
  const nn::TrainState& state() const override { return state_; }
  std::string describe() const override;
  // The epoch's mean step time and the mean time of the data groups' gradient all-reduce.
  std::map<std::string, double> epoch_metrics() const override;

  // The whole model's parameters now, put together from data replica 0's shards.
  std::vector<float> parameters() const;

 private:
  struct Rank;
  void assemble(std::span<float> params, std::span<float> velocity) const;

  nn::TrainConfig config_;
  const nn::Dataset& train_;
  ThreeDOptions options_;
  nn::TrainState state_;
  std::vector<std::unique_ptr<Rank>> ranks_;  // by world rank
  std::vector<std::uint32_t> order_;
  std::unique_ptr<nn::Mlp> eval_model_;
  std::map<std::string, double> metrics_;
};

}  // namespace concurdl::mp
