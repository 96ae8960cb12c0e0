// The reduction ladder (include/concurdl/threads/reduction.hpp) measured three ways:
//   ch01/sum_compute_bound  a costly polynomial per element: how far each variant scales with
//                           threads (speedup, Amdahl fit) and what fraction of peak FLOP/s it gets
//   ch01/sum_memory_bound   a plain float sum over an array 4x (quick) or 8x (full) the
//                           last-level cache: bytes/s against the calibrated memory bandwidth
//                           (the roofline's flat part)
//   ch01/false_sharing      v1 (true sharing: one atomic), v2 (false sharing: adjacent slots)
//                           and v3 (padded slots) on an array that stays in cache, so that the
//                           per-element write to shared memory is all that differs
//   ch01/false_sharing_placement  the same three rows on 2 threads pinned to SMT siblings, two
//                           cores under one L3, or cores under different L3s (where this
//                           machine has them; "os" leaves the placing to the scheduler): why the
//                           false-sharing penalty differs from machine to machine
// Two experiments, not one with a "work" axis, because each has its own ceiling (peak FLOP/s,
// memory bandwidth) and its own sizes. The timings of exercises 1.1 and 1.2
// (exercises/student_sum.hpp) against the reference are built here; exercises.cpp registers them.
//   concurdl run ch01/sum_compute_bound ch01/sum_memory_bound ch01/false_sharing
//   concurdl run ch01/false_sharing_placement
//   concurdl exercise ch01
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/cpu_topology.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/threads/omp_team.hpp"
#include "concurdl/threads/reduction.hpp"
#include "exercises/student_sum.hpp"

namespace {

using namespace concurdl;
using concurdl::threads::SumFn;
using concurdl::threads::SumKind;

// The most elements `n` takes: a float array of 32 GiB.
constexpr std::int64_t kMaxFloats = max_elements(sizeof(float));

// Input values in [0, 1), 24 random bits each (exact in a float), from a multiplicative hash of
// the index: no generator state, so every thread can fill its own part. Filled with the same
// static OpenMP schedule over all hardware threads as v4 reads it, so on a multi-socket machine
// the pages are spread over the memory nodes (first touch), as calibrate/mem_copy does.
std::vector<float> make_input(std::size_t n) {
  std::vector<float> x(n);
  const int team = static_cast<int>(hardware_threads());
#pragma omp parallel for num_threads(team) schedule(static)
  for (std::size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>((i * 0x9E3779B97F4A7C15ull) >> 40) * 0x1p-24f;
  return x;
}

struct Reference {
  double sum = 0;
  double sum_abs = 0;
};

struct Input {
  std::vector<float> x;
  Reference ref;
};

// The array and its serial reference are built once per group (all variants and thread counts
// of one size), so the timed configurations share them.
Input& input_for(GroupCache& cache, std::size_t n, SumKind kind) {
  return cache.get<Input>(fmt::format("input {} {}", n, static_cast<int>(kind)), [&] {
    Input in{make_input(n), {}};
    in.ref.sum = threads::serial_reference(in.x, kind);
    in.ref.sum_abs = in.ref.sum;  // every term is >= 0
    return in;
  });
}

// One run = fn(x, threads, kind). Checked against the serial double reference within the
// rounding bound of reduction.hpp (sum_tolerance); the result is poisoned before every run so a
// run that returns without computing cannot pass on the previous run's value.
Trial sum_trial(std::function<double(std::span<const float>, unsigned, SumKind)> fn,
                const Input& in, unsigned threads, SumKind kind, bool openmp) {
  auto result = std::make_shared<double>(0.0);
  const std::span<const float> x(in.x);
  const Reference ref = in.ref;
  Trial t;
  t.reset = [result] { *result = std::numeric_limits<double>::quiet_NaN(); };
  t.run = [result, fn, x, threads, kind] { *result = fn(x, threads, kind); };
  t.check = [result, ref, n = x.size(), threads, openmp]() -> std::string {
    if (openmp)
      if (std::string e = threads::omp_team_shortfall(static_cast<int>(threads)); !e.empty())
        return e;
    const double tol = threads::sum_tolerance(n, ref.sum_abs);
    const double err = std::abs(*result - ref.sum);
    if (err <= tol) return "";
    return fmt::format(
        "sum {:.17g} differs from the serial reference {:.17g} by {:.3g} (bound {:.3g})", *result,
        ref.sum, err, tol);
  };
  const double n = static_cast<double>(x.size());
  t.work = {.items = n, .bytes = 4.0 * n, .flops = threads::flops_per_element(kind) * n};
  return t;
}

// The capacity row (v9_independent_copies): timed from the copies' common start to the last
// finish (independent_copies), not by the harness's clock around the call, which would add the
// threads' creation to it. Checked like the others: every copy's sum is right.
Trial capacity_trial(const Input& in, unsigned threads, SumKind kind) {
  auto result = std::make_shared<double>(0.0);
  const std::span<const float> x(in.x);
  const Reference ref = in.ref;
  Trial t;
  t.reset = [result] { *result = std::numeric_limits<double>::quiet_NaN(); };
  t.measure = [result, x, threads, kind] {
    const threads::IndependentCopies c = threads::independent_copies(x, threads, kind);
    *result = c.mean_sum;
    return c.seconds;
  };
  t.check = [result, ref, n = x.size()]() -> std::string {
    const double tol = threads::sum_tolerance(n, ref.sum_abs);
    if (std::abs(*result - ref.sum) <= tol) return "";
    return fmt::format("the copies' mean sum {:.17g} differs from the serial reference {:.17g}",
                       *result, ref.sum);
  };
  const double n = static_cast<double>(threads) * static_cast<double>(x.size());
  t.work = {.items = n, .bytes = 4.0 * n, .flops = threads::flops_per_element(kind) * n};
  return t;
}

std::function<Trial(const Params&, GroupCache&)> sum_prepare(SumKind kind) {
  return [kind](const Params& p, GroupCache& cache) {
    const threads::SumVariant& v = threads::kSumVariants.find(p);
    // v0_serial has no thread count (Experiment::inapplicable): it runs on one.
    const auto threads_n =
        has_param(p, "threads") ? static_cast<unsigned>(param_int(p, "threads")) : 1u;
    const auto n = static_cast<std::size_t>(param_int(p, "n"));
    const Input& in = input_for(cache, n, kind);
    if (v.work == threads::SumWork::whole_array_per_thread)
      return capacity_trial(in, threads_n, kind);
    return sum_trial(v.fn, in, threads_n, kind, v.runtime == "OpenMP");
  };
}

// The capacity row belongs to the compute-bound sum only (see v9_independent_copies); the rows
// that write shared memory per element are what ch01/false_sharing compares, all of them quick.
bool reduces(const threads::SumVariant& v) { return v.work == threads::SumWork::shared; }
bool writes_per_element(const threads::SumVariant& v) {
  return v.writes == threads::Writes::per_element;
}
// The serial row ignores the thread count: measured once, not once per count.
bool is_serial(const threads::SumVariant& v) { return v.runtime == "none"; }

// ch01/false_sharing_placement: where the two threads run. "os" leaves it to the scheduler;
// the others pin them to a pair of CPUs of this process's affinity mask that has the placement
// (cpu_topology.hpp), found once, when the program starts.
struct Placements {
  std::vector<std::string> names;                // "os", then those this machine has
  std::map<std::string, std::vector<int>> cpus;  // placement -> CPUs (empty for "os")
  std::string unavailable;                       // "other_l3: why; ..." ("" if none)
};

const Placements& placements() {
  static const Placements p = [] {
    const cpu_topology::PlacementPairs pairs =
        cpu_topology::placement_pairs(cpu_topology::read_cpu_sharing());
    Placements out{{"os"}, {{"os", {}}}, {}};
    for (std::string_view name : cpu_topology::kPlacements) {
      const std::string key(name);
      if (const auto pair = pairs.pair(name)) {
        out.names.push_back(key);
        out.cpus[key] = {pair->first, pair->second};
      } else {
        out.unavailable += fmt::format("{}{}: {}", out.unavailable.empty() ? "" : "; ", key,
                                       pairs.why_missing.at(key));
      }
    }
    return out;
  }();
  return p;
}

// A row's pinned sum on the placement's CPUs, checked and counted as sum_trial's are. Each
// record says which CPUs it ran on and which placements this machine could not offer.
Trial placement_trial(const Params& p, GroupCache& cache) {
  const threads::SumVariant& v = threads::kSumVariants.find(p);
  if (v.pinned == nullptr)
    throw UsageError(fmt::format("parameter 'variant': '{}' cannot pin its threads", v.name));
  const Placements& places = placements();
  const std::string& placement = param_str(p, "placement");
  const auto it = places.cpus.find(placement);
  if (it == places.cpus.end())
    throw UsageError(
        fmt::format("parameter 'placement': '{}' is not available here (available: "
                    "{}{}{})",
                    placement, fmt::join(places.names, ", "),
                    places.unavailable.empty() ? "" : "; missing: ", places.unavailable));
  const auto threads_n = static_cast<unsigned>(param_int(p, "threads"));
  const Input& in =
      input_for(cache, static_cast<std::size_t>(param_int(p, "n")), SumKind::memory_bound);
  // The trial outlives this call: it keeps its own copy of the CPU list.
  auto cpus = std::make_shared<const std::vector<int>>(it->second);
  Trial t =
      sum_trial([pinned = v.pinned, cpus](std::span<const float> x, unsigned threads,
                                          SumKind kind) { return pinned(x, threads, kind, *cpus); },
                in, threads_n, SumKind::memory_bound, /*openmp=*/false);
  t.notes["cpus"] = cpus->empty() ? "unpinned (the scheduler places the threads)"
                                  : fmt::format("{}", fmt::join(*cpus, ","));
  if (!places.unavailable.empty()) t.notes["placements_unavailable"] = places.unavailable;
  return t;
}

// "32M" for whole mebi-elements, else the plain number: axis values read as the user types them.
std::string size_text(std::size_t n) {
  return n % (std::size_t{1} << 20) == 0 ? fmt::format("{}M", n >> 20) : fmt::format("{}", n);
}

// Memory-bound sizes: a float array of 4x (quick) and 8x (full) the last-level cache in bytes,
// so that no level of cache holds it and each run streams it from memory.
std::string llc_multiple_elements(std::size_t times) {
  return size_text(times * last_level_cache_bytes() / sizeof(float));
}

// Exercises 1.1 and 1.2: the student's sum against the reference row on one array.
Experiment sum_exercise_timing(const std::string& title, SumFn student, SumFn reference,
                               SumKind kind, const std::string& n) {
  return exercise_timing(
      {.title = title,
       .axes = {{"n", {n}, {}, AxisKind::size, kMaxFloats}},
       .prepare = [=](Impl impl, const Params& p, GroupCache& cache) {
         return sum_trial(impl == Impl::student ? student : reference,
                          input_for(cache, static_cast<std::size_t>(param_int(p, "n")), kind),
                          static_cast<unsigned>(param_int(p, "threads")), kind, /*openmp=*/false);
       }});
}

Experiment sum_compute_bound_experiment() {
  return {
      .id = "ch01/sum_compute_bound",
      .chapter = "01-threads",
      .title = "Parallel sum of a degree-24 polynomial per element: the reduction ladder",
      // 8M elements take about 15 ms on one core here: long enough that where the scheduler
      // first puts a thread (both on one core, until it rebalances) does not decide the result.
      .axes = {threads::kSumVariants.axis("ch01/sum_compute_bound"),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"n", {"16M"}, {"8M"}, AxisKind::size, kMaxFloats}},
      .baseline = {{"threads", "1"}},
      .inapplicable = threads::kSumVariants.inapplicable(is_serial, {"threads"}),
      .ceiling = Ceiling::peak_flops,
      .prepare = sum_prepare(SumKind::compute_bound),
      // Nine Amdahl fits would bury the data: the ladder gets the ideal line only, and one
      // variant (plain threads, exercise 1.1's reference) gets its own chart with the fit.
      .figures = {{.id = "speedup",
                   .title = "Compute-bound sum: speedup over the same variant on 1 thread",
                   .kind = FigureKind::speedup,
                   .overlays = {Overlay::ideal}},
                  {.id = "amdahl",
                   .title = "Compute-bound sum, v7_local_sums: speedup and Amdahl fit",
                   .kind = FigureKind::speedup,
                   .where = {{"variant", "v7_local_sums"}}},
                  {.id = "flops",
                   .title = "Compute-bound sum: FP64 FLOP/s (dashed: calibrated FP32 FMA peak)",
                   .kind = FigureKind::lines,
                   .y = "flops_per_s",
                   .log_y = true,
                   .overlays = {Overlay::flops_ceiling}}},
      .claims =
          {{.id = "two_threads_nearly_double",
            // Magnitude: two vCPUs are two cores' FMA units only where the host gives each its own
            // core (the Zen 5 guest's host sometimes runs both on one: calibration.cores_short).
            .statement =
                "How many times as fast the compute-bound reduction (std::execution::par_unseq) "
                "runs on 2 threads as on 1: near 2 where each vCPU is a core of its own",
            .select = {{"variant", "v8_std_par_unseq"}, {"threads", "2"}},
            .field = "speedup",
            .kind = Claim::Kind::magnitude,
            .causes = {ClaimCause::cores_and_smt},
            .unit = "×",
            .min_cpus = 2}},
  };
}

Experiment sum_memory_bound_experiment() {
  return {
      .id = "ch01/sum_memory_bound",
      .chapter = "01-threads",
      .title =
          "Parallel sum of a float array 4x (quick) or 8x (full) the last-level cache: bandwidth",
      .axes = {threads::kSumVariants.axis("ch01/sum_memory_bound", {.where = reduces}),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"n",
                {llc_multiple_elements(8)},
                {llc_multiple_elements(4)},
                AxisKind::size,
                kMaxFloats}},
      .baseline = {{"threads", "1"}},
      .inapplicable = threads::kSumVariants.inapplicable(is_serial, {"threads"}),
      .ceiling = Ceiling::mem_bandwidth,
      .prepare = sum_prepare(SumKind::memory_bound),
      .figures = {{.id = "bandwidth",
                   .title = "Memory-bound sum: bytes/s (calibrated memory bandwidth dashed)",
                   .kind = FigureKind::lines,
                   .y = "bytes_per_s",
                   .overlays = {Overlay::mem_ceiling}},
                  // No Amdahl fit: what stops this speedup is the memory bus, not a serial
                  // part of the code, and a fitted "serial fraction" would say the opposite.
                  {.id = "speedup",
                   .title = "Memory-bound sum: speedup over the same variant on 1 thread",
                   .kind = FigureKind::speedup,
                   .overlays = {Overlay::ideal}}},
      // The calibrated bandwidth is the best of copy and triad, which write as well as read: a
      // read-only stream can go past it (up to 1.50x in the Zen 5 guest's quiet runs), so the claim
      // is a floor, not a fraction that must stay below 1.
      .claims = {{.id = "two_threads_near_bandwidth",
                  // Magnitude: 2 cores saturate a 2-vCPU guest's share of the memory (0.56-1.29
                  // over the committed 2-vCPU runs) but only 15% of a 16-vCPU socket's.
                  .statement =
                      "The fraction of the calibrated memory bandwidth the memory-bound sum "
                      "(std::execution::par_unseq) streams on 2 threads: all of it where two cores "
                      "saturate the memory, a fraction on a many-core socket",
                  .select = {{"variant", "v8_std_par_unseq"}, {"threads", "2"}},
                  .field = "fraction_of_ceiling",
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::memory_bandwidth, ClaimCause::cores_and_smt},
                  .unit = "×",
                  .min_cpus = 2}},
  };
}

Experiment false_sharing_experiment() {
  return {
      .id = "ch01/false_sharing",
      .chapter = "01-threads",
      .title = "True and false sharing: one shared atomic, adjacent slots, padded slots",
      // The quick profile's array (8 MiB) fits in the last-level cache of most servers, so the
      // loads are cheap and the per-element write to shared memory is what is measured. The full
      // profile adds 16 and 64 MiB: from memory, the loads dilute (but do not hide) the effect.
      .axes = {threads::kSumVariants.axis("ch01/false_sharing",
                                          {.where = writes_per_element, .all_quick = true}),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"n", {"4M", "16M"}, {"2M"}, AxisKind::size, kMaxFloats}},
      .baseline = {{"variant", "v2_adjacent_partials"}},
      .prepare = sum_prepare(SumKind::memory_bound),
      .figures = {{.id = "rate",
                   .title = "Sharing: elements/s, one atomic vs adjacent vs padded slots",
                   .kind = FigureKind::bars,
                   .y = "items_per_s"},
                  {.id = "speedup",
                   .title = "Sharing: speedup over adjacent slots at the same thread count",
                   .kind = FigureKind::bars,
                   .y = "speedup"}},
      .claims = {{.id = "padding_beats_adjacent",
                  // A magnitude: what a move of the line between the cores costs, and how
                  // many updates one move serves (1.14-10.9x on the committed guests).
                  .statement = "How many times as fast the 2-thread sum runs with each thread's "
                               "partial sum padded to its own cache line as with adjacent slots "
                               "that share a line (false sharing)",
                  .select = {{"variant", "v3_padded_partials"}, {"threads", "2"}},
                  .versus = {{"variant", "v2_adjacent_partials"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::caches, ClaimCause::cores_and_smt},
                  .unit = "×",
                  .min_cpus = 2}},
  };
}

Experiment false_sharing_placement_experiment() {
  return {
      .id = "ch01/false_sharing_placement",
      .chapter = "01-threads",
      .title = "False sharing by thread placement: SMT siblings, one L3, two L3s",
      // Two threads, as the lesson's MESI walk-through has them; the sizes are
      // ch01/false_sharing's. Only the placements this machine's affinity mask allows are on
      // the axis; each record's notes name the others and why they are missing.
      .axes = {threads::kSumVariants.axis("ch01/false_sharing_placement",
                                          {.where = writes_per_element, .all_quick = true}),
               {"placement", placements().names},
               {"threads", {"2"}, {}, AxisKind::count, kMaxThreads},
               {"n", {"4M", "16M"}, {"2M"}, AxisKind::size, kMaxFloats}},
      .baseline = {{"variant", "v2_adjacent_partials"}},
      // Every placement in each round of repetitions, so that drift on a shared host hits all.
      .interleave = {"variant", "threads", "placement"},
      .prepare = placement_trial,
      .figures = {{.id = "rate",
                   .title = "Sharing by placement: elements/s on 2 threads",
                   .kind = FigureKind::bars,
                   .x = "placement",
                   .y = "items_per_s"},
                  {.id = "speedup",
                   .title = "Sharing by placement: padded (v3) and atomic (v1) over adjacent "
                            "slots (v2)",
                   .kind = FigureKind::bars,
                   .x = "placement",
                   .y = "speedup"}},
  };
}

const bool registered = [] {
  register_experiment(sum_compute_bound_experiment());
  register_experiment(sum_memory_bound_experiment());
  register_experiment(false_sharing_experiment());
  register_experiment(false_sharing_placement_experiment());
  return true;
}();

}  // namespace

// The timed halves of exercises 1.1 and 1.2 (exercise_timings.hpp).
namespace concurdl::threads::exercise_timings {

Experiment thread_sum() {
  const SumFn v7 = threads::kSumVariants.find("v7_local_sums").fn;
  return sum_exercise_timing("std::thread sum, student vs v7_local_sums",
                             &threads::student_thread_sum, v7, SumKind::compute_bound, "2M");
}

Experiment padded_sum() {
  const SumFn v3 = threads::kSumVariants.find("v3_padded_partials").fn;
  return sum_exercise_timing("per-thread slots, student vs v3_padded_partials",
                             &threads::student_padded_sum, v3, SumKind::memory_bound, "4M");
}

}  // namespace concurdl::threads::exercise_timings
