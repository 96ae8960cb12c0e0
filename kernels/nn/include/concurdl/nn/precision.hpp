// Mixed-precision training's two decisions: the format a step stores its tensors in, and, for
// FP16, the dynamic loss scale that keeps its gradients inside that format's range.
//
// Micikevicius et al., "Mixed Precision Training" (ICLR 2018): weights, activations and
// gradients are held in a 16-bit format, products are summed in float32, and a float32 "master"
// copy of the weights takes the update (a 16-bit weight cannot absorb an update below half its
// ulp: 2^-11 of itself in FP16, 2^-8 in bfloat16). FP16's range ends at 65504 above and 2^-24
// below, and small gradients fall off the bottom: the loss is multiplied by a scale S before
// backward (every gradient is then S times larger), the gradients are divided by S in float32
// before the update, and a step whose gradients overflowed to infinity or NaN is skipped.
// bfloat16 (Kalamkar et al., 2019) has float32's exponent range, so it needs no scale.
//
// The dynamic scale (as PyTorch's torch.amp.GradScaler keeps it: start at 2^16, halve on an
// overflow and skip the step, double after 2000 steps in a row without one): S stays near the
// largest value that does not overflow, wherever the gradients' magnitudes drift.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace concurdl::nn {

enum class Precision { fp32, bf16, fp16 };

std::string_view describe(Precision p);  // "fp32", "bf16", "fp16"
// "fp32" | "bf16" | "fp16"; std::invalid_argument naming the value and the choices otherwise.
Precision parse_precision(std::string_view text);
// How a step in `p` computes on this machine, one line: "float32", "bfloat16 products on
// AVX512_BF16 (VDPBF16PS), float32 sums", or, for 16-bit storage the CPU cannot compute in,
// "widened to float32 for the GEMMs (...why...)". A record's precision_compute field.
std::string precision_compute(Precision p);

// The 16-bit formats' bits, by precision (bf16 or fp16; fp32 is std::invalid_argument): rounding
// to nearest even (kernels::to_bf16 / to_fp16) and back, exactly. Spans of one size.
void to_16bit(Precision p, std::span<const float> in, std::span<std::uint16_t> out);
void from_16bit(Precision p, std::span<const std::uint16_t> in, std::span<float> out);
// acc[i] = round16(widen(acc[i]) + widen(in[i])): the same bits as widening both, adding in
// float32 and rounding, in one pass over the data, each value widened, added and rounded in a
// register (kernels::add_bf16, add_fp16), instead of four.
// Spans of one size (else std::invalid_argument).
void add_16bit(Precision p, std::span<std::uint16_t> acc, std::span<const std::uint16_t> in);
// Whether every 16-bit value (bf16 or fp16) is finite.
bool all_finite_16bit(Precision p, std::span<const std::uint16_t> g16);
// Whether every 16-bit value is finite; when so, out = widen(g16) / loss_scale (the update's
// float32 gradient). When not, out is left as it was. The check and unscale of a mixed step,
// after its 16-bit gradients were summed (or not) over the ranks.
bool unscale_gradients(Precision p, std::span<const std::uint16_t> g16, float loss_scale,
                       std::span<float> out);

struct LossScalerOptions {
  float initial = 65536.0f;  // 2^16
  float growth = 2.0f;       // after growth_interval good steps in a row
  float backoff = 0.5f;      // after an overflow
  std::size_t growth_interval = 2000;
};

// What a loss scaler carries from step to step.
struct LossScaleState {
  float scale = LossScalerOptions{}.initial;
  std::size_t good_steps = 0;  // steps since the last overflow or growth
  std::size_t skipped = 0;     // steps skipped for an overflow, in all
};

// The reference update, after a step's gradients were checked: on an overflow (found_inf),
// scale *= backoff, good_steps = 0, skipped + 1, and false (skip this step's update); else
// good_steps + 1, and when it reaches growth_interval, scale *= growth and good_steps = 0; true.
// The scale never falls below 2^-24 (a smaller one would make every FP16 gradient zero).
bool update_loss_scale(LossScaleState& s, bool found_inf, const LossScalerOptions& o);
using LossScaleUpdate = bool (*)(LossScaleState&, bool, const LossScalerOptions&);

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {}, LossScaleUpdate update = &update_loss_scale);
  float scale() const { return state_.scale; }
  const LossScaleState& state() const { return state_; }
  const LossScalerOptions& options() const { return options_; }
  // After a step's backward: whether to apply its update (see update_loss_scale).
  bool update(bool found_inf) { return update_(state_, found_inf, options_); }

 private:
  LossScalerOptions options_;
  LossScaleUpdate update_;
  LossScaleState state_;
};

}  // namespace concurdl::nn
