// The MLP's mixed-precision step (mlp.hpp, precision.hpp): the same layers as mlp.cpp with every
// tensor a step keeps stored in 16 bits and every sum in float32,
//   forward   Z = A16 W16^T (float32) + b,  A = relu(Z),  A16 = round16(A)
//   loss      on widen(round16(logits)), in float32; dlogits x S rounded to 16 bits
//   backward  dW16 = round16(dZ16^T A16_prev),  db16 = round16(column sums of dZ16)
//             dZ16_prev = round16(dZ16 W16 * (A16_prev > 0))
// then, if every dW16 and db16 is finite, gradients() = widen(g16) / S. S is a power of two in
// use (the loss scaler's), so the division is exact.
#include <algorithm>
#include <cmath>
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

void widen(Precision p, const u16* in, std::size_t n, float* out) {
  from_16bit(p, {in, n}, {out, n});
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
                 std::size_t ldc) {
  if (p == Precision::bf16 && kernels::have_bf16()) {
    kernels::gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, 0.0f, c, ldc);
    return;
  }
  // No 16-bit arithmetic on this path: the operands widened (exactly) to float32. The products
  // of two 16-bit values are exact in float32 either way; only the order of the sums differs.
  const std::size_t a_rows = ta == Trans::yes ? k : m, a_cols = ta == Trans::yes ? m : k;
  const std::size_t b_rows = tb == Trans::yes ? n : k, b_cols = tb == Trans::yes ? k : n;
  const std::size_t a_n = a_rows == 0 ? 0 : (a_rows - 1) * lda + a_cols;
  const std::size_t b_n = b_rows == 0 ? 0 : (b_rows - 1) * ldb + b_cols;
  mixed_.a32.resize(a_n);
  mixed_.b32.resize(b_n);
  widen(p, a, a_n, mixed_.a32.data());
  widen(p, b, b_n, mixed_.b32.data());
  kernels::gemm(gemm_, ta, tb, m, n, k, 1.0f, mixed_.a32.data(), lda, mixed_.b32.data(), ldb, 0.0f,
                c, ldc);
}

std::size_t Mlp::mixed_bytes() const {
  std::size_t halves = mixed_.params.capacity() + mixed_.grads.capacity() +
                       mixed_.input.capacity() + mixed_.delta.capacity();
  for (const auto& o : mixed_.outputs) halves += o.capacity();
  return halves * sizeof(u16);
}

Mlp::MixedStep Mlp::forward_backward_mixed(Precision p, const float* x, const std::uint8_t* labels,
                                           std::size_t batch, float loss_scale,
                                           std::size_t* correct, std::size_t total_rows,
                                           bool unscale) {
  const char* who = "Mlp::forward_backward_mixed";
  if (p == Precision::fp32)
    throw std::invalid_argument(std::string(who) +
                                ": fp32 is forward_backward's; want bf16 or fp16");
  if (!bound_params_.empty() || !bound_grads_.empty())
    throw std::logic_error(std::string(who) + ": needs the model's own storage");
  if (batch == 0) throw std::invalid_argument(std::string(who) + ": empty batch");
  if (x == nullptr || labels == nullptr)
    throw std::invalid_argument(std::string(who) + ": null buffer");
  if (!(loss_scale > 0.0f) || !std::isfinite(loss_scale))
    throw std::invalid_argument(std::string(who) + ": loss scale " + std::to_string(loss_scale) +
                                " (want a finite value > 0)");
  Mixed& mx = mixed_;
  const std::size_t n_params = params_.size(), L = layers();
  {
    StepSpan span("cast");
    mx.params.resize(n_params);
    mx.grads.resize(n_params);
    narrow(p, params_.data(), n_params, mx.params.data());
    mx.input.resize(batch * spec_.widths[0]);
    narrow(p, x, batch * spec_.widths[0], mx.input.data());
  }
  mx.outputs.resize(std::min(mx.outputs.size(), L));
  while (mx.outputs.size() < L) mx.outputs.emplace_back(mx.input.get_allocator());
  const u16* act = mx.input.data();
  for (std::size_t l = 0; l < L; ++l) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const float* bias = params_.data() + offsets_[l] + out * in;
    StepSpan span(l, "fwd_gemm");
    mx.wide.resize(batch * out);
    gemm16(p, Trans::no, Trans::yes, batch, out, in, act, in, mx.params.data() + offsets_[l], in,
           mx.wide.data(), out);
    const bool relu = l + 1 < L;
    for (std::size_t i = 0; i < batch; ++i) {
      float* row = mx.wide.data() + i * out;
      for (std::size_t j = 0; j < out; ++j) {
        const float z = row[j] + bias[j];
        row[j] = relu ? (z > 0.0f ? z : 0.0f) : z;
      }
    }
    mx.outputs[l].resize(batch * out);
    narrow(p, mx.wide.data(), batch * out, mx.outputs[l].data());
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
  loss_span.end();
  if (correct != nullptr) *correct = head.correct;

  for (std::size_t l = L; l-- > 0;) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    const u16* a_prev = l == 0 ? mx.input.data() : mx.outputs[l - 1].data();
    u16* g16 = mx.grads.data() + offsets_[l];
    {
      StepSpan span(l, "dw_gemm");
      mx.wide.resize(out * in);
      gemm16(p, Trans::yes, Trans::no, out, in, batch, mx.delta.data(), out, a_prev, in,
             mx.wide.data(), in);
      narrow(p, mx.wide.data(), out * in, g16);
    }
    {
      StepSpan span(l, "db");
      mx.a32.resize(batch * out);
      widen(p, mx.delta.data(), batch * out, mx.a32.data());
      mx.sums.resize(out);
      kernels::column_sums(mx.a32.data(), batch, out, out, mx.sums.data(), 0.0f);
      narrow(p, mx.sums.data(), out, g16 + out * in);
    }
    if (l == 0) break;
    StepSpan span(l, "da_gemm");
    mx.wide.resize(batch * in);
    gemm16(p, Trans::no, Trans::no, batch, in, out, mx.delta.data(), out,
           mx.params.data() + offsets_[l], in, mx.wide.data(), in);
    // Layer l - 1's ReLU': its stored (16-bit) output is zero where the ReLU cut it.
    // A select, not a branch on the data (half the outputs are cut): it vectorises.
    float* const w = mx.wide.data();
    for (std::size_t i = 0; i < batch * in; ++i) w[i] = (a_prev[i] & 0x7fffu) != 0 ? w[i] : 0.0f;
    mx.delta.resize(batch * in);
    narrow(p, mx.wide.data(), batch * in, mx.delta.data());
  }
  StepSpan span("unscale");
  if (!unscale) return {static_cast<float>(head.loss), all_finite_16bit(p, mx.grads)};
  return {static_cast<float>(head.loss), unscale_gradients(p, mx.grads, loss_scale, grads_)};
}

}  // namespace concurdl::nn
