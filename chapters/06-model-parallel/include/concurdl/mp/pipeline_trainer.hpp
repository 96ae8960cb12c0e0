// Pipeline-parallel training: `concurdl train --pipeline P --micro-batches M --schedule S`.
// The MLP's layers are cut into P stages (stage_boundaries), one per thread rank of chapter
// 05's communicator; every step runs pipeline_step on the global batch (config.batch rows, cut
// into M micro-batches) and then each stage takes an SGD step on its own layers only, with its
// own momentum. No stage ever holds another's parameters up to date: evaluation, checkpoints
// and parameters() put the stages' layers together.
//
// The batches, learning rates and SGD are nn::Trainer's (the epoch's permutation of (seed,
// epoch), batches of config.batch, the last partial one too), and a pipeline step's gradients
// are the whole batch's: so P stages and M micro-batches end an epoch where one process ends
// it, up to the order of float additions (tests/test_pipeline_trainer.cpp holds them to it).
//
// Two ways to run the stages: all of them as threads of this process (one trainer, rank 0 of
// 1, drives them inside run_epoch: `--backend threads`), or one stage per rank of a
// communicator (`--backend mpi`: a trainer per process, each holding its own stage alone, which
// makes each stage's resident memory a process's own, read from the kernel). Both take the same
// steps; the writer (rank 0) gathers the whole model at the end of an epoch to evaluate and save.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "concurdl/core/memory.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/sgd.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::mp {

inline constexpr int kMaxStages = 64;

struct PipelineOptions {
  int stages = 2;
  MicroBatching batching;
  bool recompute = false;  // activation recomputation (StepOptions::recompute)
  int chunks = 1;          // model chunks per stage: more than 1 only for interleaved
};

// A row of kSchedules by name ("naive", "gpipe", "1f1b", "interleaved", "zb-h1"; also
// "one_f_one_b"); nullopt otherwise.
std::optional<Schedule> parse_schedule(std::string_view name);

class PipelineTrainer final : public nn::RankTrainer {
 public:
  // config.batch is the global batch (cut into micro-batches); config.threads is ignored (each
  // stage computes on one thread). std::invalid_argument for stages x chunks outside
  // 1..layers, stages above kMaxStages, chunks above 1 but for interleaved, micro-batches
  // outside 1..batch, or data that does not fit the model. A batch whose rows or micro-batch
  // count do not suit interleaving (fewer rows than m, m not a multiple of p) runs every
  // forward first (stage_order).
  PipelineTrainer(nn::TrainConfig config, const nn::Dataset& train, PipelineOptions options);
  // Stage world.rank() of world.size() = options.stages (std::invalid_argument otherwise, and
  // as above): this rank holds its own stage only; every rank calls run_epoch and resume
  // together, evaluate, save and parameters are the writer's (std::logic_error elsewhere).
  PipelineTrainer(dp::Communicator& world, nn::TrainConfig config, const nn::Dataset& train,
                  PipelineOptions options);
  ~PipelineTrainer() override;

  int rank() const override { return world_ != nullptr ? world_->rank() : 0; }
  int size() const override { return world_ != nullptr ? world_->size() : 1; }
  nn::EpochResult run_epoch(const std::function<void(const nn::StepProgress&)>& on_progress,
                            std::size_t report_every) override;
  nn::EvalResult evaluate(const nn::Dataset& d) override;
  // The whole model's checkpoint; its header says mode "pipeline" and the stage count, and
  // resume refuses another's (the micro-batch count and schedule may change: they do not
  // change the arithmetic).
  void save(const std::filesystem::path& checkpoint) const override;
  void resume(const std::filesystem::path& checkpoint) override;
  const nn::TrainState& state() const override { return state_; }
  std::string describe() const override;
  // The epoch's mean step time, its measured bubble fraction (1 - the stages' mean busy time /
  // the step time, averaged over the steps), the schedule's model of it, the largest
  // number of micro-batches whose activations a stage held at once, and the most bytes a stage
  // held for backward (peak_activation_bytes: PipelineStepResult's), each kind's peak of the
  // busiest stage's account, each stage's own (stageS_peak_bytes, stageS_peak_activation_bytes,
  // stageS_activation_model_bytes), and the witness: the process's resident memory over the steps
  // (resident_start_bytes, resident_peak_bytes), or, one stage per process, each stage's
  // (stageS_resident_start_bytes, stageS_resident_peak_bytes).
  std::map<std::string, double> epoch_metrics() const override;

  // The whole model's parameters now, each stage's layers from that stage.
  std::vector<float> parameters() const;
  const std::vector<std::size_t>& boundaries() const { return bounds_; }

 private:
  struct Stage;
  void validate() const;
  void build_stages(int first, int last);  // stages [first, last) held here
  // Stage s's chunks: their spans of the flat buffers and their layers.
  std::vector<std::pair<std::size_t, std::size_t>> spans_of(int s) const;
  Stage& stage(int s) { return *stages_[static_cast<std::size_t>(world_ != nullptr ? 0 : s)]; }
  void assemble(std::span<float> params, std::span<float> velocity) const;
  void gather_to_writer();  // one stage per rank: the stages' layers and momentum to rank 0
  // The epoch's metrics_, from every stage's figures (put together across the ranks).
  void epoch_figures(std::size_t steps, double bubble_sum,
                     const std::optional<ResidentMemory>& resident_start,
                     const std::optional<ResidentMemory>& resident_end);
  void require_writer(const char* what) const;

  nn::TrainConfig config_;
  const nn::Dataset& train_;
  PipelineOptions options_;
  nn::TrainState state_;
  std::vector<std::size_t> bounds_;
  std::vector<std::size_t> offsets_;            // each layer's offset in the flat parameter buffer
  std::vector<std::unique_ptr<Stage>> stages_;  // all of them, or this rank's alone
  std::vector<std::uint32_t> order_;
  std::unique_ptr<nn::Mlp> eval_model_;  // the writer's: evaluation
  std::map<std::string, double> metrics_;
  // One stage per rank: the communicator, and on the writer the whole model's parameters and
  // momentum as the last epoch ended (gather_to_writer) or the checkpoint resumed.
  dp::Communicator* world_ = nullptr;
  std::vector<float> whole_params_, whole_velocity_;
};

}  // namespace concurdl::mp
