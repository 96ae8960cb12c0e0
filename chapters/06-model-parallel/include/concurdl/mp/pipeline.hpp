// Pipeline parallelism: an MLP's layers cut into p contiguous stages, one per rank of chapter
// 05's communicator; activations travel forward and gradients backward by send/recv, and the
// batch is cut into m micro-batches so that the stages can work at once. The schedule says in
// which order each stage runs its forwards (F) and backwards (B):
//
//   naive   F0 B0 F1 B1 ...   one micro-batch in the pipe at a time: every other stage idles
//   gpipe   F0 F1 ... Fm-1, then Bm-1 ... B0: the pipe fills; each stage keeps m activations
//           (GPipe: Huang et al., NeurIPS 2019, arXiv:1811.06965)
//   1f1b    p-s-1 warm-up forwards, then alternate F and B, then the remaining Bs: the same
//           bubble as GPipe, but stage s keeps at most p - s micro-batches' activations
//           (PipeDream-Flush: Narayanan et al., ICML 2021, arXiv:2006.09503)
//
//   p = 2, m = 4, one time slot per F or B, free messages ("..": the stage waits):
//   slot           0  1  2  3  4  5  6  7  8  9
//   gpipe stage 0  F0 F1 F2 F3 .. .. B3 B2 B1 B0
//         stage 1  .. F0 F1 F2 F3 B3 B2 B1 B0 ..
//   1f1b  stage 0  F0 F1 .. B0 F2 B1 F3 B2 .. B3
//         stage 1  .. F0 B0 F1 B1 F2 B2 F3 B3 ..
//   Both take 2(m + p - 1) = 10 slots and each stage waits 2(p - 1) = 2 of them: the bubble,
//   (p - 1)/(m + p - 1) of the step. The messages are 2m(p - 1) = 8: each micro-batch's
//   activations forward and its gradient backward across each of the p - 1 boundaries.
//
// The gradients are those of the whole batch's mean loss: the last stage scales each
// micro-batch's loss gradient by its rows / the batch's rows, and every stage accumulates its
// layers' gradients over the micro-batches, so a step equals one forward and backward of the
// whole batch on one process, up to the order of float additions (the tests hold them to it).
// Sends are non-blocking and complete at the end of the step, so no schedule can deadlock on
// a send; receives are matched by source and micro-batch tag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/nn/mlp.hpp"

namespace concurdl::mp {

enum class Schedule { naive, gpipe, one_f_one_b };

// The bubble's share of a stage's step in the idealised model (every F and B one time slot,
// messages free), p stages and m micro-batches: one micro-batch in the pipe at a time keeps p - 1
// of every p slots idle whatever m; filling the pipe with m micro-batches leaves p - 1 idle slots
// at its start and end out of m + p - 1 (GPipe [Huang et al. 2019], 1F1B [Narayanan et al.
// 2019, 2021] alike).
constexpr double bubble_one_at_a_time(double p, double /*m*/) { return p <= 1 ? 0 : (p - 1) / p; }
constexpr double bubble_fill_drain(double p, double m) {
  return p <= 1 ? 0 : (p - 1) / (m + p - 1);
}

// The schedules, a row each: the `schedule` axis of ch06/pipeline, `concurdl train --schedule`,
// the tests and the README's table come from it.
struct ScheduleRow : VariantInfo {
  Schedule schedule;
  double (*bubble)(double p, double m);  // the model's bubble fraction
};
inline constexpr ScheduleRow kScheduleRows[] = {
    {{"naive",
      "F0 B0 F1 B1 ...: one micro-batch in the pipe at a time, so one stage works while the others "
      "wait; the bubble stays (p - 1) / p whatever m, and a stage holds 1 micro-batch's "
      "activations"},
     Schedule::naive,
     &bubble_one_at_a_time},
    {{"gpipe",
      "GPipe [1]: all m forwards, then all backwards (the last micro-batch's first): the "
      "micro-batches fill the pipe, the bubble falls to (p - 1) / (m + p - 1), and a stage holds "
      "all m micro-batches' activations"},
     Schedule::gpipe,
     &bubble_fill_drain},
    {{"1f1b",
      "1F1B [2, 3]: p - s - 1 warm-up forwards on stage s, then one forward and one backward in "
      "turn, then the rest: the same bubble as GPipe, with at most min(m, p - s) micro-batches' "
      "activations held"},
     Schedule::one_f_one_b,
     &bubble_fill_drain},
};
inline constexpr VariantTable kSchedules{kScheduleRows, "schedule"};

// "naive", "gpipe", "1f1b": the row's name.
std::string_view schedule_name(Schedule s);
// The row of schedule `s`.
const ScheduleRow& schedule_row(Schedule s);

// Layer boundaries of `stages` contiguous stages of `layers` layers (stages + 1 entries, the
// first 0 and the last `layers`), as even as the counts allow. std::invalid_argument when there
// are more stages than layers.
std::vector<std::size_t> stage_boundaries(std::size_t layers, int stages);

// The order of one stage's operations: +1 + i is F of micro-batch i, -1 - i is B of it.
std::vector<int> stage_order(Schedule s, int stage, int stages, std::size_t micro_batches);

struct PipelineStepResult {
  double loss_sum = 0;               // the last stage: the batch's summed loss (0 elsewhere)
  std::size_t correct = 0;           // the last stage: rows predicted right
  std::size_t peak_activations = 0;  // micro-batches this stage held activations of at once
  // The most bytes this stage held at once for backward: the layer outputs of the micro-batches
  // between their forward and their backward (nn::Activations::output_bytes(), by capacity)
  // and, on every stage but the first, the inputs it received for them. With recompute, one
  // micro-batch's outputs (the one being recomputed) and the inputs. activation_bytes_model
  // says what it should be.
  std::size_t peak_activation_bytes = 0;
  // This stage's wall time in the step (from its start to its last send completing) and the
  // part of it spent computing (its forwards, backwards and the loss): the rest is waiting
  // for a neighbour (the bubble) or moving messages.
  double step_seconds = 0, busy_seconds = 0;
};

// A stage's buffers (activations, the messages in and out), kept between steps so that a
// step allocates nothing once the first has run: pass the same one to every step of a stage.
struct PipelineWorkspace {
  std::vector<nn::Activations> acts;
  nn::Activations recompute;  // with recompute: the one micro-batch's activations at a time
  std::vector<std::vector<float>> inputs, outputs, grads_in, grads_out;
};

// How a step runs besides its order.
struct StepOptions {
  // Activation recomputation (Chen et al., "Training Deep Nets with Sublinear Memory Cost",
  // arXiv:1604.06174, 2016; GPipe relies on it): a stage keeps only each micro-batch's input
  // between its forward and its backward, and runs the forward again just before the backward.
  // One more forward per micro-batch; the gradients are the same bits.
  bool recompute = false;
};

// The model of peak_activation_bytes for stage `stage` of `boundaries` (layer l's output is
// rows x widths[l + 1] floats, a stage's input rows x widths[first]), micro-batches of `rows`
// rows and `live` of them in flight at the peak: live x (outputs + input) without
// recomputation, live x input + outputs with it (the first stage's input is the caller's x:
// not counted).
std::size_t activation_bytes_model(const nn::MlpSpec& spec, std::span<const std::size_t> boundaries,
                                   int stage, std::size_t rows, std::size_t live, bool recompute);

// Checks that `order` (stage_order's encoding) runs each of m micro-batches' forward once and
// then its backward once; std::invalid_argument naming the first fault otherwise.
void check_order(std::span<const int> order, std::size_t micro_batches);

// One training step of the stage comm.rank() of comm.size(): `model` is the whole MLP (every
// rank builds the same one; a stage uses only its layers [boundaries[s], boundaries[s+1])),
// x (rows x widths[0], read by stage 0) and labels (rows, read by the last stage), cut into
// `micro_batches` pieces (at most rows). Overwrites the stage's layers' gradients in
// model.gradients() with the batch's mean-loss gradient. Every rank calls it with the same
// arguments but its own model.
PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, Schedule schedule,
                                 PipelineWorkspace* workspace = nullptr,
                                 const StepOptions& options = {});
// The same with this stage's order of operations given (stage_order's encoding, checked by
// check_order): for exercise 6.2, and for schedules of your own. Each stage's order must be one
// that the other stages' orders can meet, or the step waits forever (1F1B's is).
PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, std::span<const int> order,
                                 PipelineWorkspace* workspace = nullptr,
                                 const StepOptions& options = {});

}  // namespace concurdl::mp
