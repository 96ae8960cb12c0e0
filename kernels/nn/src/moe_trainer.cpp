// The MLP with a MoE block inside it and its trainer (moe_trainer.hpp). As Trainer: everything
// that decides the numbers is a function of the seed, the epoch and the thread count.
#include "concurdl/nn/moe_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::nn {

MoeSpec MoeBlock::layer_spec(const MlpSpec& mlp) const {
  const std::size_t layers = mlp.widths.size() - 1;
  if (after < 1 || after >= layers)
    throw std::invalid_argument(
        fmt::format("MoeBlock: after hidden layer {}: {} has hidden layers 1 to {}", after,
                    mlp.describe(), layers - 1));
  if (experts < 2)
    throw std::invalid_argument(fmt::format("MoeBlock: {} experts; need at least 2", experts));
  MoeSpec s;
  s.width = mlp.widths[after];
  s.hidden = hidden == 0 ? s.width : hidden;
  s.experts = experts;
  s.top_k = top_k;
  s.capacity_factor = capacity_factor;
  s.dropless = dropless;
  s.aux_alpha = aux_alpha;
  s.residual = true;
  moe_check_spec(s, "MoeBlock");
  return s;
}

std::string MoeBlock::describe(const MlpSpec& mlp) const {
  const MoeSpec s = layer_spec(mlp);
  return fmt::format("{}x{}-top{}-{}-after{}-aux{}", s.experts, s.hidden, s.top_k,
                     dropless ? std::string("dropless") : fmt::format("cap{}", capacity_factor),
                     after, aux_alpha);
}

MoeMlp::MoeMlp(MlpSpec spec, MoeBlock block, std::uint64_t seed, kernels::GemmVersion gemm)
    : block_(block),
      after_(block.after),
      mlp_(spec, seed, gemm),
      moe_(block.layer_spec(spec), mix_seed(seed, 0x6d6f65), gemm) {}

void MoeMlp::forward(const float* x, std::size_t batch) {
  const std::size_t d = moe_.spec().width;
  mixed_.resize(batch * d);
  mlp_.forward_layers(0, after_, x, batch, lower_);
  moe_.forward(lower_.output(), batch, mixed_.data());
  mlp_.forward_layers(after_, mlp_.layers(), mixed_.data(), batch, upper_);
}

MoeMlp::Loss MoeMlp::forward_loss(const float* x, const std::uint8_t* labels, std::size_t batch) {
  forward(x, batch);
  const std::size_t classes = mlp_.spec().widths.back();
  dlogits_.resize(batch * classes);
  const LossResult r = softmax_xent_loss(upper_.output(), labels, batch, classes, dlogits_.data());
  return {static_cast<float>(r.loss), moe_.stats().aux_loss, r.correct};
}

MoeMlp::Loss MoeMlp::forward_backward(const float* x, const std::uint8_t* labels,
                                      std::size_t batch) {
  const Loss l = forward_loss(x, labels, batch);  // dlogits_: the mean loss's gradient
  const std::size_t d = moe_.spec().width;
  dmixed_.resize(batch * d);
  dlower_.resize(batch * d);
  mlp_.backward_layers(after_, mlp_.layers(), upper_, dlogits_.data(), dmixed_.data());
  moe_.backward(dmixed_.data(), dlower_.data());
  mlp_.backward_layers(0, after_, lower_, dlower_.data(), nullptr);
  return l;
}

EvalResult MoeMlp::evaluate(const float* x, const std::uint8_t* labels, std::size_t n,
                            std::size_t batch) {
  if (batch == 0) throw std::invalid_argument("MoeMlp::evaluate: batch 0");
  const std::size_t dim = mlp_.spec().widths.front();
  double loss = 0;
  std::size_t correct = 0;
  for (std::size_t first = 0; first < n; first += batch) {
    const std::size_t rows = std::min(batch, n - first);
    const Loss l = forward_loss(x + first * dim, labels + first, rows);
    loss += static_cast<double>(l.loss) * static_cast<double>(rows);
    correct += l.correct;
  }
  EvalResult r;
  r.samples = n;
  if (n > 0) {
    r.loss = loss / static_cast<double>(n);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  }
  return r;
}

MoeTrainer::MoeTrainer(TrainConfig config, MoeBlock block, const Dataset& train)
    : config_(std::move(config)),
      train_(train),
      model_(config_.spec, block, config_.seed, config_.gemm),
      mlp_opt_(model_.mlp().parameters().size(), config_.sgd),
      moe_opt_(model_.moe().parameters().size(), config_.sgd) {
  if (config_.batch == 0) throw std::invalid_argument("MoeTrainer: batch size 0");
  if (config_.precision != Precision::fp32)
    throw std::invalid_argument("MoeTrainer: float32 only (the MoE layer has no 16-bit path)");
  if (train_.dim != config_.spec.widths.front() || train_.classes > config_.spec.widths.back())
    throw std::invalid_argument("MoeTrainer: the data set does not fit the model " +
                                config_.spec.describe());
  if (train_.n > std::size_t{UINT32_MAX})
    throw std::invalid_argument("MoeTrainer: more than 2^32 samples");
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  state_.seed = config_.seed;
  state_.moe = model_.describe();
}

EpochResult MoeTrainer::run_epoch(const std::function<void(const StepProgress&)>& on_progress,
                                  std::size_t report_every) {
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  const std::size_t n = train_.n, dim = train_.dim, batch = config_.batch;
  const std::size_t steps = (n + batch - 1) / batch;
  if (config_.lr_decay != 1.0f) {
    const float lr = epoch_lr(config_, state_.epoch);
    mlp_opt_.set_lr(lr);
    moe_opt_.set_lr(lr);
  }
  epoch_permutation(n, state_.seed, state_.epoch, order_);
  batch_x_.resize(std::min(batch, n) * dim);
  batch_y_.resize(std::min(batch, n));
  const std::size_t experts = model_.moe().experts(), k = model_.moe().spec().top_k;

  EpochResult result;
  stats_ = MoeEpochStats{};
  stats_.share.assign(experts, 0.0);
  std::size_t dropped = 0, choices = 0;
  EpochMeter meter(on_progress, report_every, steps, state_.epoch);
  for (std::size_t s = 0; s < steps; ++s) {
    const std::size_t first = s * batch, rows = std::min(batch, n - first);
    // Each row made whole by one thread: the same bytes for any split (as Trainer's gather).
    kernels::for_range(
        rows, rows * dim >= (std::size_t{1} << 14), [&](std::size_t b, std::size_t e) {
          for (std::size_t i = b; i < e; ++i) {
            const std::uint32_t idx = order_[first + i];
            float* dst = batch_x_.data() + i * dim;
            if (!train_.pixels.empty()) {
              const std::uint8_t* src = train_.pixels.data() + std::size_t{idx} * dim;
              for (std::size_t c = 0; c < dim; ++c)
                dst[c] = normalise_pixel(src[c], train_.pixel_scale, train_.pixel_shift);
            } else {
              std::memcpy(dst, train_.row(idx), dim * sizeof(float));
            }
            batch_y_[i] = train_.y[idx];
          }
        });
    const MoeMlp::Loss l = model_.forward_backward(batch_x_.data(), batch_y_.data(), rows);
    mlp_opt_.step(model_.mlp().parameters(), model_.mlp().gradients());
    moe_opt_.step(model_.moe().parameters(), model_.moe().gradients());
    ++state_.step;

    const MoeStats& st = model_.moe().stats();
    dropped += st.dropped;
    choices += k * st.tokens;
    stats_.imbalance += st.imbalance;
    stats_.aux_loss += st.aux_loss;
    ++stats_.steps;
    if (s + 1 == steps)
      for (std::size_t i = 0; i < experts; ++i)
        stats_.share[i] = static_cast<double>(st.routed[i]) / static_cast<double>(k * st.tokens);

    meter.add(s, first, rows, l.loss, l.correct, state_.step);
  }
  meter.finish(n, result);
  if (stats_.steps > 0) {
    stats_.dropped_fraction = static_cast<double>(dropped) / static_cast<double>(choices);
    stats_.imbalance /= static_cast<double>(stats_.steps);
    stats_.aux_loss /= static_cast<double>(stats_.steps);
  }
  ++state_.epoch;
  return result;
}

EvalResult MoeTrainer::evaluate(const Dataset& d, std::size_t batch) {
  if (d.dim != config_.spec.widths.front())
    throw std::invalid_argument("MoeTrainer::evaluate: the data set does not fit the model");
  if (config_.threads > 0) kernels::set_compute_threads(config_.threads);
  return model_.evaluate(d.x.data(), d.y.data(), d.n, batch);
}

std::map<std::string, double> MoeTrainer::epoch_metrics() const {
  std::map<std::string, double> m = {{"moe_dropped_fraction", stats_.dropped_fraction},
                                     {"moe_imbalance", stats_.imbalance},
                                     {"moe_aux_loss", stats_.aux_loss}};
  for (std::size_t i = 0; i < stats_.share.size(); ++i)
    m[fmt::format("moe_share_e{}", i)] = stats_.share[i];
  return m;
}

void MoeTrainer::save(const std::filesystem::path& checkpoint) const {
  save_moe_checkpoint(checkpoint, model_, mlp_opt_, moe_opt_, state_);
}

void save_moe_checkpoint(const std::filesystem::path& path, const MoeMlp& model, const Sgd& mlp_opt,
                         const Sgd& moe_opt, const TrainState& state) {
  const Mlp& mlp = model.mlp();
  const MoeLayer& moe = model.moe();
  std::vector<float> params(mlp.parameters().begin(), mlp.parameters().end());
  params.insert(params.end(), moe.parameters().begin(), moe.parameters().end());
  std::vector<float> velocity(mlp_opt.velocity().begin(), mlp_opt.velocity().end());
  velocity.insert(velocity.end(), moe_opt.velocity().begin(), moe_opt.velocity().end());
  save_checkpoint(path, mlp.spec().describe(), params, velocity, mlp_opt.options(), state);
}

void MoeTrainer::resume(const std::filesystem::path& checkpoint) {
  // The checkpoint's seed wins over config().seed, as for Trainer.
  state_ = load_moe_checkpoint(checkpoint, model_, mlp_opt_, moe_opt_);
}

TrainState load_moe_checkpoint(const std::filesystem::path& path, MoeMlp& model, Sgd& mlp_opt,
                               Sgd& moe_opt) {
  const std::size_t a = model.mlp().parameters().size(), total = model.parameter_count();
  std::vector<float> params(total), velocity(total);
  const TrainState state = load_checkpoint(path, model.mlp().spec().describe(), params, velocity,
                                           {}, 0, model.describe());
  std::copy(params.begin(), params.begin() + a, model.mlp().parameters().begin());
  std::copy(params.begin() + a, params.end(), model.moe().parameters().begin());
  std::copy(velocity.begin(), velocity.begin() + a, mlp_opt.velocity().begin());
  std::copy(velocity.begin() + a, velocity.end(), moe_opt.velocity().begin());
  return state;
}

}  // namespace concurdl::nn
