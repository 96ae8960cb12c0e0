// Pipeline-parallel training (pipeline_trainer.hpp), and its registration as `concurdl train
// --pipeline P` (the training mode "pipeline").
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
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::mp {

std::optional<Schedule> parse_schedule(std::string_view name) {
  if (name == "one_f_one_b") return Schedule::one_f_one_b;  // the enumerator's name, too
  if (const ScheduleRow* r = kSchedules.lookup(name)) return r->schedule;
  return std::nullopt;
}

// One stage: its own layers' parameters and gradients (the model's layers bound to them; the
// other layers' are not held), the SGD state of those layers, and its share of the epoch's
// figures.
struct PipelineTrainer::Stage {
  // Its chunks' spans of the flat parameter buffer, [lo, hi) each, and their layers.
  Stage(const nn::TrainConfig& c, std::vector<std::pair<std::size_t, std::size_t>> spans,
        const std::vector<std::pair<std::size_t, std::size_t>>& layers)
      : model(c.spec, c.seed, c.gemm, &memory),
        spans(std::move(spans)),
        x(kernels::LineAllocator<float>(&memory, MemoryKind::activations)) {
    const auto& off = model.layer_offsets();
    own.reserve(this->spans.size());  // the layers point into them: no reallocation
    for (std::size_t k = 0; k < this->spans.size(); ++k) {
      const auto [lo, hi] = this->spans[k];
      opt.emplace_back(hi - lo, c.sgd, &memory);
      Chunk& ch = own.emplace_back(Chunk{kernels::LineVector<float>(kernels::LineAllocator<float>(
                                             &memory, MemoryKind::parameters)),
                                         kernels::LineVector<float>(kernels::LineAllocator<float>(
                                             &memory, MemoryKind::gradients))});
      const auto p = model.parameters();
      ch.params.assign(p.begin() + static_cast<std::ptrdiff_t>(lo),
                       p.begin() + static_cast<std::ptrdiff_t>(hi));
      ch.grads.assign(hi - lo, 0.0f);
    }
    model.release_parameters();  // the whole model's flat buffers go; each stage keeps its own
    model.release_gradients();
    for (std::size_t k = 0; k < this->spans.size(); ++k)
      for (std::size_t l = layers[k].first; l < layers[k].second; ++l) {
        model.bind_layer_parameters(l, own[k].params.data() + (off[l] - this->spans[k].first));
        model.bind_layer_gradients(l, own[k].grads.data() + (off[l] - this->spans[k].first));
      }
  }
  ~Stage() {
    for (std::size_t l = 0; l < model.layers(); ++l) {
      model.bind_layer_parameters(l, nullptr);
      model.bind_layer_gradients(l, nullptr);
    }
  }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  MemoryAccount memory;  // every buffer of the stage: its layers, optimizer, batch, steps
  nn::Mlp model;
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // per chunk: [lo, hi)
  struct Chunk {
    kernels::LineVector<float> params, grads;  // the chunk's span of the flat buffers
  };
  std::vector<Chunk> own;        // per chunk
  std::vector<nn::Sgd> opt;      // per chunk: over its span
  kernels::LineVector<float> x;  // stage 0: the batch's inputs
  std::vector<std::uint8_t> y;   // the last stage: its labels
  PipelineWorkspace ws;          // a step's buffers
  double loss_sum = 0, busy = 0, step_time = 0;
  std::size_t correct = 0, peak = 0, peak_bytes = 0;
  MemoryBytes step_peak;  // per kind, the most one step's buffers held
};

PipelineTrainer::PipelineTrainer(nn::TrainConfig config, const nn::Dataset& train,
                                 PipelineOptions options)
    : config_(std::move(config)), train_(train), options_(options) {
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
  bounds_ = stage_boundaries(layers, options_.stages * options_.chunks);
  eval_model_ = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm);
  const auto& off = eval_model_->layer_offsets();
  for (int s = 0; s < options_.stages; ++s) {
    std::vector<std::pair<std::size_t, std::size_t>> spans, layers_of;
    for (int c = 0; c < options_.chunks; ++c) {
      const auto piece = static_cast<std::size_t>(c * options_.stages + s);
      spans.emplace_back(off[bounds_[piece]], off[bounds_[piece + 1]]);
      layers_of.emplace_back(bounds_[piece], bounds_[piece + 1]);
    }
    stages_.push_back(std::make_unique<Stage>(config_, std::move(spans), layers_of));
  }
  stages_.front()->x.resize(config_.batch * train_.dim);
  stages_.back()->y.resize(config_.batch);
  state_.seed = config_.seed;
  state_.mode = "pipeline";
  state_.workers = static_cast<std::uint64_t>(options_.stages);
}

PipelineTrainer::~PipelineTrainer() = default;

std::string PipelineTrainer::describe() const {
  return fmt::format(
      "pipeline of {} stage{} (threads), layers {}, {} micro-batches per batch "
      "of {}, schedule {}{}{}",
      options_.stages, options_.stages == 1 ? "" : "s", fmt::join(bounds_, "|"),
      options_.batching.micro_batches, config_.batch, schedule_name(options_.batching.schedule),
      options_.chunks > 1 ? fmt::format(" ({} chunks a stage)", options_.chunks) : "",
      options_.recompute ? ", activations recomputed" : "");
}

nn::EpochResult PipelineTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t report_every) {
  using Clock = std::chrono::steady_clock;
  kernels::ComputeThreadsScope one(1);  // one compute thread per worker
  const std::size_t n = train_.n, dim = train_.dim, batch = config_.batch;
  const std::size_t steps = (n + batch - 1) / batch;
  const float lr = config_.lr_decay != 1.0f ? nn::epoch_lr(config_, state_.epoch) : config_.sgd.lr;
  nn::epoch_permutation(n, state_.seed, state_.epoch, order_);
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
  // The witness: the process's resident memory over the epoch's steps (all stages are threads
  // of this process), as the kernel counts it.
  const std::optional<ResidentMemory> resident_start =
      reset_resident_peak() ? resident_memory() : std::nullopt;
  const auto start = Clock::now();
  dp::run_threads(p, [&](dp::Communicator& comm) {
    const int s = comm.rank();
    trace::set_track(fmt::format("stage {}", s));
    Stage& st = *stages_[static_cast<std::size_t>(s)];
    const bool first = s == 0, last = s == p - 1;
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
      // The step's bubble: what the stages did not compute of the step's wall time, which is
      // stage 0's (it starts the first forward and ends with the last backward). The stages'
      // busy times reach stage 0 by a one-float all-reduce.
      std::vector<float> busy_all = {static_cast<float>(r.busy_seconds)};
      comm.all_reduce(busy_all);
      if (first && r.step_seconds > 0)
        bubble_sum += 1.0 - static_cast<double>(busy_all[0]) / (p * r.step_seconds);
      if (last) {
        st.loss_sum += r.loss_sum;
        st.correct += r.correct;
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
    }
  });
  nn::EpochResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.samples = n;
  const Stage& tail = *stages_.back();
  r.loss = tail.loss_sum / static_cast<double>(n);
  r.accuracy = static_cast<double>(tail.correct) / static_cast<double>(n);
  state_.step += steps;
  ++state_.epoch;

  metrics_.clear();
  double step_time = 0, busy_total = 0;
  std::size_t peak = 0, peak_bytes = 0;
  for (const auto& st : stages_) {
    step_time = std::max(step_time, st->step_time);
    busy_total += st->busy;
    peak = std::max(peak, st->peak);
    peak_bytes = std::max(peak_bytes, st->peak_bytes);
  }
  const double m = static_cast<double>(std::min(options_.batching.micro_batches, batch));
  metrics_["pipeline_step_seconds"] = step_time / static_cast<double>(steps);
  metrics_["pipeline_busy_seconds"] = busy_total / (p * static_cast<double>(steps));
  metrics_["bubble_fraction"] = bubble_sum / static_cast<double>(steps);
  metrics_["bubble_model"] = schedule_row(options_.batching.schedule).bubble(p, m, options_.chunks);
  metrics_["peak_activations"] = static_cast<double>(peak);
  metrics_["peak_activation_bytes"] = static_cast<double>(peak_bytes);
  // Beside it, the model of the same (activation_model, which walks each stage's order: other
  // code than the allocator's count): the largest stage's, full-size micro-batches.
  std::size_t model_bytes = 0;
  const auto mb = static_cast<std::size_t>(m);
  for (int s = 0; s < p; ++s)
    model_bytes = std::max(model_bytes, activation_model(config_.spec, bounds_, s, p,
                                                         stage_order(options_.batching.schedule, s,
                                                                     p, mb, options_.chunks),
                                                         (batch + mb - 1) / mb, options_.recompute)
                                            .peak_bytes);
  metrics_["peak_activation_model_bytes"] = static_cast<double>(model_bytes);
  // Memory by kind, measured (each stage's account): the busiest stage's (the most bytes at
  // once over the epoch), and what the steps' own buffers held at most.
  const Stage* busiest = stages_.front().get();
  for (const auto& st : stages_)
    if (st->memory.peak_total() > busiest->memory.peak_total()) busiest = st.get();
  const MemoryBytes stage_peak = busiest->memory.peak();
  for (std::size_t kind = 0; kind < kMemoryKinds; ++kind) {
    metrics_[fmt::format("stage_{}_peak_bytes", kMemoryKindNames[kind])] =
        static_cast<double>(stage_peak.bytes[kind]);
    metrics_[fmt::format("step_{}_peak_bytes", kMemoryKindNames[kind])] =
        static_cast<double>(busiest->step_peak.bytes[kind]);
  }
  metrics_["stage_peak_bytes"] = static_cast<double>(busiest->memory.peak_total());
  for (std::size_t s = 0; s < stages_.size(); ++s)
    if (stages_[s].get() == busiest) metrics_["busiest_stage"] = static_cast<double>(s);
  if (resident_start)
    if (const std::optional<ResidentMemory> now = resident_memory()) {
      metrics_["resident_start_bytes"] = static_cast<double>(resident_start->rss_bytes);
      metrics_["resident_peak_bytes"] = static_cast<double>(now->hwm_bytes);
    }
  return r;
}

std::map<std::string, double> PipelineTrainer::epoch_metrics() const { return metrics_; }

void PipelineTrainer::assemble(std::span<float> params, std::span<float> velocity) const {
  for (const auto& st : stages_) {
    for (std::size_t c = 0; c < st->spans.size(); ++c) {
      const auto lo = static_cast<std::ptrdiff_t>(st->spans[c].first);
      std::copy(st->own[c].params.begin(), st->own[c].params.end(), params.begin() + lo);
      if (!velocity.empty())
        std::copy(st->opt[c].velocity().begin(), st->opt[c].velocity().end(),
                  velocity.begin() + lo);
    }
  }
}

std::vector<float> PipelineTrainer::parameters() const {
  std::vector<float> p(eval_model_->parameters().size());
  assemble(p, {});
  return p;
}

nn::EvalResult PipelineTrainer::evaluate(const nn::Dataset& d) {
  kernels::ComputeThreadsScope one(1);  // one compute thread per worker
  assemble(eval_model_->parameters(), {});
  return eval_model_->evaluate(d.x.data(), d.y.data(), d.n);
}

void PipelineTrainer::save(const std::filesystem::path& checkpoint) const {
  nn::Mlp model(config_.spec, config_.seed, config_.gemm);
  nn::Sgd opt(model.parameters().size(), config_.sgd);
  assemble(model.parameters(), opt.velocity());
  nn::save_checkpoint(checkpoint, model, opt, state_);
}

void PipelineTrainer::resume(const std::filesystem::path& checkpoint) {
  nn::Mlp model(config_.spec, config_.seed, config_.gemm);
  nn::Sgd opt(model.parameters().size(), config_.sgd);
  nn::TrainState loaded = nn::load_checkpoint(checkpoint, model, opt, "pipeline",
                                              static_cast<std::uint64_t>(options_.stages));
  for (auto& st : stages_) {
    const auto p = model.parameters();
    const auto v = opt.velocity();
    for (std::size_t c = 0; c < st->spans.size(); ++c) {
      const auto lo = static_cast<std::ptrdiff_t>(st->spans[c].first);
      const auto hi = static_cast<std::ptrdiff_t>(st->spans[c].second);
      std::copy(p.begin() + lo, p.begin() + hi, st->own[c].params.begin());
      std::copy(v.begin() + lo, v.begin() + hi, st->opt[c].velocity().begin());
    }
  }
  loaded.mode = "pipeline";
  loaded.workers = static_cast<std::uint64_t>(options_.stages);
  state_ = loaded;
}

}  // namespace concurdl::mp
