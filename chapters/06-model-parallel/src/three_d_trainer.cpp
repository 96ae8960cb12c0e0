// 3D-parallel training (three_d_trainer.hpp).
#include "concurdl/mp/three_d_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "concurdl/core/trace.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::mp {

// One rank of the grid: its stage (built in the first epoch, kept after), its optimizer, its
// batch buffers and its share of the epoch's figures.
struct ThreeDTrainer::Rank {
  std::unique_ptr<ThreeDRank> at;
  std::unique_ptr<nn::Sgd> opt;
  std::vector<float> x;         // first stages: the batch's inputs (their shard's rows)
  std::vector<std::uint8_t> y;  // last stages: the labels
  double step_time = 0, allreduce = 0;
};

ThreeDTrainer::ThreeDTrainer(nn::TrainConfig config, const nn::Dataset& train,
                             ThreeDOptions options)
    : config_(std::move(config)), train_(train), options_(options) {
  const Grid& g = options_.grid;
  const std::size_t layers = config_.spec.widths.size() - 1;
  if (g.data < 1 || g.tensor < 1 || g.pipeline < 1 ||
      static_cast<std::size_t>(g.pipeline) > layers || g.size() > 1024)
    throw std::invalid_argument(fmt::format(
        "ThreeDTrainer: a {} grid for a model of {} layers (need at most one stage a layer)",
        g.describe(), layers));
  if (schedule_row(options_.batching.schedule).three_d == InThreeD::not_offered)
    throw std::invalid_argument(fmt::format("ThreeDTrainer: schedule {} (naive, gpipe or 1f1b)",
                                            schedule_name(options_.batching.schedule)));
  if (options_.batching.micro_batches < 1)
    throw std::invalid_argument("ThreeDTrainer: no micro-batches");
  if (config_.batch == 0) throw std::invalid_argument("ThreeDTrainer: batch size 0");
  if (train_.dim != config_.spec.widths.front() || train_.x.size() != train_.n * train_.dim ||
      train_.y.size() != train_.n || train_.n == 0)
    throw std::invalid_argument("ThreeDTrainer: the data set does not fit the model " +
                                config_.spec.describe());
  // Every stage's tensor split checked now, on one rank's worth of communicators.
  const std::vector<std::size_t> bounds = stage_boundaries(layers, g.pipeline);
  eval_model_ = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm);
  dp::run_threads(g.tensor, [&](dp::Communicator& tp) {
    for (int p = 0; p < g.pipeline; ++p)
      TensorParallelStage(tp, config_.spec, eval_model_->parameters(),
                          bounds[static_cast<std::size_t>(p)],
                          bounds[static_cast<std::size_t>(p) + 1], config_.gemm);
  });
  for (int r = 0; r < g.size(); ++r) ranks_.push_back(std::make_unique<Rank>());
  state_.seed = config_.seed;
  state_.mode = "3d";
  state_.workers = static_cast<std::uint64_t>(g.size());
}

ThreeDTrainer::~ThreeDTrainer() = default;

std::string ThreeDTrainer::describe() const {
  return fmt::format(
      "3D parallelism: {} grid of {} thread ranks, {} micro-batches per data "
      "shard of a batch of {}, schedule {}",
      options_.grid.describe(), options_.grid.size(), options_.batching.micro_batches,
      config_.batch, schedule_name(options_.batching.schedule));
}

nn::EpochResult ThreeDTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t report_every) {
  using Clock = std::chrono::steady_clock;
  kernels::ComputeThreadsScope one(1);  // one compute thread per rank
  const Grid& g = options_.grid;
  const std::size_t n = train_.n, dim = train_.dim, batch = config_.batch;
  const std::size_t steps = (n + batch - 1) / batch;
  const float lr = config_.lr_decay != 1.0f ? nn::epoch_lr(config_, state_.epoch) : config_.sgd.lr;
  nn::epoch_permutation(n, state_.seed, state_.epoch, order_);
  double loss_sum = 0;
  std::size_t correct = 0;
  const auto start = Clock::now();
  dp::run_threads(g.size(), [&](dp::Communicator& world) {
    Rank& me = *ranks_[static_cast<std::size_t>(world.rank())];
    GridGroups groups = split_grid(world, g);
    if (!me.at) {
      me.at = std::make_unique<ThreeDRank>(
          make_three_d_rank(groups, g, config_.spec, eval_model_->parameters(), config_.gemm));
      me.opt = std::make_unique<nn::Sgd>(me.at->stage->parameters().size(), config_.sgd);
    }
    me.at->stage->set_communicator(*groups.tensor);
    if (config_.lr_decay != 1.0f) me.opt->set_lr(lr);
    trace::set_track(
        fmt::format("d{} t{} p{}", me.at->at.data, me.at->at.tensor, me.at->at.pipeline));
    const bool first = me.at->at.pipeline == 0, last = me.at->at.pipeline == g.pipeline - 1;
    if (first) me.x.resize(batch * dim);
    if (last) me.y.resize(batch);
    me.step_time = me.allreduce = 0;
    double window_loss = 0;
    std::size_t window_correct = 0, window_rows = 0;
    for (std::size_t k = 0; k < steps; ++k) {
      const std::size_t offset = k * batch, rows = std::min(batch, n - offset);
      const dp::Block shard = dp::block_of(rows, g.data, me.at->at.data);
      for (std::size_t i = shard.offset; i < shard.offset + shard.count; ++i) {
        const std::uint32_t idx = order_[offset + i];
        if (first) std::memcpy(me.x.data() + i * dim, train_.row(idx), dim * sizeof(float));
        if (last) me.y[i] = train_.y[idx];
      }
      const auto t0 = Clock::now();
      const ThreeDStepResult r =
          three_d_step(groups, *me.at, me.x.data(), me.y.data(), rows,
                       options_.batching.micro_batches, options_.batching.schedule);
      {
        trace::Span update("sgd", "update");
        me.opt->step(me.at->stage->parameters(), me.at->stage->gradients());
      }
      me.step_time += std::chrono::duration<double>(Clock::now() - t0).count();
      me.allreduce += r.allreduce_seconds;
      if (world.rank() != 0) continue;
      loss_sum += r.loss_sum;
      correct += r.correct;
      window_loss += r.loss_sum;
      window_correct += r.correct;
      window_rows += rows;
      if (on_progress && (k + 1 == steps || (report_every > 0 && (k + 1) % report_every == 0))) {
        nn::StepProgress pr;
        pr.epoch = state_.epoch;
        pr.step_in_epoch = k + 1;
        pr.steps_per_epoch = steps;
        pr.step = state_.step + k + 1;
        pr.loss = window_loss / static_cast<double>(window_rows);
        pr.accuracy = static_cast<double>(window_correct) / static_cast<double>(window_rows);
        pr.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        pr.samples = offset + rows;
        on_progress(pr);
        window_loss = 0;
        window_correct = window_rows = 0;
      }
    }
  });
  nn::EpochResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.samples = n;
  r.loss = loss_sum / static_cast<double>(n);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  state_.step += steps;
  ++state_.epoch;
  double step_time = 0, allreduce = 0;
  for (const auto& rank : ranks_) {
    step_time = std::max(step_time, rank->step_time);
    allreduce = std::max(allreduce, rank->allreduce);
  }
  metrics_.clear();
  metrics_["step_seconds"] = step_time / static_cast<double>(steps);
  metrics_["data_allreduce_seconds"] = allreduce / static_cast<double>(steps);
  return r;
}

std::map<std::string, double> ThreeDTrainer::epoch_metrics() const { return metrics_; }

void ThreeDTrainer::assemble(std::span<float> params, std::span<float> velocity) const {
  if (!ranks_.front()->at) {  // no epoch yet: the initial model
    std::copy(eval_model_->parameters().begin(), eval_model_->parameters().end(), params.begin());
    if (!velocity.empty()) std::fill(velocity.begin(), velocity.end(), 0.0f);
    return;
  }
  for (const auto& rank : ranks_) {
    if (rank->at->at.data != 0) continue;  // every data replica holds the same
    rank->at->stage->scatter(rank->at->stage->parameters(), params);
    if (!velocity.empty()) rank->at->stage->scatter(rank->opt->velocity(), velocity);
  }
}

std::vector<float> ThreeDTrainer::parameters() const {
  std::vector<float> p(eval_model_->parameters().size());
  assemble(p, {});
  return p;
}

nn::EvalResult ThreeDTrainer::evaluate(const nn::Dataset& d) {
  kernels::ComputeThreadsScope one(1);
  const std::vector<float> p = parameters();
  std::copy(p.begin(), p.end(), eval_model_->parameters().begin());
  return eval_model_->evaluate(d.x.data(), d.y.data(), d.n);
}

void ThreeDTrainer::save(const std::filesystem::path& checkpoint) const {
  nn::Mlp model(config_.spec, config_.seed, config_.gemm);
  nn::Sgd opt(model.parameters().size(), config_.sgd);
  assemble(model.parameters(), opt.velocity());
  nn::save_checkpoint(checkpoint, model, opt, state_);
}

void ThreeDTrainer::resume(const std::filesystem::path& checkpoint) {
  nn::Mlp model(config_.spec, config_.seed, config_.gemm);
  nn::Sgd opt(model.parameters().size(), config_.sgd);
  nn::TrainState loaded = nn::load_checkpoint(checkpoint, model, opt, "3d",
                                              static_cast<std::uint64_t>(options_.grid.size()));
  std::copy(model.parameters().begin(), model.parameters().end(),
            eval_model_->parameters().begin());
  // The ranks' stages are built again from the loaded model in the next epoch, and their
  // velocities from the loaded optimizer.
  const Grid& g = options_.grid;
  dp::run_threads(g.size(), [&](dp::Communicator& world) {
    Rank& me = *ranks_[static_cast<std::size_t>(world.rank())];
    GridGroups groups = split_grid(world, g);
    me.at = std::make_unique<ThreeDRank>(
        make_three_d_rank(groups, g, config_.spec, model.parameters(), config_.gemm));
    me.opt = std::make_unique<nn::Sgd>(me.at->stage->parameters().size(), config_.sgd);
    me.at->stage->gather(opt.velocity(), me.opt->velocity());
  });
  loaded.mode = "3d";
  loaded.workers = static_cast<std::uint64_t>(g.size());
  state_ = loaded;
}

}  // namespace concurdl::mp
