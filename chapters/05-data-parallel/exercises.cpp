// Chapter 05's exercises (exercises/exercises.md), graded by `concurdl exercise ch05 [5.1 5.2
// ...]`: the tests first, then the student's code timed against the reference in one process,
// interleaved. Each timing is built beside the experiment that measures its reference
// (exercise_timings.hpp), 5.5's in exercises_all_to_all.cpp:
//   5.1 ring all-reduce over send/recv               vs v4_ring
//   5.2 bucketed gradient all-reduce with overlap    vs the reference
//   5.3 ZeRO-2 steps from reduce-scatter, all-gather  vs zero_reduce_layer / zero_update_layer
//   5.4 a dynamic loss scaler                         tests only (a few flops a step)
//   5.5 the pairwise all-to-all                       vs all_to_all_v_pairwise
#include "concurdl/harness/exercise.hpp"
#include "exercise_timings.hpp"
#include "exercises_all_to_all.hpp"

namespace concurdl::dp {

namespace {

const bool registered = [] {
  register_exercise(
      {.id = "5.1",
       .chapter = "05-data-parallel",
       .title = "ring all-reduce over send/recv",
       .test_binary = "ch05_tests",
       .test_filter = "Ring/RingEx5_1.*/student_*",
       .timing = exercise_timings::ring(),
       .questions = {
           "Your ring took {student} per all-reduce against v4_ring's {reference} at "
           "{configuration} (a cost of {cost}, 95% interval {cost_ci}). How many bytes does each "
           "rank send, and how many times does each byte cross memory, in your version and in "
           "v4_ring (count the copies into scratch and the adds)?",
           "Run `concurdl run ch05/allreduce --set algorithm=v2_tree,v4_ring` on {machine} and "
           "quote algbw and busbw of v2_tree and v4_ring at 64 MiB for 2 and 4 ranks. Why is "
           "busbw, not algbw, the number to compare with the calibrated memory bandwidth, and why "
           "does the ring's busbw hardly depend on the rank count while the tree's falls?",
           "In the same run, find the size below which v4_ring is slower than v2_tree (or "
           "v3_halving_doubling). Explain it with the alpha-beta model: how many messages does "
           "each send, and what do the fitted alpha and beta in the report's projection notes "
           "predict for 1024 ranks?"}});
  register_exercise(
      {.id = "5.2",
       .chapter = "05-data-parallel",
       .title = "bucketed gradient all-reduce with overlap",
       .test_binary = "ch05_tests",
       .test_filter = "DdpEx5_2/*",
       .timing = exercise_timings::bucketed(),
       .questions = {
           "Your bucketed all-reduce took {student} for 19200 samples against OverlapSync's "
           "{reference} at {configuration} on {machine}: a cost of {cost} (95% interval "
           "{cost_ci}). Where does your version wait that the reference does not (a lock held "
           "across reduce(), a thread started per step, a wake-up per layer)?",
           "Run `concurdl run ch05/dp_train` and quote step_compute_s, step_comm_s and "
           "overlap_hidden at 2 ranks with overlap off and on. Which layer's gradient finishes "
           "last in backward, how much of the bytes is it, and so how much of the all-reduce "
           "can overlap hide in this MLP at best? When can overlap hide nothing at all?",
           "Run `concurdl run ch05/dp_buckets` and compare 0, 128 and 1024 KiB with overlap on. "
           "Why do PyTorch DDP and Horovod reduce buckets rather than one tensor at a time or "
           "the whole gradient at once? Say what a bucket that is too small costs (the α of "
           "every message) and what one that is too large costs (it starts late)."}});
  register_exercise(
      {.id = "5.3",
       .chapter = "05-data-parallel",
       .title = "a ZeRO-2 step from reduce-scatter and all-gather",
       .test_binary = "ch05_tests",
       .test_filter = "ZeroEx5_3/*",
       .timing = exercise_timings::zero2(),
       .questions = {
           "Your ZeRO-2 steps took {student} for 19200 samples against the reference's "
           "{reference} at {configuration} on {machine} (a cost of {cost}, 95% interval "
           "{cost_ci}). How many bytes does each rank send per step in your version, and how "
           "many would it send if step 1 were an all-reduce and step 2 only the update?",
           "Run `concurdl run ch05/zero` and quote, at 2 and 4 ranks, state_bytes and "
           "sent_bytes_per_step for stages 0 to 3 beside their models. Which term of ZeRO's "
           "4Ψ + 4Ψ + 4Ψ does each stage divide by N, and why do stages 1 and 2 send no more "
           "than plain data parallelism while stage 3 sends half as much again?",
           "In the same run, compare peak_bytes with state_bytes for stage 3 on both "
           "architectures. What does a rank hold at its peak besides its shards, why does the "
           "784-256-128-10 MLP gain so little at the peak, and how would you split a model so "
           "that FSDP's peak falls with N?"}});
  register_exercise(
      {.id = "5.4",
       .chapter = "05-data-parallel",
       .title = "a dynamic loss scaler",
       .test_binary = "ch05_tests",
       .test_filter = "LossScaleEx5_4/*",
       .questions = {
           "Run `concurdl run ch05/precision_accuracy` and quote the test accuracy after the "
           "last epoch for fp32, bf16 and fp16, fp16's loss_scale and skipped_steps. Why does "
           "fp16 need a loss scale and bf16 none? Name the two FP16 limits a gradient runs into "
           "(the smallest subnormal and the largest finite value) and which one the scale "
           "moves it away from.",
           "Your scaler doubles the scale after growth_interval good steps and halves it on an "
           "overflow. What happens to the skipped steps over a run if growth_interval were 1, "
           "and if it were 10^6 while the gradients shrink as training converges? Why is 2000 "
           "(PyTorch's GradScaler default) a compromise?",
           "Why do all ranks of a data-parallel run take the same decision to skip a step, "
           "though only one rank's gradients overflowed? Follow an infinity through "
           "allreduce_ring_16bit (allreduce16.hpp)."}});
  register_exercise(
      {.id = "5.5",
       .chapter = "05-data-parallel",
       .title = "the pairwise all-to-all",
       .test_binary = "ch05_tests",
       .test_filter = "Pairwise/AllToAllEx5_5.*/student_*",
       .timing = exercise_timings::all_to_all_v(),
       .questions = {
           "Your all-to-all took {student} against all_to_all_v_pairwise's {reference} at "
           "{configuration} on {machine} (a cost of {cost}, 95% interval {cost_ci}). How many "
           "messages and how many bytes does each rank send in yours, and what does the alpha-beta "
           "model of all_to_all.hpp make of them? If you posted every receive and send at once "
           "instead of n - 1 exchanges, say what that changes in the model and in what each rank "
           "must hold in flight.",
           "Run `concurdl run ch05/all_to_all` on {machine} and quote busbw of pairwise, bruck and "
           "native at 4 KiB and at 64 MiB on 4 ranks, and sent_over_model of pairwise and bruck. "
           "Why does Bruck's algorithm win while a message's alpha dominates and the pairwise "
           "exchange once its bytes do, and why can Bruck's not take variable counts?",
           "At step s rank r sends to r + s and receives from r - s. Why does every send find its "
           "receive in the same step, for any n? What would go wrong if every rank sent to its "
           "destinations in the order 0, 1, ..., n - 1 (which rank does every rank send to "
           "first?), and on MPI, if each step were a blocking send followed by a receive?"}});
  return true;
}();

}  // namespace

}  // namespace concurdl::dp
