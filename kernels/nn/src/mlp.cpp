// The MLP (mlp.hpp): Linear -> ReLU -> ... -> Linear -> softmax cross-entropy, forward and
// backward through kernels::gemm and the element-wise kernels of ops.hpp. Row-major, batch
// major; layer l maps A_{l-1} (batch x in) to A_l (batch x out):
//   forward   Z = A_{l-1} W^T + b          gemm(no, yes): W is stored out x in
//             A_l = relu(Z)                (not on the last layer: Z are the logits)
//   backward  dW = dZ^T A_{l-1}            gemm(yes, no): out x in, like W
//             db = column sums of dZ       (over the batch)
//             dA_{l-1} = dZ W              gemm(no, no)
//             dZ_{l-1} = dA_{l-1} * (A_{l-1} > 0)
#include "concurdl/nn/mlp.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "concurdl/kernels/ops.hpp"
#include "concurdl/nn/random.hpp"

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

Mlp::Mlp(MlpSpec spec, std::uint64_t seed, kernels::GemmVersion gemm)
    : spec_(std::move(spec)), gemm_(gemm) {
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
  acts_.resize(layers());
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
  if (l >= layers()) throw std::out_of_range("Mlp::layer: no layer " + std::to_string(l));
  const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
  float* base = params_.data() + offsets_[l];
  return {{base, out, in, in}, {base + out * in, out}};
}

LayerView Mlp::layer_gradient(std::size_t l) {
  if (l >= layers()) throw std::out_of_range("Mlp::layer_gradient: no layer " + std::to_string(l));
  const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
  float* base = grads_.data() + offsets_[l];
  return {{base, out, in, in}, {base + out * in, out}};
}

// Runs the layers on x; the last layer's output goes to `logits` (batch x classes), the hidden
// activations stay in acts_ for backward().
void Mlp::forward(const float* x, std::size_t batch, float* logits) {
  if (batch == 0) return;
  if (x == nullptr || logits == nullptr) throw std::invalid_argument("Mlp::forward: null buffer");
  const float* in_act = x;
  for (std::size_t l = 0; l < layers(); ++l) {
    const LayerView v = layer(l);
    const std::size_t in = v.w.cols, out = v.w.rows;
    const bool last = l + 1 == layers();
    float* out_act = logits;
    if (!last) {
      acts_[l].resize(batch * out);
      out_act = acts_[l].data();
    }
    kernels::gemm(gemm_, Trans::no, Trans::yes, batch, out, in, 1.0f, in_act, in, v.w.data, in,
                  0.0f, out_act, out);
    kernels::add_bias_rows(out_act, batch, out, out, v.b.data());
    if (!last) kernels::relu_forward(out_act, out_act, batch * out);
    in_act = out_act;
  }
}

float Mlp::forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                            std::size_t* correct) {
  return forward_backward(x, labels, batch, correct, nullptr);
}

float Mlp::forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                            std::size_t* correct, float* dx) {
  if (batch == 0) throw std::invalid_argument("Mlp::forward_backward: empty batch");
  if (labels == nullptr) throw std::invalid_argument("Mlp::forward_backward: null labels");
  const std::size_t classes = spec_.widths.back();
  probs_.resize(batch * classes);
  forward(x, batch, probs_.data());  // logits, turned into probabilities in place below
  if (correct != nullptr) *correct = kernels::argmax_correct(probs_.data(), labels, batch, classes);
  const double loss =
      kernels::softmax_xent_forward(probs_.data(), labels, batch, classes, probs_.data());
  delta_.resize(batch * classes);
  kernels::softmax_xent_backward(probs_.data(), labels, batch, classes, delta_.data());

  for (std::size_t l = layers(); l-- > 0;) {
    const LayerView v = layer(l), g = layer_gradient(l);
    const std::size_t in = v.w.cols, out = v.w.rows;
    const float* in_act = l == 0 ? x : acts_[l - 1].data();
    kernels::gemm(gemm_, Trans::yes, Trans::no, out, in, batch, 1.0f, delta_.data(), out, in_act,
                  in, 0.0f, g.w.data, in);
    kernels::column_sums(delta_.data(), batch, out, out, g.b.data());
    if (l == 0) {  // the input's gradient only when asked for: nothing below uses it
      if (dx != nullptr)
        kernels::gemm(gemm_, Trans::no, Trans::no, batch, in, out, 1.0f, delta_.data(), out,
                      v.w.data, in, 0.0f, dx, in);
      break;
    }
    delta_prev_.resize(batch * in);
    kernels::gemm(gemm_, Trans::no, Trans::no, batch, in, out, 1.0f, delta_.data(), out, v.w.data,
                  in, 0.0f, delta_prev_.data(), in);
    kernels::relu_backward(in_act, delta_prev_.data(), batch * in);
    std::swap(delta_, delta_prev_);
  }
  return static_cast<float>(loss);
}

EvalResult Mlp::evaluate(const float* x, const std::uint8_t* labels, std::size_t n,
                         std::size_t batch) {
  EvalResult r;
  if (n == 0) return r;
  if (batch == 0) throw std::invalid_argument("Mlp::evaluate: batch of 0");
  const std::size_t in = spec_.widths.front(), classes = spec_.widths.back();
  std::vector<float> scores(std::min(batch, n) * classes);
  double loss_sum = 0;
  std::size_t hits = 0;
  for (std::size_t b = 0; b < n; b += batch) {
    const std::size_t rows = std::min(batch, n - b);
    forward(x + b * in, rows, scores.data());
    hits += kernels::argmax_correct(scores.data(), labels + b, rows, classes);
    loss_sum +=
        kernels::softmax_xent_forward(scores.data(), labels + b, rows, classes, scores.data()) *
        static_cast<double>(rows);
  }
  r.samples = n;
  r.loss = loss_sum / static_cast<double>(n);
  r.accuracy = static_cast<double>(hits) / static_cast<double>(n);
  return r;
}

}  // namespace concurdl::nn
