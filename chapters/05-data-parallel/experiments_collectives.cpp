// All-reduce measured as nccl-tests measures it: per algorithm, rank count, size and in place or
// out of place, the time of one all-reduce (the slowest rank's), algbw = bytes / time and busbw
// = algbw · 2(n−1)/n, and a count of wrong elements from a check of every rank's result at every
// size (a wrong one fails the run). The α–β model (include/concurdl/dp/cost_model.hpp) is fitted
// to the times and projected to 1024 ranks, drawn as a model beside the measurements.
//   ch05/allreduce      the threads backend: ranks are threads of this process
//   ch05/allreduce_mpi  the mpi backend, with MPI_Allreduce and Gloo's ring as peers
//   concurdl run ch05/allreduce
//   concurdl run --ranks 2,4 ch05/allreduce_mpi
//   concurdl exercise ch05                       (exercise 5.1: the ring, against v4_ring)
// The trials are in collective_trials.cpp, the fits and figures in collective_figures.cpp.
#include "collectives.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "exercises/student_ring.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::dp;
using namespace concurdl::dp::collectives;

// --- exercise 5.1 ------------------------------------------------------------------------------

// The student's ring against v4_ring on the threads backend, at 2 ranks (or the machine's
// hardware threads, if more) and 16 MiB out of place.
Experiment ring_exercise_timing() {
  return exercise_timing(
      {.title = "ring all-reduce (threads backend), student vs v4_ring",
       .threads_axis = "ranks",
       .axes = {{"bytes", {"16M"}, {}, AxisKind::size, kMaxBytes}, {"in_place", {"no"}}},
       .metrics = kWrongMetric,
       .prepare = [](Impl impl, const Params& p, GroupCache& cache) {
         return threads_trial(
             impl == Impl::student ? AllReduceFn{&student_allreduce_ring} : &allreduce_ring, p,
             cache);
       }});
}

const bool registered = [] {
  register_experiment({
      .id = "ch05/allreduce",
      .chapter = "05-data-parallel",
      .title = "All-reduce on the threads backend (ranks are threads): time, algbw, busbw, #wrong",
      .axes = shared_axes(kAllReduceVariants.axis("ch05/allreduce"),
                          {"ranks", rank_counts(), {"2", "4"}, AxisKind::count, 64}),
      .metrics = kWrongMetric,
      .derive = derive_bandwidths,
      .scaling_axis = "ranks",
      .interleave = {"algorithm", "in_place"},
      .prepare =
          [](const Params& p, GroupCache& cache) {
            return threads_trial(kAllReduceVariants.find(p).run, p, cache);
          },
      .figures = bandwidth_figures("threads", false),
      .derived = {"algbw", "busbw"},
      .claims = {{.id = "no_wrong_elements",
                  .statement = "On 2 thread ranks every all-reduce, hand-written or native, in "
                               "place or not, at every size gives every rank exactly the sum "
                               "(nccl-tests' #wrong is 0)",
                  .select = {{"ranks", "2"}},
                  .field = "wrong",
                  .compare = Claim::Compare::at_most,
                  .bound = 0,
                  .timing = false},
                 {.id = "ring_beats_naive",
                  // A magnitude: what the two ranks' copies get of the memory system at once.
                  .statement = "At 64 MiB on 2 thread ranks, the ring all-reduce's bus bandwidth "
                               "over the naive one's: at p = 2 both send n bytes a rank, but the "
                               "ring's ranks send at once and copy no input first",
                  .select = {{"algorithm", "v4_ring"},
                             {"ranks", "2"},
                             {"bytes", "64M"},
                             {"in_place", "no"}},
                  .field = "busbw",
                  .versus = {{"algorithm", "v1_naive"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::memory_bandwidth, ClaimCause::cores_and_smt},
                  .unit = "×",
                  .min_cpus = 2}},
  });
#if CONCURDL_HAVE_MPI
  register_experiment({
      .id = "ch05/allreduce_mpi",
      .chapter = "05-data-parallel",
      .title = "All-reduce across MPI ranks (processes): the chapter's algorithms, MPI_Allreduce "
               "and Gloo",
      .axes = shared_axes(mpi_allreduce_variants().axis("ch05/allreduce_mpi"),
                          {"ranks", {"2", "4"}, {}, AxisKind::count, kMaxThreads}),
      .metrics = kWrongMetric,
      .derive = derive_bandwidths,
      .scaling_axis = "ranks",
      .mpi = true,
      .interleave = {"algorithm", "in_place"},
      .prepare = mpi_trial,
      .figures = bandwidth_figures("MPI", true),
      .derived = {"algbw", "busbw"},
      .claims =
          {{.id = "ring_vs_mpi_allreduce",
            // Magnitude: against the MPI library's own algorithm choice (Open MPI 4.1's on Debian
            // 12).
            .statement =
                "How fast the ring all-reduce over MPI point-to-point is against MPI_Allreduce "
                "itself at the largest size and 2 ranks",
            .select =
                {{"algorithm", "v4_ring"}, {"ranks", "2"}, {"bytes", "64M"}, {"in_place", "no"}},
            .field = "busbw",
            .versus = {{"algorithm", "native"}},
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::peer_kernels},
            .unit = "×",
            .min_cpus = 2}},
  });
#endif
  return true;
}();

}  // namespace

// The timed halves of exercises built here (exercise_timings.hpp).
namespace concurdl::dp::exercise_timings {

Experiment ring() { return ring_exercise_timing(); }

}  // namespace concurdl::dp::exercise_timings
