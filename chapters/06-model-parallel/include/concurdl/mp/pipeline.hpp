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
//   interleaved  1F1B over v model chunks a stage (the model cut into v p pieces, piece c p + s
//           on stage s): a micro-batch crosses every stage v times, each time doing 1/v of the
//           stage's work, so the pipe fills v times faster; the bubble is divided by v, for v
//           times the messages (Narayanan et al., SC21, arXiv:2104.04473)
//   zb-h1   1F1B with each backward split into B (the input's gradient, which the stage below
//           waits for) and W (the weights' gradient, which nothing waits for); stage s defers
//           its W's by s, and they fill the bubble at the step's end: a third of 1F1B's bubble
//           with 1F1B's most micro-batches in flight (Qi et al., ICLR 2024, arXiv:2401.10241)
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

#include "concurdl/core/memory.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/kernels/aligned.hpp"
#include "concurdl/nn/mlp.hpp"

namespace concurdl::mp {

enum class Schedule { naive, gpipe, one_f_one_b, interleaved, zb_h1 };

// How a trainer's batch goes through its pipelines: part of the pipeline's and the 3D grid's
// options.
struct MicroBatching {
  std::size_t micro_batches = 4;
  Schedule schedule = Schedule::one_f_one_b;
};

// The bubble's share of a stage's step in the idealised model (a stage's forward F, its input
// gradient B and its weight gradient W one time slot each, 1/v of one on a chunk; messages
// free), p stages, m micro-batches, v chunks a stage. One micro-batch in the pipe at a time
// keeps p - 1 of every p slots idle whatever m; filling the pipe with m micro-batches leaves
// p - 1 idle slots (of F + B + W) at its start and end out of m + p - 1 (GPipe [Huang et al.
// 2019], 1F1B [Narayanan et al. 2019, 2021] alike). Interleaving fills it v times faster,
// (p - 1) / (v m + p - 1) for m a multiple of p [Narayanan et al. 2021]. ZB-H1's W's fill
// all of it but (p - 1)(T_F + T_B - T_W) [Qi et al. 2024]: (p - 1) / (3m + p - 1) once
// m >= p; with fewer micro-batches than stages, the trip of the last one down and back,
// 2(m + p) - 1 slots, bounds the step instead. schedule_timeline checks each against the orders.
constexpr double bubble_one_at_a_time(double p, double /*m*/, double /*v*/) {
  return p <= 1 ? 0 : (p - 1) / p;
}
constexpr double bubble_fill_drain(double p, double m, double /*v*/) {
  return p <= 1 ? 0 : (p - 1) / (m + p - 1);
}
constexpr double bubble_interleaved(double p, double m, double v) {
  return p <= 1 ? 0 : (p - 1) / (v * m + p - 1);
}
constexpr double bubble_zb_h1(double p, double m, double /*v*/) {
  const double steady = 3 * m + p - 1, trip = 2 * (m + p) - 1;
  return p <= 1 ? 0 : 1 - 3 * m / (steady > trip ? steady : trip);
}

// The schedules, a row each: the `schedule` axis of ch06/pipeline, `concurdl train --schedule`,
// the tests and the README's table come from it.
// Whether a schedule splits a stage into v model chunks (--chunks v > 1), and whether the
// pipelines over tensor-parallel stages (3D, three_d.hpp) offer it.
enum class Chunking { one_a_stage, v_chunks };
enum class InThreeD { offered, not_offered };
struct ScheduleRow : VariantInfo {
  Schedule schedule;
  double (*bubble)(double p, double m, double v);  // the model's bubble fraction
  Chunking chunking = Chunking::one_a_stage;
  InThreeD three_d = InThreeD::offered;
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
    {{"interleaved",
      "interleaved 1F1B [4]: v model chunks a stage (--chunks v), micro-batches in groups of p "
      "through chunk 0, then chunk 1, ...: the bubble falls to (p - 1) / (v m + p - 1), for v "
      "times the messages and more activations in flight (m a multiple of p)"},
     Schedule::interleaved,
     &bubble_interleaved,
     Chunking::v_chunks,
     InThreeD::not_offered},
    {{"zb-h1",
      "ZB-H1 [11]: 1F1B with each backward split into B (the input's gradient) and W (the "
      "weights'), stage s deferring its W's by s so that they fill the bubble: (p - 1) / "
      "(3m + p - 1) for m >= p, every stage holding min(m, p) micro-batches (1F1B's most)"},
     Schedule::zb_h1,
     &bubble_zb_h1,
     Chunking::one_a_stage,
     InThreeD::not_offered},
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

// One operation of a stage: the forward (F) of a micro-batch through one of the stage's
// chunks, its backward (B), or, where the backward is split, B the input's gradient only and
// W the weights' gradient. A (micro-batch, chunk) whose order has no W gets a whole backward
// at its B.
enum class OpKind : std::uint8_t { forward, backward, weight };
struct PipeOp {
  OpKind kind = OpKind::forward;
  int micro = 0;  // 0 .. m - 1
  int chunk = 0;  // 0 .. v - 1: the stage's chunk (piece chunk x stages + stage)
  bool operator==(const PipeOp&) const = default;
};
// "F3", "B3", "W3"; on a chunk above 0, "F3.1".
std::string op_name(const PipeOp& op);

// The order of stage `stage`'s operations under schedule s: m micro-batches, v chunks a stage
// (v > 1 only for interleaved: std::invalid_argument otherwise; interleaved with v = 1 is
// 1F1B). Interleaved's order is Megatron-LM's for m a multiple of p; for other m (a short last
// batch) it runs every forward first, which its bubble formula does not describe.
std::vector<PipeOp> stage_order(Schedule s, int stage, int stages, std::size_t micro_batches,
                                int chunks = 1);

// Exercise 6.2's compact encoding (one chunk, no W): +1 + i is F of micro-batch i, -1 - i its
// B. std::invalid_argument for a 0 code, or for a W or a chunk above 0 to encode.
std::vector<PipeOp> ops_from_codes(std::span<const int> codes);
std::vector<int> codes_of(std::span<const PipeOp> ops);

// Every stage's order run in the idealised model above (F, B and W one slot on a whole stage,
// 1/v of one on a chunk; a B without its W two), each operation as soon as its stage is free and
// its input has arrived: the step's slots, its bubble (1 - the slots computed / (p x the
// step's)), and whether the orders can meet at all (deadlocked: some operation waits forever).
struct ScheduleTimeline {
  bool deadlocked = false;
  double slots = 0, bubble = 0;
};
ScheduleTimeline schedule_timeline(std::span<const std::vector<PipeOp>> orders, int chunks = 1);

struct PipelineStepResult {
  double loss_sum = 0;      // the last stage: the batch's summed loss (0 elsewhere)
  std::size_t correct = 0;  // the last stage: rows predicted right
  // Micro-batches (times chunks) whose activations this stage held at once.
  std::size_t peak_activations = 0;
  // Memory, measured: the most bytes the step's buffers held at once, read from the counting
  // allocator every one of them was made with (core/memory.hpp), never from the schedule. By
  // kind: activations (the layer outputs of the micro-batches in flight, the inputs received
  // for them, the output gradients a deferred W waits on), communication (messages received,
  // and sent until their send completes), workspace (backward's scratch). peak_bytes: all kinds
  // at once. activation_model says what peak_activation_bytes should be; they are computed by
  // different code, and a stage that keeps what it should free (keep_buffers) disagrees.
  std::size_t peak_activation_bytes = 0;
  MemoryBytes peak_memory;
  std::size_t peak_bytes = 0;
  // This stage's wall time in the step (from its start to its last send completing) and the
  // part of it spent computing (its forwards, backwards and the loss): the rest is waiting
  // for a neighbour (the bubble) or moving messages.
  double step_seconds = 0, busy_seconds = 0;
};

// A stage's buffers during a step (activations, the messages in and out), one slot per
// micro-batch and chunk. Each buffer is allocated when its micro-batch needs it and freed when
// the schedule is done with it, so the workspace holds nothing between steps; it is there for a
// caller (a test, an exercise) that wants to look at a step's slots. Acts: the stage model's
// activations (nn::Activations for an nn::Mlp), made with a MemoryAccount* and freed by
// release().
template <class Acts>
struct BasicPipelineWorkspace {
  std::vector<Acts> acts;       // [chunk x m + micro-batch]
  std::vector<Acts> recompute;  // [chunk]: with recompute, the F or R at hand's
  std::vector<kernels::LineVector<float>> inputs, outputs, grads_in, grads_out;  // [chunk x m + i]
  void clear() {
    acts.clear();
    recompute.clear();
    inputs.clear();
    outputs.clear();
    grads_in.clear();
    grads_out.clear();
  }
};
using PipelineWorkspace = BasicPipelineWorkspace<nn::Activations>;

// How a step runs besides its order.
struct StepOptions {
  // Activation recomputation (Chen et al., "Training Deep Nets with Sublinear Memory Cost",
  // arXiv:1604.06174, 2016; GPipe relies on it): a stage keeps only each micro-batch's input
  // between its forward and its backward, and runs the forward again just before the backward.
  // One more forward per micro-batch; the gradients are the same bits.
  bool recompute = false;
  // Receives spin (for at most 20 ms) before they sleep, where every stage has a hardware
  // thread of its own (comm.size() <= the machine's). False where the stages share the
  // machine with other ranks (3D parallelism's other groups): they then always sleep.
  bool poll = true;
  // Where the stage's memory is counted (its model's account, say): the step's buffers are
  // counted there too, besides the step's own account that PipelineStepResult reads.
  MemoryAccount* memory = nullptr;
  // The deliberately leaky variant, for the tests and the lesson's control: every buffer a
  // micro-batch used is kept until the step ends, as a stage with one slot per micro-batch kept
  // for reuse would hold them. 1F1B then holds what GPipe holds.
  bool keep_buffers = false;
};

// The model of a stage's peak_activations and peak_activation_bytes under `order`, walked op by
// op, every micro-batch `rows` rows (layer l's output rows x widths[l + 1] floats; a chunk's
// input rows x widths[its first layer], not counted on piece 0, whose input is the caller's x).
// A (micro-batch, chunk) is in flight from its F to its B, or to its W when it has one. In
// flight it holds its input and its layers' outputs; from a split B to its W, also its layers'
// output gradients (as many floats as the outputs). With recomputation it holds only its input
// until its B recomputes the outputs (kept to its W when split), and the F or the
// recomputation at hand holds one chunk's outputs meanwhile.
struct ActivationModel {
  std::size_t peak_in_flight = 0, peak_bytes = 0;
};
ActivationModel activation_model(const nn::MlpSpec& spec, std::span<const std::size_t> boundaries,
                                 int stage, int stages, std::span<const PipeOp> order,
                                 std::size_t rows, bool recompute);

// Checks that `order` runs, for each of m micro-batches and v chunks, its F once, then its B
// once, then at most one W; std::invalid_argument naming the first fault otherwise.
void check_order(std::span<const PipeOp> order, std::size_t micro_batches, int chunks = 1);
void check_order(std::span<const int> codes, std::size_t micro_batches);

// One training step of the stage comm.rank() of comm.size(): `model` is the whole MLP (every
// rank builds the same one; a stage uses only its layers [boundaries[s], boundaries[s+1])),
// x (rows x widths[0], read by stage 0) and labels (rows, read by the last stage), cut into
// `micro_batches` pieces (at most rows). Overwrites the stage's layers' gradients in
// model.gradients() with the batch's mean-loss gradient. Every rank calls it with the same
// arguments but its own model. With v chunks a stage (interleaved), `boundaries` cuts the model
// into v x p pieces (stage_boundaries(layers, v p)) and stage s runs pieces s, p + s, ...; the
// first piece reads x, the last (stage p - 1's chunk v - 1) takes the loss.
PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, Schedule schedule,
                                 PipelineWorkspace* workspace = nullptr,
                                 const StepOptions& options = {});
// The same with this stage's order of operations given (checked by check_order): for
// exercises 6.2 and 6.4, and for schedules of your own. Each stage's order must be one that the
// other stages' orders can meet, or the step waits forever (schedule_timeline tells).
PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, std::span<const PipeOp> order,
                                 PipelineWorkspace* workspace = nullptr,
                                 const StepOptions& options = {});
// In exercise 6.2's encoding.
PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, std::span<const int> codes,
                                 PipelineWorkspace* workspace = nullptr,
                                 const StepOptions& options = {});

}  // namespace concurdl::mp
