// The MLP (mlp.hpp): Linear -> ReLU -> ... -> Linear -> softmax cross-entropy, forward and
// backward through kernels::gemm and the element-wise kernels of ops.hpp. Row-major, batch
// major; layer l maps A_{l-1} (batch x in) to A_l (batch x out):
//   forward   Z = A_{l-1} W^T + b          gemm(no, yes): W is stored out x in
//             A_l = relu(Z)                (not on the last layer: Z are the logits)
//   backward  dZ = dA_l * (A_l > 0)        (not on the last layer: dZ are the dlogits)
//             dW = dZ^T A_{l-1}            gemm(yes, no): out x in, like W
//             db = column sums of dZ       (over the batch)
//             dA_{l-1} = dZ W              gemm(no, no)
// Each layer's backward starts with its own ReLU, so a range of layers needs only its input and
// its layers' outputs, and hands dA of its input to the range below. The element-wise steps are
// fused into the GEMMs (kernels::GemmEpilogue): + b and the ReLU into the forward one, inside a
// range the ReLU' of layer l - 1 into layer l's dA GEMM; each thread of the GEMM finishes its
// own part of the output, with the bits of the separate passes.
#include "concurdl/nn/mlp.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "concurdl/kernels/ops.hpp"
#include "concurdl/nn/random.hpp"
#include "step_span.hpp"

namespace concurdl::nn {

using kernels::Trans;

std::string MlpSpec::describe() const {
  std::string s;
  for (std::size_t i = 0; i < widths.size(); ++i) {
    if (i > 0) s += '-';
    s += std::to_string(widths[i]);
  }
  return s;
}

MlpSpec MlpSpec::parse(std::string_view text) {
  const std::string quoted = "MLP architecture '" + std::string(text) + "': ";
  MlpSpec spec;
  spec.widths.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = text.find('-', start);
    const std::string_view part =
        text.substr(start, dash == std::string_view::npos ? std::string_view::npos : dash - start);
    std::size_t w = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), w);
    if (part.empty() || ec != std::errc{} || end != part.data() + part.size())
      throw std::invalid_argument(quoted + "'" + std::string(part) +
                                  "' is not a width (want layer widths joined by '-', e.g. "
                                  "784-256-128-10)");
    if (w == 0) throw std::invalid_argument(quoted + "a layer of width 0");
    spec.widths.push_back(w);
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  if (spec.widths.size() < 2)
    throw std::invalid_argument(quoted + "need at least two widths (inputs and classes)");
  return spec;
}

Mlp::Mlp(MlpSpec spec, std::uint64_t seed, kernels::GemmVersion gemm, MemoryAccount* account)
    : spec_(std::move(spec)),
      gemm_(gemm),
      params_(kernels::LineAllocator<float>(account, MemoryKind::parameters)),
      grads_(kernels::LineAllocator<float>(account, MemoryKind::gradients)),
      step_acts_(account),
      dlogits_(kernels::LineAllocator<float>(account, MemoryKind::workspace)),
      mixed_(account) {
  if (spec_.widths.size() < 2)
    throw std::invalid_argument("Mlp: need at least two widths, got '" + spec_.describe() + "'");
  for (const std::size_t w : spec_.widths)
    if (w == 0)
      throw std::invalid_argument("Mlp: a layer of width 0 in '" + spec_.describe() + "'");
  if (spec_.widths.back() > 256)
    throw std::invalid_argument("Mlp: labels are bytes, so at most 256 classes, not " +
                                std::to_string(spec_.widths.back()));
  offsets_.push_back(0);
  for (std::size_t l = 0; l < layers(); ++l) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    offsets_.push_back(offsets_.back() + out * in + out);
  }
  params_.assign(offsets_.back(), 0.0f);
  grads_.assign(offsets_.back(), 0.0f);
  // He-uniform: W ~ U(-sqrt(6 / in), sqrt(6 / in)) keeps the ReLU activations' variance steady
  // from layer to layer; biases start at 0. One stream per layer, so widening one layer does not
  // change the others' initial weights.
  for (std::size_t l = 0; l < layers(); ++l) {
    const LayerView v = layer(l);
    const float bound = std::sqrt(6.0f / static_cast<float>(v.w.cols));
    std::uint64_t state = mix_seed(seed, 0x494E4954 /* "INIT" */, l);
    for (std::size_t i = 0; i < v.w.rows * v.w.cols; ++i)
      v.w.data[i] = (2.0f * uniform01(state) - 1.0f) * bound;
  }
}

LayerView Mlp::layer(std::size_t l) {
  if (mixed_.params_current) mixed_.params_current = false;  // a view to write through
  if (l >= layers()) throw std::out_of_range("Mlp::layer: no layer " + std::to_string(l));
  const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
  float* base = const_cast<float*>(weights(l));
  return {{base, out, in, in}, {base + out * in, out}};
}

LayerView Mlp::layer_gradient(std::size_t l) {
  if (l >= layers()) throw std::out_of_range("Mlp::layer_gradient: no layer " + std::to_string(l));
  const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
  float* base = gradient_of(l);
  return {{base, out, in, in}, {base + out * in, out}};
}

void Mlp::release_parameters() {
  mixed_.params_current = false;
  kernels::release(params_);
  bound_params_.assign(layers(), nullptr);
}

void Mlp::release_gradients() {
  kernels::release(grads_);
  bound_grads_.assign(layers(), nullptr);
}

void Mlp::bind_layer_parameters(std::size_t l, float* params) {
  if (bound_params_.empty())
    throw std::logic_error(
        "Mlp::bind_layer_parameters: the model owns its parameters "
        "(release_parameters() first)");
  if (l >= layers())
    throw std::out_of_range("Mlp::bind_layer_parameters: no layer " + std::to_string(l));
  bound_params_[l] = params;
}

void Mlp::bind_layer_gradients(std::size_t l, float* grads) {
  if (bound_grads_.empty())
    throw std::logic_error(
        "Mlp::bind_layer_gradients: the model owns its gradients "
        "(release_gradients() first)");
  if (l >= layers())
    throw std::out_of_range("Mlp::bind_layer_gradients: no layer " + std::to_string(l));
  bound_grads_[l] = grads;
}

const float* Mlp::weights(std::size_t l) const {
  if (bound_params_.empty()) return params_.data() + offsets_[l];
  if (bound_params_[l] == nullptr)
    throw std::logic_error("Mlp: layer " + std::to_string(l) +
                           "'s parameters are released and not bound");
  return bound_params_[l];
}

float* Mlp::gradient_of(std::size_t l) {
  if (bound_grads_.empty()) return grads_.data() + offsets_[l];
  if (bound_grads_[l] == nullptr)
    throw std::logic_error("Mlp: layer " + std::to_string(l) +
                           "'s gradients are released and not bound");
  return bound_grads_[l];
}

Activations::Activations(MemoryAccount* account)
    : kept_(account, MemoryKind::activations),
      scratch_(account, MemoryKind::workspace),
      delta_{kernels::LineVector<float>(scratch_), kernels::LineVector<float>(scratch_)} {}

void Activations::release() {
  outputs_.clear();
  deltas_.clear();
  outputs_.shrink_to_fit();
  deltas_.shrink_to_fit();
  for (auto& d : delta_) kernels::release(d);
  batch_ = 0;
  input_ = nullptr;
  deltas_pending_ = false;
}

std::size_t Activations::bytes() const {
  std::size_t floats = delta_[0].capacity() + delta_[1].capacity();
  for (const kernels::LineVector<float>& o : outputs_) floats += o.capacity();
  return floats * sizeof(float);
}

std::size_t Activations::output_bytes() const {
  std::size_t floats = 0;
  for (const kernels::LineVector<float>& o : outputs_) floats += o.capacity();
  return floats * sizeof(float);
}

std::size_t Activations::pending_gradient_bytes() const {
  if (!deltas_pending_) return 0;
  std::size_t floats = 0;
  for (std::size_t i = delta_first_ - first_; i < delta_last_ - first_; ++i)
    floats += deltas_[i].capacity();
  return floats * sizeof(float);
}

const float* Activations::output(std::size_t l) const {
  if (batch_ == 0 || l < first_ || l >= last_)
    throw std::out_of_range("Activations::output: no output of layer " + std::to_string(l) +
                            (batch_ == 0 ? " (nothing ran forward yet)"
                                         : " (these hold layers [" + std::to_string(first_) + ", " +
                                               std::to_string(last_) + "))"));
  return outputs_[l - first_].data();
}

LossResult softmax_xent_loss(const float* logits, const std::uint8_t* labels, std::size_t rows,
                             std::size_t classes, float* dlogits, std::size_t total_rows) {
  if (rows > 0 && (logits == nullptr || labels == nullptr || dlogits == nullptr))
    throw std::invalid_argument("softmax_xent_loss: null buffer");
  LossResult r;
  // Counted first: dlogits may be the logits, overwritten below.
  r.correct = kernels::argmax_correct(logits, labels, rows, classes);
  r.loss = kernels::softmax_xent_forward(logits, labels, rows, classes, dlogits);
  kernels::softmax_xent_backward(dlogits, labels, rows, classes, dlogits);  // / rows
  if (total_rows != 0 && total_rows != rows)
    kernels::scale(rows * classes, static_cast<float>(rows) / static_cast<float>(total_rows),
                   dlogits);
  return r;
}

void Mlp::check_range(const char* who, std::size_t first, std::size_t last) const {
  if (first >= last || last > layers())
    throw std::invalid_argument(std::string(who) + ": bad layer range [" + std::to_string(first) +
                                ", " + std::to_string(last) +
                                "): want first < last <= " + std::to_string(layers()) + " (" +
                                spec_.describe() + " has " + std::to_string(layers()) + " layers)");
}

void Mlp::forward_layers(std::size_t first, std::size_t last, const float* in, std::size_t batch,
                         Activations& a) const {
  check_range("Mlp::forward_layers", first, last);
  if (batch == 0) throw std::invalid_argument("Mlp::forward_layers: empty batch");
  if (in == nullptr) throw std::invalid_argument("Mlp::forward_layers: null input");
  a.first_ = first;
  a.last_ = last;
  a.batch_ = batch;
  a.input_ = in;
  a.deltas_pending_ = false;  // a split backward's W left waiting is dropped
  a.outputs_.resize(std::min(a.outputs_.size(), last - first));
  while (a.outputs_.size() < last - first) a.outputs_.emplace_back(a.kept_);
  const float* in_act = in;
  for (std::size_t l = first; l < last; ++l) {
    const std::size_t in_w = spec_.widths[l], out = spec_.widths[l + 1];
    const float* w = weights(l);
    kernels::LineVector<float>& out_act = a.outputs_[l - first];
    out_act.resize(batch * out);
    // The bias and the ReLU fused into the GEMM: each thread finishes its own part of Z.
    StepSpan gemm_span(l, "fwd_gemm");
    kernels::gemm(gemm_, Trans::no, Trans::yes, batch, out, in_w, 1.0f, in_act, in_w, w, in_w, 0.0f,
                  out_act.data(), out, {.bias = w + out * in_w, .relu = l + 1 < layers()});
    gemm_span.end();
    in_act = out_act.data();
  }
}

void Mlp::backward_layers(std::size_t first, std::size_t last, Activations& a, const float* dout,
                          float* din, bool accumulate,
                          const std::function<void(std::size_t)>& on_layer_done) {
  backward(first, last, a, dout, din, accumulate, on_layer_done, nullptr);
}

void Mlp::backward(std::size_t first, std::size_t last, Activations& a, const float* dout,
                   float* din, bool accumulate,
                   const std::function<void(std::size_t)>& on_layer_done, Sgd* fuse) {
  check_range("Mlp::backward_layers", first, last);
  if (fuse != nullptr && (accumulate || on_layer_done))  // the update needs the whole gradient
    throw std::invalid_argument(
        "Mlp::backward: a fused update neither accumulates nor hands out gradients");
  if (a.batch_ == 0 || first < a.first_ || last > a.last_)
    throw std::invalid_argument(
        "Mlp::backward_layers: layer range [" + std::to_string(first) + ", " +
        std::to_string(last) + ") did not run forward in these activations (they hold " +
        (a.batch_ == 0 ? std::string("none")
                       : "[" + std::to_string(a.first_) + ", " + std::to_string(a.last_) + ")") +
        ")");
  if (dout == nullptr) throw std::invalid_argument("Mlp::backward_layers: null dout");
  const std::size_t batch = a.batch_;
  const float beta = accumulate ? 1.0f : 0.0f;
  // delta is dZ of the layer at hand; it starts as dout itself when no ReLU is in the way
  // (the logits), else in one of a's two scratch buffers, and the buffers alternate below.
  const float* delta = dout;
  std::size_t spare = 0;
  if (last < layers()) {
    const std::size_t n = batch * spec_.widths[last];
    StepSpan span(last - 1, "relu_grad");
    a.delta_[0].assign(dout, dout + n);
    kernels::relu_backward(a.output(last - 1), a.delta_[0].data(), n);
    delta = a.delta_[0].data();
    spare = 1;
  }
  for (std::size_t l = last; l-- > first;) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const float* w = weights(l);
    float* gw = gradient_of(l);
    const float* in_act = l == a.first_ ? a.input_ : a.output(l - 1);
    // The layer's own gradients, and with `fuse` its update: the weights' inside their GEMM,
    // then the biases' (sgd_update, as Sgd::step does it).
    const auto layer_gradient = [&] {
      {
        StepSpan span(l, "dw_gemm");
        kernels::GemmSgd update;  // beta is 0 when fused: backward refuses accumulate with it
        if (fuse != nullptr) {
          const SgdOptions& o = fuse->options();
          update = {.params = params_.data() + offsets_[l],  // fused: own storage (train_step)
                    .velocity = fuse->velocity().data() + offsets_[l],
                    .lr = o.lr,
                    .momentum = o.momentum,
                    .weight_decay = o.weight_decay};
        }
        kernels::gemm(gemm_, Trans::yes, Trans::no, out, in, batch, 1.0f, delta, out, in_act, in,
                      beta, gw, in, {.sgd = fuse != nullptr ? &update : nullptr});
      }
      {
        StepSpan span(l, "db");
        kernels::column_sums(delta, batch, out, out, gw + out * in, beta);
      }
      if (fuse != nullptr) {
        StepSpan span("sgd");
        fuse->step_range(params_, grads_, offsets_[l] + out * in, out);
      }
      if (on_layer_done) on_layer_done(l);
    };
    // Unfused, the gradient first, so that on_layer_done can start its all-reduce early; fused,
    // the input's gradient first, from the weights before their update.
    if (fuse == nullptr) layer_gradient();
    if (l == first) {  // the input's gradient only when asked for: nothing in range needs it
      if (din != nullptr) {
        StepSpan span(l, "da_gemm");
        kernels::gemm(gemm_, Trans::no, Trans::no, batch, in, out, 1.0f, delta, out, w, in, 0.0f,
                      din, in);
      }
      if (fuse != nullptr) layer_gradient();
      break;
    }
    kernels::LineVector<float>& next = a.delta_[spare];
    next.resize(batch * in);
    // Layer l - 1's ReLU' fused into the GEMM that computes its output's gradient.
    StepSpan da_span(l, "da_gemm");
    kernels::gemm(gemm_, Trans::no, Trans::no, batch, in, out, 1.0f, delta, out, w, in, 0.0f,
                  next.data(), in, {.relu_of = in_act, .ld_relu_of = in});
    da_span.end();
    if (fuse != nullptr) layer_gradient();
    delta = next.data();
    spare ^= 1;
  }
}

void Mlp::backward_input_layers(std::size_t first, std::size_t last, Activations& a,
                                const float* dout, float* din) {
  check_range("Mlp::backward_input_layers", first, last);
  if (a.batch_ == 0 || first < a.first_ || last > a.last_)
    throw std::invalid_argument("Mlp::backward_input_layers: layer range [" +
                                std::to_string(first) + ", " + std::to_string(last) +
                                ") did not run forward in these activations");
  if (a.deltas_pending_)
    throw std::logic_error(
        "Mlp::backward_input_layers: the last split backward on these activations has not run "
        "its backward_weight_layers yet");
  if (dout == nullptr) throw std::invalid_argument("Mlp::backward_input_layers: null dout");
  const std::size_t batch = a.batch_;
  a.deltas_.resize(std::min(a.deltas_.size(), a.last_ - a.first_));
  while (a.deltas_.size() < a.last_ - a.first_) a.deltas_.emplace_back(a.kept_);
  // The top layer's dZ: dout, through the layer's ReLU when it has one (as backward does).
  {
    const std::size_t n = batch * spec_.widths[last];
    kernels::LineVector<float>& top = a.deltas_[last - 1 - a.first_];
    top.assign(dout, dout + n);
    if (last < layers()) {
      StepSpan span(last - 1, "relu_grad");
      kernels::relu_backward(a.output(last - 1), top.data(), n);
    }
  }
  for (std::size_t l = last; l-- > first;) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const float* delta = a.deltas_[l - a.first_].data();
    const float* w = weights(l);
    if (l == first) {
      if (din != nullptr) {
        StepSpan span(l, "da_gemm");
        kernels::gemm(gemm_, Trans::no, Trans::no, batch, in, out, 1.0f, delta, out, w, in, 0.0f,
                      din, in);
      }
      break;
    }
    kernels::LineVector<float>& next = a.deltas_[l - 1 - a.first_];
    next.resize(batch * in);
    StepSpan span(l, "da_gemm");
    kernels::gemm(gemm_, Trans::no, Trans::no, batch, in, out, 1.0f, delta, out, w, in, 0.0f,
                  next.data(), in, {.relu_of = a.output(l - 1), .ld_relu_of = in});
  }
  a.delta_first_ = first;
  a.delta_last_ = last;
  a.deltas_pending_ = true;
}

void Mlp::backward_weight_layers(std::size_t first, std::size_t last, Activations& a,
                                 bool accumulate) {
  check_range("Mlp::backward_weight_layers", first, last);
  if (!a.deltas_pending_ || a.delta_first_ != first || a.delta_last_ != last)
    throw std::logic_error("Mlp::backward_weight_layers: no backward_input_layers over [" +
                           std::to_string(first) + ", " + std::to_string(last) +
                           ") is waiting for it on these activations");
  const std::size_t batch = a.batch_;
  const float beta = accumulate ? 1.0f : 0.0f;
  for (std::size_t l = last; l-- > first;) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const float* delta = a.deltas_[l - a.first_].data();
    const float* in_act = l == a.first_ ? a.input_ : a.output(l - 1);
    float* gw = gradient_of(l);
    {
      StepSpan span(l, "dw_gemm");
      kernels::gemm(gemm_, Trans::yes, Trans::no, out, in, batch, 1.0f, delta, out, in_act, in,
                    beta, gw, in);
    }
    StepSpan span(l, "db");
    kernels::column_sums(delta, batch, out, out, gw + out * in, beta);
  }
  a.deltas_pending_ = false;
}

void Mlp::forward(const float* x, std::size_t batch, float* logits) const {
  if (batch == 0) return;
  if (x == nullptr || logits == nullptr) throw std::invalid_argument("Mlp::forward: null buffer");
  Activations a;
  forward_layers(0, layers(), x, batch, a);
  std::copy_n(a.output(), batch * spec_.widths.back(), logits);
}

float Mlp::forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                            std::size_t* correct) {
  return forward_backward(x, labels, batch, correct, nullptr);
}

float Mlp::forward_loss(const char* who, const float* x, const std::uint8_t* labels,
                        std::size_t batch, std::size_t* correct) {
  if (batch == 0) throw std::invalid_argument(std::string(who) + ": empty batch");
  if (labels == nullptr) throw std::invalid_argument(std::string(who) + ": null labels");
  if (x == nullptr) throw std::invalid_argument(std::string(who) + ": null input");
  forward_layers(0, layers(), x, batch, step_acts_);
  dlogits_.resize(batch * spec_.widths.back());
  StepSpan loss_span("loss");
  const LossResult head =
      softmax_xent_loss(step_acts_.output(), labels, batch, spec_.widths.back(), dlogits_.data());
  loss_span.end();
  if (correct != nullptr) *correct = head.correct;
  return static_cast<float>(head.loss);
}

float Mlp::forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                            std::size_t* correct, float* dx) {
  const float loss = forward_loss("Mlp::forward_backward", x, labels, batch, correct);
  backward_layers(0, layers(), step_acts_, dlogits_.data(), dx);
  return loss;
}

float Mlp::train_step(const float* x, const std::uint8_t* labels, std::size_t batch, Sgd& opt,
                      std::size_t* correct) {
  if (!bound_params_.empty() || !bound_grads_.empty())
    throw std::logic_error("Mlp::train_step: the fused update needs the model's own storage");
  if (opt.velocity().size() != params_.size())
    throw std::invalid_argument("Mlp::train_step: the optimiser holds " +
                                std::to_string(opt.velocity().size()) + " velocities for " +
                                std::to_string(params_.size()) + " parameters");
  const float loss = forward_loss("Mlp::train_step", x, labels, batch, correct);
  mixed_.params_current = false;  // the update below writes the parameters
  backward(0, layers(), step_acts_, dlogits_.data(), nullptr, false, {}, &opt);
  return loss;
}

EvalResult Mlp::evaluate(const float* x, const std::uint8_t* labels, std::size_t n,
                         std::size_t batch) const {
  EvalResult r;
  if (n == 0) return r;
  if (batch == 0) throw std::invalid_argument("Mlp::evaluate: batch of 0");
  const std::size_t in = spec_.widths.front(), classes = spec_.widths.back();
  Activations a;
  std::vector<float> dlogits(std::min(batch, n) * classes);  // the head writes it; unused here
  double loss_sum = 0;
  std::size_t hits = 0;
  for (std::size_t b = 0; b < n; b += batch) {
    const std::size_t rows = std::min(batch, n - b);
    forward_layers(0, layers(), x + b * in, rows, a);
    const LossResult head =
        softmax_xent_loss(a.output(), labels + b, rows, classes, dlogits.data());
    hits += head.correct;
    loss_sum += head.loss * static_cast<double>(rows);
  }
  r.samples = n;
  r.loss = loss_sum / static_cast<double>(n);
  r.accuracy = static_cast<double>(hits) / static_cast<double>(n);
  return r;
}

}  // namespace concurdl::nn
