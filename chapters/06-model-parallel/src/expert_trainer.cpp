// Expert-parallel training (expert_trainer.hpp): nn::MoeMlp's MLP on every rank, its block as
// ExpertParallelMoe over the rank's group, three gradient sums a step, the whole model put
// together at the end of each epoch for evaluation and checkpoints.
#include "concurdl/mp/expert_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "concurdl/core/trace.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::mp {

namespace {

int checked_data(const dp::Communicator& world, int data) {
  if (data < 1 || world.size() % data != 0)
    throw std::invalid_argument(
        fmt::format("ExpertParallelTrainer: {} data-parallel groups do not divide {} ranks", data,
                    world.size()));
  return data;
}

// The block as one group's layer: the auxiliary loss's weight shared out over the D groups, so
// that the groups' terms sum to their mean.
nn::MoeSpec group_spec(const nn::TrainConfig& c, const nn::MoeBlock& block, int data) {
  nn::MoeSpec s = block.layer_spec(c.spec);
  s.aux_alpha = block.aux_alpha / static_cast<float>(data);
  return s;
}

void add(ExpertParallelStats::Phases& to, const ExpertParallelStats::Phases& p) {
  to.route += p.route;
  to.dispatch += p.dispatch;
  to.experts += p.experts;
  to.combine += p.combine;
  to.exchange += p.exchange;
}

}  // namespace

ExpertParallelTrainer::ExpertParallelTrainer(dp::Communicator& world, nn::TrainConfig config,
                                             nn::MoeBlock block, const nn::Dataset& train,
                                             ExpertTrainerOptions options)
    : world_(world),
      config_(std::move(config)),
      train_(train),
      options_(options),
      model_(config_.spec, block, config_.seed, config_.gemm),
      mlp_opt_(model_.mlp().parameters().size(), config_.sgd),
      moe_opt_(0, config_.sgd),
      whole_opt_(model_.moe().parameters().size(), config_.sgd) {
  const int D = checked_data(world_, options_.data), P = world_.size() / D;
  if (config_.batch == 0) throw std::invalid_argument("ExpertParallelTrainer: batch size 0");
  if (config_.precision != nn::Precision::fp32)
    throw std::invalid_argument("ExpertParallelTrainer: float32 only");
  if (train_.dim != config_.spec.widths.front() || train_.classes > config_.spec.widths.back())
    throw std::invalid_argument("ExpertParallelTrainer: the data set does not fit the model " +
                                config_.spec.describe());
  if (block.experts < static_cast<std::size_t>(P))
    throw std::invalid_argument(fmt::format(
        "ExpertParallelTrainer: {} experts over groups of {} ranks would leave a rank with none",
        block.experts, P));
  const int w = world_.rank();
  group_ = world_.split(w / P, w % P);
  if (D > 1) data_ = world_.split(w % P, w / P);
  ExpertParallelOptions eo;
  eo.gemm = config_.gemm;
  eo.exchange = options_.exchange;
  moe_ =
      std::make_unique<ExpertParallelMoe>(*group_, group_spec(config_, block, D), config_.seed, eo);
  moe_opt_ = nn::Sgd(moe_->parameters().size(), config_.sgd);
  scatter_model();
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  state_.seed = config_.seed;
  state_.moe = model_.describe();
  stats_.phases.assign(static_cast<std::size_t>(world_.size()), {});
  stats_.expert_rows.assign(static_cast<std::size_t>(world_.size()), 0.0);
}

ExpertParallelTrainer::~ExpertParallelTrainer() = default;

void ExpertParallelTrainer::scatter_model() {
  nn::MoeLayer& whole = model_.moe();
  std::copy_n(whole.router_parameters().begin(), whole.router_parameters().size(),
              moe_->router_parameters().begin());
  const std::size_t router = whole.router_parameters().size();
  std::copy_n(whole_opt_.velocity().begin(), router, moe_opt_.velocity().begin());
  const std::size_t first = moe_->first_expert(), n = moe_->local_experts();
  for (std::size_t e = first; e < first + n; ++e) {
    const std::span<float> from = whole.expert_parameters(e);
    std::copy(from.begin(), from.end(), moe_->expert_parameters(e).begin());
    const std::size_t at = whole.parameter_offsets()[1 + e];
    const std::size_t to = router + (e - first) * from.size();
    std::copy_n(whole_opt_.velocity().begin() + static_cast<std::ptrdiff_t>(at), from.size(),
                moe_opt_.velocity().begin() + static_cast<std::ptrdiff_t>(to));
  }
}

void ExpertParallelTrainer::gather_model() {
  // Parameters then momentum, each expert's written in place by its rank (the router by the
  // group's first) and summed over the group: every other entry adds a zero.
  nn::MoeLayer& whole = model_.moe();
  const std::size_t n = whole.parameters().size(), router = whole.router_parameters().size();
  whole_.assign(2 * n, 0.0f);
  const auto place = [&](std::span<const float> local, std::size_t base) {
    if (group_->rank() == 0) std::copy_n(local.begin(), router, whole_.begin() + base);
    const std::size_t first = moe_->first_expert(), size = nn::moe_expert_size(moe_->spec());
    for (std::size_t e = first; e < first + moe_->local_experts(); ++e)
      std::copy_n(
          local.begin() + static_cast<std::ptrdiff_t>(router + (e - first) * size), size,
          whole_.begin() + static_cast<std::ptrdiff_t>(base + whole.parameter_offsets()[1 + e]));
  };
  place(moe_->parameters(), 0);
  place(moe_opt_.velocity(), n);
  group_->all_reduce(whole_);
  std::copy_n(whole_.begin(), n, whole.parameters().begin());
  std::copy_n(whole_.begin() + static_cast<std::ptrdiff_t>(n), n, whole_opt_.velocity().begin());
}

nn::MoeMlp::Loss ExpertParallelTrainer::forward_backward(const float* x, const std::uint8_t* labels,
                                                         std::size_t rows,
                                                         std::size_t global_rows) {
  nn::Mlp& mlp = model_.mlp();
  const std::size_t after = model_.block().after, layers = mlp.layers();
  const std::size_t d = moe_->spec().width, classes = config_.spec.widths.back();
  nn::MoeMlp::Loss l;
  mixed_.resize(rows * d);
  dmixed_.resize(rows * d);
  dlower_.resize(rows * d);
  // Spans side by side (not nested), so that a timeline shows the layer's phases between the
  // MLP's layers: forward, moe route, moe dispatch, moe experts, moe combine, forward, ...
  {
    trace::Span span("forward", "compute");
    if (rows > 0) mlp.forward_layers(0, after, x, rows, lower_);
  }
  moe_->forward(rows > 0 ? lower_.output() : nullptr, rows, mixed_.data());
  {
    trace::Span span("forward", "compute");
    if (rows > 0) {
      mlp.forward_layers(after, layers, mixed_.data(), rows, upper_);
      dlogits_.resize(rows * classes);
      // This rank's rows' share of the global batch's mean loss: the sums below are plain sums.
      const nn::LossResult r = nn::softmax_xent_loss(upper_.output(), labels, rows, classes,
                                                     dlogits_.data(), global_rows);
      l.loss = static_cast<float>(r.loss);
      l.correct = r.correct;
    }
    l.aux = moe_->stats().global.aux_loss * static_cast<double>(options_.data);
  }
  {
    trace::Span span("backward", "compute");
    if (rows > 0) mlp.backward_layers(after, layers, upper_, dlogits_.data(), dmixed_.data());
  }
  moe_->backward(dmixed_.data(), dlower_.data());
  {
    trace::Span span("backward", "compute");
    if (rows > 0)
      mlp.backward_layers(0, after, lower_, dlower_.data(), nullptr);
    else
      std::fill(mlp.gradients().begin(), mlp.gradients().end(), 0.0f);
  }
  {
    trace::Span span("gradient sums", "comm");
    world_.all_reduce(mlp.gradients());
    world_.all_reduce(moe_->router_gradients());
    if (data_) {
      const std::size_t router = moe_->router_gradients().size();
      data_->all_reduce(moe_->gradients().subspan(router));
    }
  }
  return l;
}

nn::EpochResult ExpertParallelTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t report_every) {
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  const std::size_t n = train_.n, dim = train_.dim;
  const std::size_t global = config_.batch * static_cast<std::size_t>(size());
  const std::size_t steps = (n + global - 1) / global;
  if (config_.lr_decay != 1.0f) {
    const float lr = nn::epoch_lr(config_, state_.epoch);
    mlp_opt_.set_lr(lr);
    moe_opt_.set_lr(lr);
  }
  nn::epoch_permutation(n, state_.seed, state_.epoch, order_);
  batch_x_.resize(config_.batch * dim);
  batch_y_.resize(config_.batch);
  const std::size_t k = moe_->spec().top_k;

  ExpertParallelStats::Phases mine;
  double rows_mine = 0, dropped = 0, choices = 0;
  stats_ = ExpertEpochStats{};
  stats_.phases.assign(static_cast<std::size_t>(size()), {});
  stats_.expert_rows.assign(static_cast<std::size_t>(size()), 0.0);
  nn::EpochResult result;
  nn::EpochMeter meter(on_progress, report_every, steps, state_.epoch);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t s = 0; s < steps; ++s) {
    trace::Span step_span("step", "step");
    const std::size_t first = s * global, global_rows = std::min(global, n - first);
    const dp::Block block = dp::block_of(global_rows, size(), rank());
    nn::gather_batch(train_, order_.data() + first + block.offset, block.count, batch_x_.data(),
                     batch_y_.data());
    const nn::MoeMlp::Loss l =
        forward_backward(batch_x_.data(), batch_y_.data(), block.count, global_rows);
    {
      trace::Span span("sgd", "update");
      mlp_opt_.step(model_.mlp().parameters(), model_.mlp().gradients());
      moe_opt_.step(moe_->parameters(), moe_->gradients());
    }
    ++state_.step;

    const ExpertParallelStats& st = moe_->stats();
    add(mine, st.forward_s);
    add(mine, st.backward_s);
    rows_mine += static_cast<double>(st.rank_rows[static_cast<std::size_t>(group_->rank())]);
    dropped += static_cast<double>(st.global.dropped);
    choices += static_cast<double>(k * st.global.tokens);
    stats_.imbalance += st.global.imbalance;
    stats_.rank_imbalance += st.rank_imbalance;
    stats_.aux_loss += l.aux;
    ++stats_.steps;
    // The step's loss and correct count over every rank, as the meter wants them.
    float sums[2] = {l.loss * static_cast<float>(block.count), static_cast<float>(l.correct)};
    world_.all_reduce(std::span<float>(sums, 2));
    meter.add(s, first, global_rows,
              static_cast<double>(sums[0]) / static_cast<double>(global_rows),
              static_cast<std::size_t>(sums[1] + 0.5f), state_.step);
  }
  stats_.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                  static_cast<double>(std::max<std::size_t>(steps, 1));
  meter.finish(n, result);
  if (stats_.steps > 0) {
    const auto steps_d = static_cast<double>(stats_.steps);
    stats_.dropped_fraction = choices > 0 ? dropped / choices : 0.0;
    stats_.imbalance /= steps_d;
    stats_.rank_imbalance /= steps_d;
    stats_.aux_loss /= steps_d;
    // Every rank's phases and rows, per step.
    std::vector<float> local = {
        static_cast<float>(mine.route / steps_d),    static_cast<float>(mine.dispatch / steps_d),
        static_cast<float>(mine.experts / steps_d),  static_cast<float>(mine.combine / steps_d),
        static_cast<float>(mine.exchange / steps_d), static_cast<float>(rows_mine / steps_d)};
    std::vector<float> all(local.size() * static_cast<std::size_t>(size()));
    world_.all_gather(local, all);
    for (std::size_t r = 0; r < stats_.phases.size(); ++r) {
      const float* v = all.data() + r * local.size();
      stats_.phases[r] = {v[0], v[1], v[2], v[3], v[4]};
      stats_.expert_rows[r] = v[5];
    }
  }
  gather_model();
  ++state_.epoch;
  return result;
}

nn::EvalResult ExpertParallelTrainer::evaluate(const nn::Dataset& d) {
  if (d.dim != config_.spec.widths.front())
    throw std::invalid_argument("ExpertParallelTrainer::evaluate: the data set does not fit");
  return model_.evaluate(d.x.data(), d.y.data(), d.n, 1000);
}

void ExpertParallelTrainer::save(const std::filesystem::path& checkpoint) const {
  nn::save_moe_checkpoint(checkpoint, model_, mlp_opt_, whole_opt_, state_);
}

void ExpertParallelTrainer::resume(const std::filesystem::path& checkpoint) {
  state_ = nn::load_moe_checkpoint(checkpoint, model_, mlp_opt_, whole_opt_);
  scatter_model();
}

std::string ExpertParallelTrainer::describe() const {
  const int D = options_.data, P = size() / D;
  return fmt::format(
      "{} rank{} ({}), MoE {}: experts over {} rank{} per group, {} group{}, batch {} per rank "
      "({} global), {} exchange",
      size(), size() == 1 ? "" : "s", world_.name(), state_.moe, P, P == 1 ? "" : "s", D,
      D == 1 ? "" : "s", config_.batch, config_.batch * static_cast<std::size_t>(size()),
      options_.exchange == TokenExchange::native ? "native" : "pairwise");
}

std::map<std::string, double> ExpertParallelTrainer::epoch_metrics() const {
  std::map<std::string, double> m = {{"moe_dropped_fraction", stats_.dropped_fraction},
                                     {"moe_imbalance", stats_.imbalance},
                                     {"moe_rank_imbalance", stats_.rank_imbalance},
                                     {"moe_aux_loss", stats_.aux_loss},
                                     {"moe_step_s", stats_.step_s}};
  for (std::size_t r = 0; r < stats_.phases.size(); ++r) {
    const ExpertParallelStats::Phases& p = stats_.phases[r];
    m[fmt::format("moe_route_s_r{}", r)] = p.route;
    m[fmt::format("moe_dispatch_s_r{}", r)] = p.dispatch;
    m[fmt::format("moe_experts_s_r{}", r)] = p.experts;
    m[fmt::format("moe_combine_s_r{}", r)] = p.combine;
    m[fmt::format("moe_exchange_s_r{}", r)] = p.exchange;
    m[fmt::format("moe_rows_r{}", r)] = stats_.expert_rows[r];
  }
  return m;
}

}  // namespace concurdl::mp
