// A span of the training step on the trace's timeline (harness/trace.hpp), named after the phase
// it times ("l0_fwd_gemm", "loss", "sgd"), category "step": what kernels/train_breakdown adds up
// per phase, and what `concurdl train --trace` draws. While no trace records, it costs one atomic
// load and builds no name. Internal to concurdl_nn.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <optional>

#include "concurdl/harness/trace.hpp"

namespace concurdl::nn {

class StepSpan {
 public:
  explicit StepSpan(const char* phase) {
    if (trace::recording()) span_.emplace(phase, "step");
  }
  // "l<layer>_<phase>"
  StepSpan(std::size_t layer, const char* phase) {
    if (trace::recording()) span_.emplace(fmt::format("l{}_{}", layer, phase), "step");
  }
  void end() { span_.reset(); }

 private:
  std::optional<trace::Span> span_;
};

}  // namespace concurdl::nn
