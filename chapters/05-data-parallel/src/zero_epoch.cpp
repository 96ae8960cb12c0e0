// ZeRO's trainer between steps (zero.hpp): the epoch (its steps' memory, and each rank's resident
// memory under MPI), the whole state only the writer keeps between epochs (gathered layer by
// layer), evaluation, checkpoints and the records' figures. The step itself is in zero.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "concurdl/dp/zero.hpp"
#include "concurdl/nn/checkpoint.hpp"

namespace concurdl::dp {

void ZeroTrainer::consolidate() {
  queue_->wait_all();
  const int stage = options_.stage;
  if (stage == 0) return;  // every rank holds the whole state already
  const bool writer = rank() == 0;
  // Layer by layer, through one layer's buffer: no rank holds more than one layer whole beyond
  // its shards, and the writer keeps what it gathers.
  CountedBuffer whole(ledger_, MemoryKind::communication);
  if (writer) {
    full_momentum_.assign(parameter_count(), 0.0f);
    if (stage >= 3 && !full_model_) {
      full_model_ = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm, &ledger_);
      full_model_->release_gradients();
    }
  }
  const auto gather = [&](const Layer& ly, const float* shard, float* into) {
    whole.allocate(ly.count);
    std::memcpy(whole.data() + ly.mine.offset, shard + ly.shard_offset,
                ly.mine.count * sizeof(float));
    all_gather_ring(comm_, whole.span(), options_.algo);
    if (writer) std::memcpy(into + ly.offset, whole.data(), ly.count * sizeof(float));
    whole.release();
  };
  for (const Layer& ly : layers_) {
    gather(ly, velocity_.data(), full_momentum_.data());
    if (stage >= 3)
      gather(ly, param_shard_.data(), writer ? full_model_->parameters().data() : nullptr);
  }
}

void ZeroTrainer::drop_consolidated() {
  full_model_.reset();
  kernels::release(full_momentum_);
}

std::span<const float> ZeroTrainer::momentum_at_epoch_end() const {
  if (options_.stage == 0) return velocity_.span();
  return {full_momentum_.data(), full_momentum_.size()};
}

std::vector<float> ZeroTrainer::gather_parameters() {
  queue_->wait_all();
  std::vector<float> out(parameter_count());
  if (options_.stage < 3) {
    std::copy(model_.parameters().begin(), model_.parameters().end(), out.begin());
    return out;
  }
  for (const Layer& ly : layers_) {
    const std::span<float> whole = std::span<float>(out).subspan(ly.offset, ly.count);
    std::memcpy(whole.data() + ly.mine.offset, param_shard_.data() + ly.shard_offset,
                ly.mine.count * sizeof(float));
    all_gather_ring(comm_, whole, options_.algo);
  }
  return out;
}

nn::EpochResult ZeroTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t report_every) {
  if (epoch_started_ && step_in_epoch_ != 0)
    throw std::logic_error("ZeroTrainer::run_epoch: an epoch is half done (step())");
  start_epoch();
  drop_consolidated();
  ledger_.reset_peak();
  // The witness, where this rank is a process of its own: the kernel's count of its resident
  // memory over the steps.
  const bool own_process = comm_.name() == "mpi";
  const std::optional<ResidentMemory> resident_start =
      own_process && reset_resident_peak() ? resident_memory() : std::nullopt;
  nn::EpochResult result = run_rank_epoch(
      comm_, steps_per_epoch(), train_.n, state_.epoch, [this] { return step(); },
      [this] { return state_.step; }, on_progress, report_every);
  queue_->wait_all();
  steps_memory_ = {ledger_.current(), ledger_.peak(), ledger_.peak_total()};
  if (own_process) {  // every rank's (start, peak) in MiB, to every rank (a collective)
    resident_mib_.assign(2 * static_cast<std::size_t>(size()), 0.0f);
    const std::optional<ResidentMemory> now = resident_memory();
    if (resident_start && now) {
      constexpr double kMiB = 1024.0 * 1024.0;
      resident_mib_[2 * static_cast<std::size_t>(rank())] =
          static_cast<float>(static_cast<double>(resident_start->rss_bytes) / kMiB);
      resident_mib_[2 * static_cast<std::size_t>(rank()) + 1] =
          static_cast<float>(static_cast<double>(now->hwm_bytes) / kMiB);
    }
    comm_.all_reduce(resident_mib_);
  }
  consolidate();  // the whole state, for evaluate and save (a collective: every rank)
  return result;
}

nn::EvalResult ZeroTrainer::evaluate(const nn::Dataset& d) {
  if (options_.stage < 3) return model_.evaluate(d.x.data(), d.y.data(), d.n);
  if (!full_model_)
    throw std::logic_error(
        "ZeroTrainer::evaluate: stage 3 holds the whole model only on rank 0, between epochs "
        "(after run_epoch)");
  return full_model_->evaluate(d.x.data(), d.y.data(), d.n);
}

void ZeroTrainer::save(const std::filesystem::path& checkpoint) const {
  if ((options_.stage >= 3 && !full_model_) ||
      (options_.stage >= 1 && full_momentum_.size() != parameter_count()))
    throw std::logic_error(
        "ZeroTrainer::save: the whole state is held only on rank 0, between epochs");
  const nn::Mlp& params = options_.stage >= 3 ? *full_model_ : model_;
  // The checkpoint's optimizer: a copy of the momentum, for as long as the write takes.
  nn::Sgd opt(parameter_count(), config_.sgd, &ledger_);
  const std::span<const float> v = momentum_at_epoch_end();
  std::copy(v.begin(), v.end(), opt.velocity().begin());
  nn::save_checkpoint(checkpoint, params, opt, state_);
}

void ZeroTrainer::resume(const std::filesystem::path& checkpoint) {
  queue_->wait_all();
  drop_consolidated();
  auto loaded_model = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm, &ledger_);
  auto loaded_opt = std::make_unique<nn::Sgd>(parameter_count(), config_.sgd, &ledger_);
  nn::TrainState loaded = nn::load_checkpoint(checkpoint, *loaded_model, *loaded_opt, "sync",
                                              static_cast<std::uint64_t>(size()));
  const std::span<const float> p = loaded_model->parameters();
  const std::span<const float> v = loaded_opt->velocity();
  if (options_.stage < 3) std::copy(p.begin(), p.end(), model_.parameters().begin());
  if (options_.stage == 0) std::copy(v.begin(), v.end(), velocity_.span().begin());
  for (const Layer& ly : layers_) {
    const std::size_t from = ly.offset + ly.mine.offset;
    if (options_.stage >= 3)
      std::copy_n(p.begin() + static_cast<std::ptrdiff_t>(from), ly.mine.count,
                  param_shard_.data() + ly.shard_offset);
    if (options_.stage >= 1)
      std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(from), ly.mine.count,
                  velocity_.data() + ly.shard_offset);
  }
  // The writer keeps the whole state it read, as after an epoch; the others only their shards.
  if (rank() == 0) {
    if (options_.stage >= 3) {
      loaded_model->release_gradients();
      full_model_ = std::move(loaded_model);
    }
    if (options_.stage >= 1) full_momentum_.assign(v.begin(), v.end());
  }
  loaded.mode = "sync";
  loaded.workers = static_cast<std::uint64_t>(size());
  state_ = loaded;
  epoch_started_ = false;
  step_in_epoch_ = 0;
}

std::map<std::string, double> ZeroTrainer::epoch_metrics() const {
  std::map<std::string, double> m;
  const MemoryBytes now = steps_memory_.now, peak = steps_memory_.peak;
  const ZeroModel model = zero_model(parameter_count(), size(), stage());
  for (std::size_t k = 0; k < kMemoryKinds; ++k) {
    m[fmt::format("{}_bytes", kMemoryKindNames[k])] = static_cast<double>(now.bytes[k]);
    m[fmt::format("{}_peak_bytes", kMemoryKindNames[k])] = static_cast<double>(peak.bytes[k]);
  }
  m["peak_bytes"] = static_cast<double>(steps_memory_.peak_total);
  for (std::size_t r = 0; 2 * r + 1 < resident_mib_.size(); ++r)
    if (resident_mib_[2 * r + 1] > 0) {
      m[fmt::format("rank{}_resident_start_mib", r)] = resident_mib_[2 * r];
      m[fmt::format("rank{}_resident_peak_mib", r)] = resident_mib_[2 * r + 1];
    }
  m["parameters_model_bytes"] = model.parameters;
  m["gradients_model_bytes"] = model.gradients;
  m["optimizer_model_bytes"] = model.optimizer;
  m["zero_stage"] = stage();
  if (steps_counted_ > 0) {
    m["sent_bytes_per_step"] =
        static_cast<double>(step_bytes_sent_) / static_cast<double>(steps_counted_);
    m["sent_model_bytes_per_step"] = model.sent_per_step;
  }
  return m;
}

}  // namespace concurdl::dp
