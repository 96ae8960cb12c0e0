// Pipeline-parallel training (pipeline_trainer.hpp): the stages built, and an epoch's steps run
// on them as threads of this process or one stage a rank, with the epoch's figures
// (pipeline_trainer_state.cpp: the stages put together between epochs; train_mode.cpp
// registers it as `concurdl train --pipeline P`).
#include "concurdl/mp/pipeline_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/memory.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/random.hpp"
#include "pipeline_stage.hpp"

namespace concurdl::mp {

std::optional<Schedule> parse_schedule(std::string_view name) {
  if (name == "one_f_one_b") return Schedule::one_f_one_b;  // the enumerator's name, too
  if (const ScheduleRow* r = kSchedules.lookup(name)) return r->schedule;
  return std::nullopt;
}

void PipelineTrainer::validate() const {
  const std::size_t layers = config_.spec.widths.size() - 1;
  if (options_.chunks < 1 ||
      (options_.chunks > 1 &&
       schedule_row(options_.batching.schedule).chunking != Chunking::v_chunks))
    throw std::invalid_argument(fmt::format(
        "PipelineTrainer: {} chunks a stage under {} (more than one only for interleaved)",
        options_.chunks, schedule_name(options_.batching.schedule)));
  if (options_.stages < 1 || options_.stages > kMaxStages ||
      static_cast<std::size_t>(options_.stages * options_.chunks) > layers)
    throw std::invalid_argument(fmt::format(
        "PipelineTrainer: {} stages x {} chunks for a model of {} layers (need 1 .. layers, "
        "at most {} stages)",
        options_.stages, options_.chunks, layers, kMaxStages));
  if (config_.batch == 0) throw std::invalid_argument("PipelineTrainer: batch size 0");
  if (options_.batching.micro_batches < 1 || options_.batching.micro_batches > config_.batch)
    throw std::invalid_argument(
        fmt::format("PipelineTrainer: {} micro-batches of a batch of {} (need 1 .. batch)",
                    options_.batching.micro_batches, config_.batch));
  if (train_.dim != config_.spec.widths.front() || train_.x.size() != train_.n * train_.dim ||
      train_.y.size() != train_.n || train_.n == 0)
    throw std::invalid_argument("PipelineTrainer: the data set does not fit the model " +
                                config_.spec.describe());
}

std::vector<std::pair<std::size_t, std::size_t>> PipelineTrainer::spans_of(int s) const {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (int c = 0; c < options_.chunks; ++c) {
    const auto piece = static_cast<std::size_t>(c * options_.stages + s);
    spans.emplace_back(offsets_[bounds_[piece]], offsets_[bounds_[piece + 1]]);
  }
  return spans;
}

void PipelineTrainer::build_stages(int first, int last) {
  bounds_ = stage_boundaries(config_.spec.widths.size() - 1, options_.stages * options_.chunks);
  for (int s = first; s < last; ++s) {
    std::vector<std::pair<std::size_t, std::size_t>> layers_of;
    for (int c = 0; c < options_.chunks; ++c) {
      const auto piece = static_cast<std::size_t>(c * options_.stages + s);
      layers_of.emplace_back(bounds_[piece], bounds_[piece + 1]);
    }
    stages_.push_back(std::make_unique<Stage>(config_, s, spans_of(s), layers_of));
  }
  for (auto& st : stages_) {
    if (st->index == 0) st->x.resize(config_.batch * train_.dim);
    if (st->index == options_.stages - 1) st->y.resize(config_.batch);
  }
  state_.seed = config_.seed;
  state_.mode = "pipeline";
  state_.workers = static_cast<std::uint64_t>(options_.stages);
}

PipelineTrainer::PipelineTrainer(nn::TrainConfig config, const nn::Dataset& train,
                                 PipelineOptions options)
    : config_(std::move(config)), train_(train), options_(options) {
  validate();
  eval_model_ = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm);
  offsets_ = eval_model_->layer_offsets();
  build_stages(0, options_.stages);
}

PipelineTrainer::PipelineTrainer(dp::Communicator& world, nn::TrainConfig config,
                                 const nn::Dataset& train, PipelineOptions options)
    : config_(std::move(config)), train_(train), options_(options), world_(&world) {
  if (world.size() != options_.stages)
    throw std::invalid_argument(
        fmt::format("PipelineTrainer: {} stages over a communicator of {} ranks (one stage a rank)",
                    options_.stages, world.size()));
  validate();
  // The initial model (every rank draws the same from the seed): its layout for every rank,
  // its parameters for the writer's first evaluation; then it goes.
  nn::Mlp initial(config_.spec, config_.seed, config_.gemm);
  offsets_ = initial.layer_offsets();
  if (writer()) {
    whole_params_.assign(initial.parameters().begin(), initial.parameters().end());
    whole_velocity_.assign(whole_params_.size(), 0.0f);
  }
  build_stages(world.rank(), world.rank() + 1);
}

PipelineTrainer::~PipelineTrainer() = default;

std::string PipelineTrainer::describe() const {
  return fmt::format(
      "pipeline of {} stage{} ({}), layers {}, {} micro-batches per batch "
      "of {}, schedule {}{}{}",
      options_.stages, options_.stages == 1 ? "" : "s",
      world_ != nullptr ? fmt::format("one a rank, {}", world_->name()) : std::string("threads"),
      fmt::join(bounds_, "|"), options_.batching.micro_batches, config_.batch,
      schedule_name(options_.batching.schedule),
      options_.chunks > 1 ? fmt::format(" ({} chunks a stage)", options_.chunks) : "",
      options_.recompute ? ", activations recomputed" : "");
}

namespace {

// Sums v over the ranks where each entry is one rank's own (the others give 0), in double
// precision: each value travels as two floats, hi + lo, and adding zeros is exact.
void all_reduce_own(dp::Communicator& comm, std::span<double> v) {
  std::vector<float> f(2 * v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    f[2 * i] = static_cast<float>(v[i]);
    f[2 * i + 1] = static_cast<float>(v[i] - static_cast<double>(f[2 * i]));
  }
  comm.all_reduce(f);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(f[2 * i]) + static_cast<double>(f[2 * i + 1]);
}

}  // namespace

nn::EpochResult PipelineTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t report_every) {
  using Clock = std::chrono::steady_clock;
  kernels::ComputeThreadsScope one(1);  // one compute thread per worker
  const std::size_t n = train_.n, dim = train_.dim, batch = config_.batch;
  const std::size_t steps = (n + batch - 1) / batch;
  const float lr = config_.lr_decay != 1.0f ? nn::epoch_lr(config_, state_.epoch) : config_.sgd.lr;
  nn::epoch_permutation(n, state_.seed, state_.epoch, order_);
  // The writer's whole model of the last epoch goes before the steps (gathered again after).
  std::vector<float>().swap(whole_params_);
  std::vector<float>().swap(whole_velocity_);
  for (auto& st : stages_) {
    st->loss_sum = st->busy = st->step_time = 0;
    st->correct = st->peak = st->peak_bytes = 0;
    st->step_peak = {};
    st->memory.reset_peak();
    if (config_.lr_decay != 1.0f)
      for (nn::Sgd& o : st->opt) o.set_lr(lr);
  }
  const int p = options_.stages;
  double bubble_sum = 0;  // over the steps, written by stage 0 alone
  // The witness: this process's resident memory over the epoch's steps (all stages, when they
  // are threads of it; its own stage, one stage a process), as the kernel counts it.
  const std::optional<ResidentMemory> resident_start =
      reset_resident_peak() ? resident_memory() : std::nullopt;
  const auto start = Clock::now();
  const auto body = [&](dp::Communicator& comm) {
    const int s = comm.rank();
    trace::set_track(fmt::format("stage {}", s));
    Stage& st = stage(s);
    const bool first = s == 0, last = s == p - 1;
    // The progress: stage 0's thread, or every rank (each its own trainer).
    const bool reports = on_progress && (first || world_ != nullptr);
    double window_loss = 0;
    std::size_t window_correct = 0, window_rows = 0;
    for (std::size_t k = 0; k < steps; ++k) {
      const std::size_t offset = k * batch, rows = std::min(batch, n - offset);
      for (std::size_t i = 0; i < rows; ++i) {
        const std::uint32_t idx = order_[offset + i];
        if (first) std::memcpy(st.x.data() + i * dim, train_.row(idx), dim * sizeof(float));
        if (last) st.y[i] = train_.y[idx];
      }
      const std::size_t m = std::min(options_.batching.micro_batches, rows);
      const PipelineStepResult r =
          pipeline_step(comm, st.model, bounds_, first ? st.x.data() : nullptr,
                        last ? st.y.data() : nullptr, rows, m, options_.batching.schedule, &st.ws,
                        {.recompute = options_.recompute, .memory = &st.memory});
      {
        trace::Span update("sgd", "update");
        for (std::size_t c = 0; c < st.spans.size(); ++c)
          st.opt[c].step(st.own[c].params, st.own[c].grads);
      }
      st.busy += r.busy_seconds;
      st.step_time += r.step_seconds;
      st.peak = std::max(st.peak, r.peak_activations);
      st.peak_bytes = std::max(st.peak_bytes, r.peak_activation_bytes);
      for (std::size_t kind = 0; kind < kMemoryKinds; ++kind)
        st.step_peak.bytes[kind] = std::max(st.step_peak.bytes[kind], r.peak_memory.bytes[kind]);
      // The step's figures every stage learns by one small all-reduce: the stages' busy times
      // (for the bubble: what the stages did not compute of the step's wall time, which is
      // stage 0's, as it starts the first forward and ends with the last backward), and the
      // last stage's loss and correct count (for the progress and the epoch's result).
      // The loss travels as two floats (hi + lo: the other stages add zeros, so it arrives
      // whole), the count as one (exact below 2^24 rows).
      const double loss = last ? r.loss_sum : 0.0;
      const auto loss_hi = static_cast<float>(loss);
      std::vector<float> figures = {static_cast<float>(r.busy_seconds), loss_hi,
                                    static_cast<float>(loss - static_cast<double>(loss_hi)),
                                    last ? static_cast<float>(r.correct) : 0.0f};
      comm.all_reduce(figures);
      if (first && r.step_seconds > 0)
        bubble_sum += 1.0 - static_cast<double>(figures[0]) / (p * r.step_seconds);
      const double step_loss = static_cast<double>(figures[1]) + static_cast<double>(figures[2]);
      const auto step_correct = static_cast<std::size_t>(figures[3]);
      st.loss_sum += step_loss;
      st.correct += step_correct;
      if (!reports) continue;
      window_loss += step_loss;
      window_correct += step_correct;
      window_rows += rows;
      if (k + 1 == steps || (report_every > 0 && (k + 1) % report_every == 0)) {
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
  };
  if (world_ != nullptr)
    body(*world_);
  else
    dp::run_threads(p, body);
  nn::EpochResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.samples = n;
  const Stage& any = *stages_.front();  // every stage summed the last stage's figures
  r.loss = any.loss_sum / static_cast<double>(n);
  r.accuracy = static_cast<double>(any.correct) / static_cast<double>(n);
  state_.step += steps;
  ++state_.epoch;
  const std::optional<ResidentMemory> resident_end =
      resident_start ? resident_memory() : std::nullopt;
  epoch_figures(steps, bubble_sum, resident_start, resident_end);
  if (world_ != nullptr) gather_to_writer();
  return r;
}

void PipelineTrainer::epoch_figures(std::size_t steps, double bubble_sum,
                                    const std::optional<ResidentMemory>& resident_start,
                                    const std::optional<ResidentMemory>& resident_end) {
  const int p = options_.stages;
  // A row of figures per stage: each stage's own, put together across the ranks when the
  // stages are processes (every rank fills its row, the all-reduce adds the rows).
  enum : std::size_t { step_time, busy, peak, peak_bytes, peak_total, bubble, rss, hwm, kinds };
  constexpr std::size_t width = kinds + 2 * kMemoryKinds;
  std::vector<double> rows(width * static_cast<std::size_t>(p), 0.0);
  const bool witnessed = resident_start && resident_end;
  for (const auto& st : stages_) {
    double* row = rows.data() + width * static_cast<std::size_t>(st->index);
    row[step_time] = st->step_time;
    row[busy] = st->busy;
    row[peak] = static_cast<double>(st->peak);
    row[peak_bytes] = static_cast<double>(st->peak_bytes);
    row[peak_total] = static_cast<double>(st->memory.peak_total());
    row[bubble] = st->index == 0 ? bubble_sum : 0.0;
    if (witnessed && (world_ != nullptr || st->index == 0)) {
      row[rss] = static_cast<double>(resident_start->rss_bytes);
      row[hwm] = static_cast<double>(resident_end->hwm_bytes);
    }
    const MemoryBytes stage_peak = st->memory.peak();
    for (std::size_t kind = 0; kind < kMemoryKinds; ++kind) {
      row[kinds + kind] = static_cast<double>(stage_peak.bytes[kind]);
      row[kinds + kMemoryKinds + kind] = static_cast<double>(st->step_peak.bytes[kind]);
    }
  }
  if (world_ != nullptr) {
    // Which ranks could read the witness, as a count beside the rows.
    rows.push_back(witnessed ? 1.0 : 0.0);
    all_reduce_own(*world_, rows);
    if (rows.back() != static_cast<double>(p))  // a rank without /proc: none is reported
      for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s)
        rows[width * s + rss] = rows[width * s + hwm] = 0;
    rows.pop_back();
  }
  const auto at = [&](std::size_t s, std::size_t f) { return rows[width * s + f]; };

  metrics_.clear();
  double step_sum = 0, busy_total = 0, peak_most = 0, peak_bytes_most = 0;
  std::size_t busiest = 0;
  for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s) {
    step_sum = std::max(step_sum, at(s, step_time));
    busy_total += at(s, busy);
    peak_most = std::max(peak_most, at(s, peak));
    peak_bytes_most = std::max(peak_bytes_most, at(s, peak_bytes));
    // The busiest stage: the most bytes at once over the epoch.
    if (at(s, peak_total) > at(busiest, peak_total)) busiest = s;
  }
  const std::size_t batch = config_.batch;
  const double m = static_cast<double>(std::min(options_.batching.micro_batches, batch));
  metrics_["pipeline_step_seconds"] = step_sum / static_cast<double>(steps);
  metrics_["pipeline_busy_seconds"] = busy_total / (p * static_cast<double>(steps));
  metrics_["bubble_fraction"] = at(0, bubble) / static_cast<double>(steps);
  metrics_["bubble_model"] = schedule_row(options_.batching.schedule).bubble(p, m, options_.chunks);
  metrics_["peak_activations"] = peak_most;
  metrics_["peak_activation_bytes"] = peak_bytes_most;
  // Beside it, the model of the same (activation_model, which walks each stage's order: other
  // code than the allocator's count): the largest stage's, full-size micro-batches.
  // Each stage's own beside it, with its account's peak (all kinds and activations alone), so
  // that a stage's process can be held to its own figures.
  std::size_t model_bytes = 0;
  const auto mb = static_cast<std::size_t>(m);
  for (int s = 0; s < p; ++s) {
    const std::size_t stage_model =
        activation_model(config_.spec, bounds_, s, p,
                         stage_order(options_.batching.schedule, s, p, mb, options_.chunks),
                         (batch + mb - 1) / mb, options_.recompute)
            .peak_bytes;
    model_bytes = std::max(model_bytes, stage_model);
    const auto u = static_cast<std::size_t>(s);
    metrics_[fmt::format("stage{}_activation_model_bytes", s)] = static_cast<double>(stage_model);
    metrics_[fmt::format("stage{}_peak_activation_bytes", s)] = at(u, peak_bytes);
    metrics_[fmt::format("stage{}_peak_bytes", s)] = at(u, peak_total);
  }
  metrics_["peak_activation_model_bytes"] = static_cast<double>(model_bytes);
  // Memory by kind, measured (each stage's account): the busiest stage's, and what the steps'
  // own buffers held at most.
  for (std::size_t kind = 0; kind < kMemoryKinds; ++kind) {
    metrics_[fmt::format("stage_{}_peak_bytes", kMemoryKindNames[kind])] =
        at(busiest, kinds + kind);
    metrics_[fmt::format("step_{}_peak_bytes", kMemoryKindNames[kind])] =
        at(busiest, kinds + kMemoryKinds + kind);
  }
  metrics_["stage_peak_bytes"] = at(busiest, peak_total);
  metrics_["busiest_stage"] = static_cast<double>(busiest);
  if (world_ == nullptr) {
    if (at(0, hwm) > 0) {
      metrics_["resident_start_bytes"] = at(0, rss);
      metrics_["resident_peak_bytes"] = at(0, hwm);
    }
  } else {
    for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s)
      if (at(s, hwm) > 0) {
        metrics_[fmt::format("stage{}_resident_start_bytes", s)] = at(s, rss);
        metrics_[fmt::format("stage{}_resident_peak_bytes", s)] = at(s, hwm);
      }
  }
}

std::map<std::string, double> PipelineTrainer::epoch_metrics() const { return metrics_; }

}  // namespace concurdl::mp
