// The MLP's mixed-precision step (mlp.hpp, precision.hpp): the same layers as mlp.cpp with every
// tensor a step keeps stored in 16 bits and every sum in float32,
//   forward   Z = A16 W16^T (float32) + b,  A = relu(Z),  A16 = round16(A)
//   loss      on widen(round16(logits)), in float32; dlogits x S rounded to 16 bits
//   backward  dW16 = round16(dZ16^T A16_prev),  db16 = round16(column sums of dZ16)
//             dZ16_prev = round16(dZ16 W16 * (A16_prev > 0))
// then, if every dW16 and db16 is finite, gradients() = widen(g16) / S. S is a power of two in
// use (the loss scaler's), so the division is exact.
// train_step_mixed fuses the update instead: every dZ16 first (checked as each is rounded), then,
// if the step is to be applied, each dW summed in float32 registers and applied there as
// momentum SGD on (dW / S), the new float32 weight rounded into W16 for the next step.

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/nn/mlp.hpp"
#include "step_span.hpp"

namespace concurdl::nn {

using kernels::Trans;

namespace {

using u16 = std::uint16_t;

void narrow(Precision p, const float* in, std::size_t n, u16* out) {
  to_16bit(p, {in, n}, {out, n});
}

kernels::Half half(Precision p) {
  return p == Precision::bf16 ? kernels::Half::bf16 : kernels::Half::fp16;
}

void widen(Precision p, const u16* in, std::size_t n, float* out) {
  from_16bit(p, {in, n}, {out, n});
}

// Layer l - 1's ReLU' on an input gradient w (float32) and its rounding into out, a block at a
// time (in L1 between the two): its stored 16-bit output is zero where the ReLU cut it. A select,
// not a branch on the data (half the outputs are cut): it vectorises.
void relu_grad_narrow(Precision p, float* w, const u16* act, std::size_t n, u16* out) {
  constexpr std::size_t kBlock = 1024;
  for (std::size_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::size_t e = std::min(n, i0 + kBlock);
    for (std::size_t i = i0; i < e; ++i) w[i] = (act[i] & 0x7fffu) != 0 ? w[i] : 0.0f;
    narrow(p, w + i0, e - i0, out + i0);
  }
}

// kernels::column_sums of a 16-bit matrix (rows x cols, contiguous): each row widened into
// `row` (cols floats, in L1) and added in the same order from a zero, so the bits of widening it
// all and summing after.
void column_sums_16bit(Precision p, const u16* x, std::size_t rows, std::size_t cols, float* row,
                       float* out) {
  std::fill(out, out + cols, 0.0f);
  for (std::size_t i = 0; i < rows; ++i) {
    widen(p, x + i * cols, cols, row);
    for (std::size_t j = 0; j < cols; ++j) out[j] += row[j];
  }
}

// The caller's 16-bit batch is read in place until the step returns, and not remembered after:
// the pointer is cleared however the step leaves.
struct ForgetInput {
  const u16*& x16;
  ~ForgetInput() { x16 = nullptr; }
};

// A scratch buffer of at least n values. Never shrunk: a step sizes `wide` for a batch's
// outputs, then a whole weight gradient, then a batch's inputs, and growing it back with
// resize zero-filled the difference every step (the wide MLP: 4 MiB a step).
template <class Vec>
void at_least(Vec& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

Mlp::Mixed::Mixed(MemoryAccount* a)
    : params(kernels::LineAllocator<std::uint16_t>(a, MemoryKind::parameters)),
      grads(kernels::LineAllocator<std::uint16_t>(a, MemoryKind::gradients)),
      input(kernels::LineAllocator<std::uint16_t>(a, MemoryKind::activations)),
      delta(kernels::LineAllocator<std::uint16_t>(a, MemoryKind::workspace)),
      wide(kernels::LineAllocator<float>(a, MemoryKind::workspace)),
      a32(kernels::LineAllocator<float>(a, MemoryKind::workspace)),
      b32(kernels::LineAllocator<float>(a, MemoryKind::workspace)),
      logits(kernels::LineAllocator<float>(a, MemoryKind::workspace)),
      sums(kernels::LineAllocator<float>(a, MemoryKind::workspace)) {}

void Mlp::gemm16(Precision p, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                 const u16* a, std::size_t lda, const u16* b, std::size_t ldb, float* c,
                 std::size_t ldc, const kernels::GemmSgd* sgd, u16* c16) {
  if (p == Precision::bf16 && kernels::have_bf16()) {
    kernels::gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, 0.0f, c, ldc, sgd);
    // Its kernels store float32: C rounded after, a row at a time.
    if (c16 != nullptr)
      for (std::size_t i = 0; i < m; ++i) narrow(p, c + i * ldc, n, c16 + i * ldc);
    return;
  }
  // No 16-bit arithmetic on this path: the operands widened (exactly) to float32. The products
  // of two 16-bit values are exact in float32 either way; only the order of the sums differs.
  // GEMM v4 widens them while it packs them, or an A it reads in place as its micro-kernel reads
  // it (gemm_16bit: the same bits as the copies below).
  // With c16, C is rounded into it by the GEMM (float32's bits, rounded), not by a pass of its own.
  const kernels::GemmEpilogue epilogue{
      .sgd = sgd, .c16 = c16, .c16_format = c16 == nullptr ? kernels::Half::none : half(p)};
  if (gemm_ == kernels::GemmVersion::v4_register)
    return kernels::gemm_16bit(half(p), ta, tb, m, n, k, a, lda, b, ldb, 0.0f, c, ldc, epilogue);
  const std::size_t a_rows = ta == Trans::yes ? k : m, a_cols = ta == Trans::yes ? m : k;
  const std::size_t b_rows = tb == Trans::yes ? n : k, b_cols = tb == Trans::yes ? k : n;
  const std::size_t a_n = a_rows == 0 ? 0 : (a_rows - 1) * lda + a_cols;
  const std::size_t b_n = b_rows == 0 ? 0 : (b_rows - 1) * ldb + b_cols;
  at_least(mixed_.a32, a_n);
  at_least(mixed_.b32, b_n);
  widen(p, a, a_n, mixed_.a32.data());
  widen(p, b, b_n, mixed_.b32.data());
  kernels::gemm(gemm_, ta, tb, m, n, k, 1.0f, mixed_.a32.data(), lda, mixed_.b32.data(), ldb, 0.0f,
                c, ldc, epilogue);
}

Mlp::MixedUpdate Mlp::mixed_update(Precision p) {
  if (p == Precision::fp32)
    throw std::invalid_argument("Mlp::mixed_update: fp32 has no 16-bit copy; want bf16 or fp16");
  if (!bound_params_.empty())
    throw std::logic_error("Mlp::mixed_update: needs the model's own storage");
  mixed_.params.resize(params_.size());
  mixed_.params_current = true;
  mixed_.params_format = p;
  return {params_, mixed_.params};
}

std::size_t Mlp::mixed_bytes() const {
  std::size_t halves = mixed_.params.capacity() + mixed_.grads.capacity() +
                       mixed_.input.capacity() + mixed_.delta.capacity();
  for (const auto& o : mixed_.outputs) halves += o.capacity();
  return halves * sizeof(u16);
}

const std::uint16_t* Mlp::round_input(const char* who, Precision p, const float* x,
                                      std::size_t batch) {
  if (p == Precision::fp32)
    throw std::invalid_argument(std::string(who) +
                                ": fp32 is forward_backward's; want bf16 or fp16");
  if (batch == 0) throw std::invalid_argument(std::string(who) + ": empty batch");
  if (x == nullptr) throw std::invalid_argument(std::string(who) + ": null buffer");
  StepSpan span("cast");
  mixed_.input.resize(batch * spec_.widths[0]);
  narrow(p, x, batch * spec_.widths[0], mixed_.input.data());
  return mixed_.input.data();
}

float Mlp::forward_loss_mixed(const char* who, Precision p, const u16* x16,
                              const std::uint8_t* labels, std::size_t batch, float loss_scale,
                              std::size_t* correct, std::size_t total_rows) {
  if (p == Precision::fp32)
    throw std::invalid_argument(std::string(who) +
                                ": fp32 is forward_backward's; want bf16 or fp16");
  if (!bound_params_.empty() || !bound_grads_.empty())
    throw std::logic_error(std::string(who) + ": needs the model's own storage");
  if (batch == 0) throw std::invalid_argument(std::string(who) + ": empty batch");
  if (x16 == nullptr || labels == nullptr)
    throw std::invalid_argument(std::string(who) + ": null buffer");
  if (!(loss_scale > 0.0f) || !std::isfinite(loss_scale))
    throw std::invalid_argument(std::string(who) + ": loss scale " + std::to_string(loss_scale) +
                                " (want a finite value > 0)");
  Mixed& mx = mixed_;
  const std::size_t n_params = params_.size(), L = layers();
  if (!mx.params_current || mx.params_format != p) {
    // The working copy is rounded afresh unless an update wrote it since (train_step_mixed's,
    // or one through mixed_update), and nothing handed the parameters out to be written.
    StepSpan span("cast");
    mx.params.resize(n_params);
    narrow(p, params_.data(), n_params, mx.params.data());
  }
  mx.params_current = false;  // until an update writes it again
  mx.params_format = p;
  mx.x16 = x16;  // read in place, by the forward and by the first layer's weight gradient
  mx.outputs.resize(std::min(mx.outputs.size(), L));
  while (mx.outputs.size() < L) mx.outputs.emplace_back(mx.input.get_allocator());
  const u16* act = x16;
  for (std::size_t l = 0; l < L; ++l) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const float* bias = params_.data() + offsets_[l] + out * in;
    StepSpan span(l, "fwd_gemm");
    at_least(mx.wide, batch * out);
    gemm16(p, Trans::no, Trans::yes, batch, out, in, act, in, mx.params.data() + offsets_[l], in,
           mx.wide.data(), out);
    const bool relu = l + 1 < L;
    mx.outputs[l].resize(batch * out);
    // Bias, ReLU and the rounding a row at a time, the row in L1 between them.
    for (std::size_t i = 0; i < batch; ++i) {
      float* row = mx.wide.data() + i * out;
      for (std::size_t j = 0; j < out; ++j) {
        const float z = row[j] + bias[j];
        row[j] = relu ? (z > 0.0f ? z : 0.0f) : z;
      }
      narrow(p, row, out, mx.outputs[l].data() + i * out);
    }
    act = mx.outputs[l].data();
  }
  const std::size_t classes = spec_.widths.back();
  mx.logits.resize(batch * classes);
  widen(p, mx.outputs[L - 1].data(), batch * classes, mx.logits.data());
  dlogits_.resize(batch * classes);
  StepSpan loss_span("loss");
  const LossResult head =
      softmax_xent_loss(mx.logits.data(), labels, batch, classes, dlogits_.data(), total_rows);
  if (loss_scale != 1.0f) kernels::scale(batch * classes, loss_scale, dlogits_.data());
  mx.delta.resize(batch * classes);
  narrow(p, dlogits_.data(), batch * classes, mx.delta.data());
  if (correct != nullptr) *correct = head.correct;
  return static_cast<float>(head.loss);
}

Mlp::MixedStep Mlp::forward_backward_mixed(Precision p, const float* x, const std::uint8_t* labels,
                                           std::size_t batch, float loss_scale,
                                           std::size_t* correct, std::size_t total_rows,
                                           MixedGrads grads,
                                           const std::function<void(std::size_t)>& on_layer_done) {
  return forward_backward_mixed(p, round_input("Mlp::forward_backward_mixed", p, x, batch), labels,
                                batch, loss_scale, correct, total_rows, grads, on_layer_done);
}

Mlp::MixedStep Mlp::forward_backward_mixed(Precision p, const u16* x16, const std::uint8_t* labels,
                                           std::size_t batch, float loss_scale,
                                           std::size_t* correct, std::size_t total_rows,
                                           MixedGrads grads,
                                           const std::function<void(std::size_t)>& on_layer_done) {
  if (on_layer_done && grads == MixedGrads::unscale)
    throw std::invalid_argument(
        "Mlp::forward_backward_mixed: on_layer_done hands the 16-bit gradients over, so they "
        "cannot be unscaled afterwards (check or keep with it)");
  const ForgetInput forget{mixed_.x16};
  const float loss = forward_loss_mixed("Mlp::forward_backward_mixed", p, x16, labels, batch,
                                        loss_scale, correct, total_rows);
  Mixed& mx = mixed_;
  const std::size_t L = layers();
  mx.grads.resize(params_.size());
  bool finite = true;  // with on_layer_done and check: each layer's, as it is handed over
  for (std::size_t l = L; l-- > 0;) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const u16* a_prev = l == 0 ? mx.x16 : mx.outputs[l - 1].data();
    u16* g16 = mx.grads.data() + offsets_[l];
    {
      StepSpan span(l, "dw_gemm");
      at_least(mx.wide, out * in);
      gemm16(p, Trans::yes, Trans::no, out, in, batch, mx.delta.data(), out, a_prev, in,
             mx.wide.data(), in, nullptr, g16);
    }
    {
      StepSpan span(l, "db");
      at_least(mx.sums, out);
      at_least(mx.a32, out);
      column_sums_16bit(p, mx.delta.data(), batch, out, mx.a32.data(), mx.sums.data());
      narrow(p, mx.sums.data(), out, g16 + out * in);
    }
    if (on_layer_done) {  // checked before it is handed over: not read again here
      if (grads == MixedGrads::check)
        finite = finite && all_finite_16bit(p, std::span<const u16>(g16, out * in + out));
      on_layer_done(l);
    }
    if (l == 0) break;
    StepSpan span(l, "da_gemm");
    at_least(mx.wide, batch * in);
    gemm16(p, Trans::no, Trans::no, batch, in, out, mx.delta.data(), out,
           mx.params.data() + offsets_[l], in, mx.wide.data(), in);
    mx.delta.resize(batch * in);
    relu_grad_narrow(p, mx.wide.data(), a_prev, batch * in, mx.delta.data());
  }
  if (on_layer_done || grads == MixedGrads::keep) return {loss, finite};
  StepSpan span("unscale");
  if (grads == MixedGrads::check) return {loss, all_finite_16bit(p, mx.grads)};
  return {loss, unscale_gradients(p, mx.grads, loss_scale, grads_)};
}

Mlp::MixedStep Mlp::train_step_mixed(Precision p, const float* x, const std::uint8_t* labels,
                                     std::size_t batch, float loss_scale, Sgd& opt,
                                     const std::function<bool(bool)>& decide,
                                     std::size_t* correct) {
  return train_step_mixed(p, round_input("Mlp::train_step_mixed", p, x, batch), labels, batch,
                          loss_scale, opt, decide, correct);
}

Mlp::MixedStep Mlp::train_step_mixed(Precision p, const u16* x16, const std::uint8_t* labels,
                                     std::size_t batch, float loss_scale, Sgd& opt,
                                     const std::function<bool(bool)>& decide,
                                     std::size_t* correct) {
  const char* who = "Mlp::train_step_mixed";
  if (opt.velocity().size() != params_.size())
    throw std::invalid_argument(std::string(who) + ": the optimiser holds " +
                                std::to_string(opt.velocity().size()) + " velocities for " +
                                std::to_string(params_.size()) + " parameters");
  if (!decide) throw std::invalid_argument(std::string(who) + ": no decide");
  MixedStep r;
  const ForgetInput forget{mixed_.x16};
  r.loss = forward_loss_mixed(who, p, x16, labels, batch, loss_scale, correct, 0);
  Mixed& mx = mixed_;
  const std::size_t L = layers();
  mx.deltas.resize(std::min(mx.deltas.size(), L));
  while (mx.deltas.size() < L) mx.deltas.emplace_back(mx.delta.get_allocator());
  std::swap(mx.deltas[L - 1], mx.delta);
  // Every layer's output gradient first, from the weights before the update, each checked as it
  // is made: the 16-bit tensors of the backward pass. (The weight gradients below are summed and
  // applied in float32 and never stored.)
  bool finite = all_finite_16bit(p, mx.deltas[L - 1]);
  for (std::size_t l = L - 1; l > 0; --l) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const u16* a_prev = mx.outputs[l - 1].data();
    StepSpan span(l, "da_gemm");
    at_least(mx.wide, batch * in);
    gemm16(p, Trans::no, Trans::no, batch, in, out, mx.deltas[l].data(), out,
           mx.params.data() + offsets_[l], in, mx.wide.data(), in);
    mx.deltas[l - 1].resize(batch * in);
    relu_grad_narrow(p, mx.wide.data(), a_prev, batch * in, mx.deltas[l - 1].data());
    finite = finite && all_finite_16bit(p, mx.deltas[l - 1]);
  }
  r.finite = finite;
  r.applied = decide(finite);
  if (!r.applied) {
    mx.params_current = true;  // untouched: the copy made at the start still holds
    return r;
  }
  const SgdOptions& o = opt.options();
  const float unscale = 1.0f / loss_scale;
  const kernels::Half format = half(p);
  for (std::size_t l = L; l-- > 0;) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1], at = offsets_[l];
    const u16* a_prev = l == 0 ? mx.x16 : mx.outputs[l - 1].data();
    {
      StepSpan span(l, "dw_gemm");
      const kernels::GemmSgd update{.params = params_.data() + at,
                                    .velocity = opt.velocity().data() + at,
                                    .lr = o.lr,
                                    .momentum = o.momentum,
                                    .weight_decay = o.weight_decay,
                                    .grad_scale = unscale,
                                    .params16 = mx.params.data() + at,
                                    .params16_format = format};
      // C's shape: gemm_bf16 and GEMM v4 apply the update from registers and do not store C;
      // the other GEMMs store it (float32) and apply the update after (kernels::GemmSgd).
      at_least(mx.wide, out * in);
      gemm16(p, Trans::yes, Trans::no, out, in, batch, mx.deltas[l].data(), out, a_prev, in,
             mx.wide.data(), in, &update);
    }
    {
      StepSpan span(l, "db");
      float* const gb = grads_.data() + at + out * in;
      at_least(mx.a32, out);
      column_sums_16bit(p, mx.deltas[l].data(), batch, out, mx.a32.data(), gb);
      for (std::size_t j = 0; j < out; ++j) gb[j] *= unscale;
    }
    StepSpan span("sgd");
    opt.step_range(params_, grads_, at + out * in, out);
    narrow(p, params_.data() + at + out * in, out, mx.params.data() + at + out * in);
  }
  mx.params_current = true;
  return r;
}

}  // namespace concurdl::nn
