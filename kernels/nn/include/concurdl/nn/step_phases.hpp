// Whether the training step records its phases as trace spans (category "step": the batch
// gather, each layer's GEMMs, bias + ReLU, the loss, ReLU', bias gradients, SGD), what
// kernels/train_breakdown adds up. Off unless asked for, so that the timelines of chapters 05,
// 06 and 08, which record their own spans around whole layers and steps, stay as they are.
// Spans are recorded only while a trace records too (core/trace.hpp).
#pragma once

namespace concurdl::nn {

void set_step_phase_spans(bool on);
bool step_phase_spans();

// On for a scope, and back to what it was at its end.
class StepPhaseSpans {
 public:
  StepPhaseSpans() : was_(step_phase_spans()) { set_step_phase_spans(true); }
  ~StepPhaseSpans() { set_step_phase_spans(was_); }
  StepPhaseSpans(const StepPhaseSpans&) = delete;
  StepPhaseSpans& operator=(const StepPhaseSpans&) = delete;

 private:
  bool was_;
};

}  // namespace concurdl::nn
