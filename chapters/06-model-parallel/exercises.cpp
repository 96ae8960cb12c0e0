// Chapter 06's exercises (exercises/exercises.md), graded by `concurdl exercise ch06
// [6.1 6.2 6.3 6.4]`: the tests first, then the student's code timed against the chapter's own in
// one process, interleaved, on thread ranks of chapter 05's communicator. Each timing is built
// beside the experiment that measures the chapter's own code (exercise_timings.hpp):
//   6.1 column-parallel Linear   forward and backward of a 784 -> 512 layer, batch 256, split
//                                over 2 ranks: student_column_* vs ColumnParallelLinear
//   6.2 the 1F1B order           one pipeline step of a 256-512-512-512-10 MLP on 2 stages,
//                                256 rows in 8 micro-batches: student_1f1b_order vs stage_order
//   6.3 the ZB-H1 order          the same step: student_zb_h1_order vs stage_order's zb-h1
//   6.4 top-k dispatch           tests only (a loop over the choices, nothing to time):
//                                student_moe_assign_slots = nn::moe_assign_slots
// Every trial is checked after it runs (every rank's output and gradients against one process's
// forward and backward of the unsplit layer or model): a wrong result is an invalid run, never
// a fast one.
#include "concurdl/harness/exercise.hpp"
#include "exercise_timings.hpp"

namespace concurdl::mp {

namespace {

const bool registered = [] {
  register_exercise(
      {.id = "6.1",
       .chapter = "06-model-parallel",
       .title = "a column-parallel Linear's forward and backward",
       .test_binary = "ch06_tests",
       .test_filter = "ColumnLinearEx6_1/student.*",
       .timing = exercise_timings::column_parallel(),
       .target = 1.3,
       .questions = {
           "Your layer took {student} for a forward and a backward against "
           "ColumnParallelLinear's {reference} at {configuration} on {machine}: a cost of {cost} "
           "(95% interval {cost_ci}). Count the FLOPs each rank computes in one step (three "
           "GEMMs) and the bytes the all-reduce of dx moves: what GFLOP/s does a rank of yours "
           "reach, and what share of the step is the all-reduce? (Time the backward with dx null "
           "to find out.) If you wrote loops, time kernels::gemm's versions in their place and "
           "say what the fastest one does that your loops do not.",
           "Why does the column-parallel layer need no communication forward and an all-reduce "
           "backward, and why do its dw and db need none? Megatron follows it with a "
           "row-parallel layer (RowParallelLinear): say what that one communicates forward and "
           "backward, and why the MLP block's hidden activations never travel between the ranks "
           "(ParallelMlpBlock::all_reduces() counts what the block does).",
           "For this layer (784 -> 512) at batch B on p ranks, tensor parallelism all-reduces B x "
           "784 floats of dx per step, while data parallelism (chapter 05) all-reduces the "
           "layer's 784 x 512 + 512 gradients. At which batch does each move fewer bytes, and "
           "what does each replicate that the other splits? Why do large models keep tensor "
           "parallelism within a node (NVLink) and data parallelism across nodes?"}});

  register_exercise(
      {.id = "6.2",
       .chapter = "06-model-parallel",
       .title = "the 1F1B schedule's order of operations",
       .test_binary = "ch06_tests",
       .test_filter = "OneFOneBEx6_2/student.*",
       .timing = exercise_timings::one_f_one_b(),
       .questions = {
           "Your order's step took {student} against stage_order's {reference} at "
           "{configuration} on {machine} ({cost}, 95% interval {cost_ci}). Both run the same "
           "pipeline_step: what is this timing able to tell apart, then? Run one step of 4 "
           "stages and 8 micro-batches (adapt APipelineStepGivesTheWholeBatchsGradients in "
           "tests/test_exercises.cpp) with your order, GPipe's and naive's, and quote each "
           "stage's step_seconds, busy_seconds and peak_activations from PipelineStepResult.",
           "With p stages, m micro-batches and a forward and backward that take the same time on "
           "every stage, what fraction of a step does each stage idle (the bubble) under GPipe "
           "and under 1F1B, and under the naive schedule? How large must m be for a bubble under "
           "10% at p = 4, and what does a larger m cost? What, then, does 1F1B buy over GPipe?",
           "Why is stage s's warm-up exactly p - s - 1 forwards: what happens to the bubble with "
           "fewer (the naive schedule has none) and to the activations held with more (GPipe "
           "warms up with all m)? pipeline_step's sends do not wait for their receive: in 1F1B's "
           "steady state, which two stages send to each other at the same time, and what would "
           "happen if a send blocked until its receive was posted?"}});

  register_exercise(
      {.id = "6.3",
       .chapter = "06-model-parallel",
       .title = "the ZB-H1 schedule's order of operations",
       .test_binary = "ch06_tests",
       .test_filter = "ZeroBubbleEx6_3/student.*",
       .timing = exercise_timings::zb_h1(),
       .questions = {
           "Your order's step took {student} against stage_order's {reference} at "
           "{configuration} on {machine} ({cost}, 95% interval {cost_ci}). Run the same step "
           "under 1F1B and ZB-H1 with --trace (concurdl run ch06/schedules --trace --set "
           "stages=2 --set micro_batches=4 --set recompute=off) and point, in the two timelines, "
           "at the idle time ZB-H1 removed: where was stage 0 waiting under 1F1B, and for what?",
           "With F, B and W one slot each, 1F1B's bubble is 3(p - 1) slots and ZB-H1's p - 1 "
           "(m >= p). Derive ZB-H1's: which W's fill the idle slots at the start and end of "
           "stage s's step? Then take this MLP's real costs: stage 0 computes no input gradient "
           "for its first layer, and the last stage computes the loss. What does that do to the "
           "bubble the W's can fill (compare bubble_fraction with bubble_model in the run)?",
           "ZB-H1 holds min(m, p) micro-batches in flight on every stage, 1F1B's most, yet "
           "ch06/schedules measures its busiest stage keeping about twice 1F1B's bytes on this "
           "MLP. Count what a micro-batch keeps between its B and its W, and say why "
           "recomputation (--recompute) does not lower ZB-H1's peak here. What would a layer "
           "whose backward needs intermediates that its weight gradient does not (attention's) "
           "change?"}});

  register_exercise(
      {.id = "6.4",
       .chapter = "06-model-parallel",
       .title = "top-k dispatch with capacity",
       .test_binary = "ch06_tests",
       .test_filter = "MoeSlotsEx6_4/student.*",
       .questions = {
           "Run `concurdl train --moe-experts 4 --moe-top-k 2 --epochs 1` with "
           "--capacity-factor 1.0, 1.25 and 2.0 and with --moe-dropless on {machine}, and quote "
           "moe_dropped_fraction and moe_imbalance from each run's report. Work out the capacity "
           "C of each factor at the batch of 64: why does 2.0 drop nothing here? Why does 1.0 "
           "drop choices whenever a batch's routing is not exactly even, and what does a factor "
           "above 1 buy, and cost?",
           "With top-2, GShard hands out every first choice before any second choice. Take the "
           "four tokens of ASecondChoiceWaitsForLaterFirstChoices (tests/test_exercises_moe.cpp) "
           "and say which choice the token-by-token order drops instead, and what each order "
           "does to a token's output when its expert is full (a dropped choice contributes "
           "nothing; the residual carries the token). Why is losing a second choice the smaller "
           "loss (compare the gates)?",
           "Capacity fixes every expert's buffer at C rows. What does that buy an "
           "expert-parallel layer (the all-to-all's sizes, the experts' GEMM shapes, memory "
           "planned ahead), and what does dropless cost instead? Each rank of "
           "ExpertParallelMoe (include/concurdl/mp/expert_parallel.hpp) sees only its shard of "
           "the batch: what must it learn from the other ranks to hand out the same slots as one "
           "process, and why?"}});
  return true;
}();

}  // namespace

}  // namespace concurdl::mp
