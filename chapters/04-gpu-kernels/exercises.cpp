// Chapter 04's exercises (exercises/exercises.md), graded by `concurdl exercise ch04 [4.1 4.2]`:
// the tests first, on the CPU (the phases are __host__ __device__), then, where a GPU is, the
// student's kernel timed against the chapter's in one process, interleaved, with CUDA events
// and the L2 flushed before each repetition:
//   4.1 tiled GEMM             C = A B at n = 2048: student_gemm vs v3_shared_tiles
//   4.2 warp-shuffle reduction the sum of 64M floats: student_reduce vs v5_multi_element
// Every trial is checked after it runs (the product against OpenBLAS's, the sum exactly against
// the CPU's): a wrong result is an invalid run, never a fast one. Without a GPU the timing says
// why it cannot run, and the tests are the grade.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/gpu/device.hpp"
#include "concurdl/gpu/reference.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "gpu_trials.hpp"

#if CONCURDL_HAVE_CUDA
#include "concurdl/harness/cuda_timer.hpp"
#include "exercises/student_kernels.hpp"
#endif

namespace concurdl::gpu {

namespace {

constexpr int kRepetitions = 21;

#if CONCURDL_HAVE_CUDA

Trial tiled_gemm_trial(Impl impl, const Params& p, GroupCache& cache) {
  return device_gemm_trial(cache, static_cast<int>(param_int(p, "n")),
                           [impl](const float* a, const float* b, float* c, int n) {
                             if (impl == Impl::student)
                               student_gemm(a, b, c, n, n, n, nullptr);
                             else
                               gemm_v3_shared_tiles(a, b, c, n, n, n, nullptr);
                           });
}

Trial warp_sum_trial(Impl impl, const Params& p, GroupCache& cache) {
  return device_sum_trial(
      cache, static_cast<std::size_t>(param_int(p, "n")),
      [impl](const float* in, std::size_t n, float* out, void* scratch, std::size_t bytes) {
        if (impl == Impl::student)
          student_reduce(in, n, out, nullptr);
        else
          reduce_v5_multi_element(in, n, out, scratch, bytes, nullptr);
      });
}

#else

Trial tiled_gemm_trial(Impl, const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }
Trial warp_sum_trial(Impl, const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }

#endif

// exercise_timing() with the GPU's reason for not timing where there is none.
Experiment gpu_timing(ExerciseTiming t) {
  Experiment e = exercise_timing(std::move(t));
  e.unavailable = gpu_unavailable;
  return e;
}

const bool registered = [] {
  register_exercise(
      {.id = "4.1",
       .chapter = "04-gpu-kernels",
       .title = "a shared-memory tiled GEMM",
       .test_binary = "ch04_tests",
       .test_filter = "TiledGemmEx4_1/student.*",
       .timing = gpu_timing({.title = "C = A B, student tiles vs v3_shared_tiles",
                             .threads_axis = "",
                             .axes = {{"n", {"2048"}, {}, AxisKind::size, 1 << 14, {"128"}}},
                             .repetitions = kRepetitions,
                             .prepare = tiled_gemm_trial}),
       .target = 1.2,
       .questions = {
           "Your kernel took {student} against v3's {reference} at {configuration} on {machine} "
           "({cost}, 95% interval {cost_ci}). How many times is each element of A read from "
           "global memory by your kernel, and by v2 (one thread, one dot product)? What "
           "arithmetic intensity (FLOP per byte of global memory traffic) does that give each, "
           "and where do they sit on the roofline of `concurdl run ch04/gemm`'s chart?",
           "Swap tx and ty in your load of A (so a warp reads down a column of A's tile) and "
           "time it again: what changes, and why (coalescing: how many 32-byte sectors does the "
           "warp's load touch in each case)?",
           "Your kernel stores nothing but one float per thread in registers. What does "
           "`concurdl run ch04/gemm` record as v3's and v4's occupancy (the record's notes), and "
           "why does v4, with fewer resident warps, run faster?"}});

  register_exercise(
      {.id = "4.2",
       .chapter = "04-gpu-kernels",
       .title = "a warp-shuffle reduction",
       .test_binary = "ch04_tests",
       .test_filter = "WarpSumEx4_2/student.*",
       .timing = gpu_timing({.title = "the sum of n floats, student vs v5_multi_element",
                             .threads_axis = "",
                             .axes = {{"n", {"64M"}, {}, AxisKind::size, 1 << 30, {"1M"}}},
                             .repetitions = kRepetitions,
                             .prepare = warp_sum_trial}),
       .target = 1.2,
       .questions = {
           "Your reduction took {student} against v5's {reference} at {configuration} on "
           "{machine} ({cost}, 95% interval {cost_ci}). What fraction of the device's measured "
           "copy bandwidth does each reach (bytes read / time; `concurdl run ch04/reduction` "
           "records the roofline), and what bounds a reduction that reads each element once?",
           "Your kernel makes one atomicAdd per warp, v5 one per block of 8 warps. Count the "
           "atomics each makes at n = 64M, and explain from that count why v1 (one atomic per "
           "element) is so much slower than both.",
           "How many shared-memory accesses and __syncthreads() does v3's tree spend on a "
           "block's 256 values, and how many does a shuffle need? Why can a warp exchange "
           "registers without a barrier?"}});
  return true;
}();

}  // namespace

}  // namespace concurdl::gpu
