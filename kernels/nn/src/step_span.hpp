// A span of the training step on the trace's timeline (core/trace.hpp), named after the phase
// it times ("l0_fwd_gemm", "loss", "sgd"), category "step": what kernels/train_breakdown adds up
// per phase. Recorded only while step_phase_spans() is on and a trace records; otherwise it
// costs two relaxed loads and builds no name. Internal to concurdl_nn.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <optional>

#include "concurdl/core/trace.hpp"
#include "concurdl/nn/step_phases.hpp"

namespace concurdl::nn {

class StepSpan {
 public:
  explicit StepSpan(const char* phase) {
    if (step_phase_spans() && trace::recording()) span_.emplace(phase, "step");
  }
  // "l<layer>_<phase>"
  StepSpan(std::size_t layer, const char* phase) {
    if (step_phase_spans() && trace::recording())
      span_.emplace(fmt::format("l{}_{}", layer, phase), "step");
  }
  void end() { span_.reset(); }

 private:
  std::optional<trace::Span> span_;
};

}  // namespace concurdl::nn
