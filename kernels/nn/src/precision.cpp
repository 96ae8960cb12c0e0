// Precision names and the dynamic loss scale (precision.hpp).
#include "concurdl/nn/precision.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/fp16.hpp"

namespace concurdl::nn {

std::string_view describe(Precision p) {
  switch (p) {
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
    case Precision::fp32:
      break;
  }
  return "fp32";
}

Precision parse_precision(std::string_view text) {
  for (const Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
    if (text == describe(p)) return p;
  throw std::invalid_argument("precision '" + std::string(text) + "': want fp32, bf16 or fp16");
}

std::string precision_compute(Precision p) {
  switch (p) {
    case Precision::bf16:
      if (kernels::have_bf16()) return "bfloat16 products on AVX512_BF16 (VDPBF16PS), float32 sums";
      return "bfloat16 storage widened to float32 for the GEMMs (" + kernels::bf16_why_not() + ")";
    case Precision::fp16:
      return std::string(
                 "float16 storage widened to float32 for the GEMMs (no FP16 arithmetic "
                 "on this CPU's path; conversions on ") +
             (kernels::have_f16c() ? "F16C)" : "scalar code: no F16C)");
    case Precision::fp32:
      break;
  }
  return "float32";
}

void to_16bit(Precision p, std::span<const float> in, std::span<std::uint16_t> out) {
  if (p == Precision::bf16) return kernels::to_bf16(in, out);
  if (p == Precision::fp16) return kernels::to_fp16(in, out);
  throw std::invalid_argument("to_16bit: fp32 is not a 16-bit format");
}

void from_16bit(Precision p, std::span<const std::uint16_t> in, std::span<float> out) {
  if (p == Precision::bf16) return kernels::from_bf16(in, out);
  if (p == Precision::fp16) return kernels::from_fp16(in, out);
  throw std::invalid_argument("from_16bit: fp32 is not a 16-bit format");
}

void add_16bit(Precision p, std::span<std::uint16_t> acc, std::span<const std::uint16_t> in) {
  if (acc.size() != in.size())
    throw std::invalid_argument("add_16bit: " + std::to_string(in.size()) + " values into " +
                                std::to_string(acc.size()));
  if (p == Precision::fp32) throw std::invalid_argument("add_16bit: fp32 is not a 16-bit format");
  if (p == Precision::bf16) return kernels::add_bf16(acc, in);
  kernels::add_fp16(acc, in);
}

bool all_finite_16bit(Precision p, std::span<const std::uint16_t> g16) {
  if (p == Precision::fp32) throw std::invalid_argument("all_finite_16bit: fp32 is not 16-bit");
  return p == Precision::bf16 ? kernels::all_finite_bf16(g16) : kernels::all_finite_fp16(g16);
}

bool unscale_gradients(Precision p, std::span<const std::uint16_t> g16, float loss_scale,
                       std::span<float> out) {
  if (!all_finite_16bit(p, g16)) return false;
  from_16bit(p, g16, out);
  if (loss_scale != 1.0f)
    for (float& g : out) g /= loss_scale;
  return true;
}

bool update_loss_scale(LossScaleState& s, bool found_inf, const LossScalerOptions& o) {
  if (found_inf) {
    s.scale = std::max(s.scale * o.backoff, 5.9604644775390625e-8f);  // 2^-24
    s.good_steps = 0;
    ++s.skipped;
    return false;
  }
  if (++s.good_steps >= o.growth_interval) {
    s.scale *= o.growth;
    s.good_steps = 0;
  }
  return true;
}

LossScaler::LossScaler(LossScalerOptions options, LossScaleUpdate update)
    : options_(options), update_(update) {
  if (!(options_.initial > 0) || !(options_.growth >= 1) || !(options_.backoff > 0) ||
      !(options_.backoff < 1) || options_.growth_interval == 0)
    throw std::invalid_argument(
        "LossScaler: want initial > 0, growth >= 1, 0 < backoff < 1, growth_interval >= 1");
  if (update_ == nullptr) throw std::invalid_argument("LossScaler: no update function");
  state_.scale = options_.initial;
}

}  // namespace concurdl::nn
