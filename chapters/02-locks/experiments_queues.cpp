// Queues, stacks and message passing (queue_variants.hpp, message_passing.hpp):
//   ch02/queue_throughput  items/s through our blocking queue and lock-free ring, moodycamel and
//                          tbb::concurrent_bounded_queue; threads = producers + consumers, split
//                          in half; every run's items checked by count, sum and xor, and each
//                          producer's order at each consumer
//   ch02/stack_throughput  push/pop pairs per second, mutex stack vs Treiber stack
//   ch02/message_passing   a histogram kept under a lock vs by one owner thread fed through a
//                          channel, per item and in batches; checked against the serial one
// The timings of exercises 2.3 (blocking queue) and 2.5 (Treiber stack) are built here
// (exercises.cpp).
//   concurdl run ch02/queue_throughput ch02/stack_throughput ch02/message_passing
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/locks/message_passing.hpp"
#include "concurdl/locks/queue_variants.hpp"
#include "exercises/student_queue.hpp"
#include "exercises/student_stack.hpp"
#include "experiments_common.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::locks;
using namespace concurdl::locks::experiments;

using MpmcFn = MpmcResult (*)(unsigned, unsigned, std::uint64_t, std::size_t, SeenTable*);
using StackFn = StackResult (*)(unsigned, std::uint64_t, unsigned, SeenTable*);

// --- queues ------------------------------------------------------------------------------------

// A producer numbers its items in 32 bits (tagged_item), so even a lone producer's share of
// `items` fits; a queue of 2^31 16-byte ring cells is 32 GiB.
constexpr std::int64_t kMaxItems = std::int64_t{1} << 32;
constexpr std::int64_t kMaxCapacity = max_elements(16);

Trial mpmc_trial(MpmcFn run, bool fifo, const Params& p) {
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  // Not a usage error: `--threads 1,2,4` for the whole chapter is reasonable, and this one
  // configuration is recorded as invalid, with the reason, while the rest runs.
  if (threads < 2)
    throw std::invalid_argument("threads=1: a queue needs at least 2 (a producer and a consumer)");
  const unsigned producers = threads / 2, consumers = threads - producers;
  const auto items = static_cast<std::uint64_t>(param_int(p, "items"));
  const auto capacity = static_cast<std::size_t>(param_int(p, "capacity"));
  if ((capacity & (capacity - 1)) != 0)
    throw UsageError(fmt::format("parameter 'capacity': {} is not a power of two", capacity));
  const std::uint64_t per_producer = std::max<std::uint64_t>(1, items / producers);
  const MpmcResult want = expected_items(producers, per_producer);
  auto last = std::make_shared<MpmcResult>();
  Trial t;
  t.run = [=] { *last = run(producers, consumers, per_producer, capacity, nullptr); };
  t.check = [=]() -> std::string {
    if (last->count != want.count || last->sum != want.sum || last->xr != want.xr)
      return fmt::format(
          "{} items popped of {} pushed (sum {:#x} vs {:#x}, xor {:#x} vs {:#x}): "
          "items lost or duplicated",
          last->count, want.count, last->sum, want.sum, last->xr, want.xr);
    if (fifo && last->out_of_order != 0)
      return fmt::format("{} items overtook an earlier item of their producer", last->out_of_order);
    return "";
  };
  t.work = {.items = static_cast<double>(want.count)};
  return t;
}

Trial queue_trial(const Params& p, GroupCache&) {
  const QueueVariant& v = kQueueVariants.find(p);
  return mpmc_trial(v.run, v.order == locks::Order::fifo_per_producer, p);
}

// --- stacks ------------------------------------------------------------------------------------

constexpr unsigned kStackBurst = 8;
// A thread numbers its pushes (rounds x burst) in 32 bits.
constexpr std::int64_t kMaxRounds = ((std::int64_t{1} << 32) - 1) / kStackBurst;

Trial stack_run_trial(StackFn run, const Params& p) {
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  const auto rounds = static_cast<std::uint64_t>(param_int(p, "rounds"));
  auto last = std::make_shared<StackResult>();
  Trial t;
  t.run = [=] { *last = run(threads, rounds, kStackBurst, nullptr); };
  t.check = [=]() -> std::string {
    const std::uint64_t want = std::uint64_t{threads} * rounds * kStackBurst;
    if (last->stuck) return "a push or pop could not succeed for seconds: nodes were lost";
    if (last->pushed != want) return fmt::format("{} pushes made of {}", last->pushed, want);
    if (!last->conserved())
      return fmt::format("{} items popped of {} pushed, or different ones: lost or duplicated",
                         last->popped, last->pushed);
    return "";
  };
  // items = push + pop operations
  t.work = {.items = 2.0 * threads * static_cast<double>(rounds) * kStackBurst};
  return t;
}

Trial stack_trial(const Params& p, GroupCache&) {
  return stack_run_trial(kStackVariants.find(p).run, p);
}

// --- message passing ---------------------------------------------------------------------------

Trial message_trial(const Params& p, GroupCache&) {
  const MessagePassingVariant& v = kMessagePassingVariants.find(p);
  const auto producers = static_cast<unsigned>(param_int(p, "threads"));
  const auto items = static_cast<std::uint64_t>(param_int(p, "items"));
  const std::uint64_t per_producer = std::max<std::uint64_t>(1, items / producers);
  const Histogram want = serial_histogram(producers, per_producer);
  auto last = std::make_shared<Histogram>();
  Trial t;
  t.reset = [last] { last->fill(0); };
  t.run = [=, run = v.run] { *last = run(producers, per_producer); };
  t.check = [=]() -> std::string {
    for (std::size_t b = 0; b < kHistogramBins; ++b)
      if ((*last)[b] != want[b])
        return fmt::format("bin {} holds {}, the serial histogram {}", b, (*last)[b], want[b]);
    return "";
  };
  t.work = {.items = static_cast<double>(per_producer) * producers};
  return t;
}

const bool registered = [] {
  register_experiment({
      .id = "ch02/queue_throughput",
      .chapter = "02-locks",
      .title = "MPMC queues: items/s with threads/2 producers and the rest consumers",
      .axes = {kQueueVariants.axis("ch02/queue_throughput"),
               {"threads", thread_counts_from_two(), {}, AxisKind::count, kMaxThreads},
               {"items", {"1M"}, {"200K"}, AxisKind::size, kMaxItems},
               {"capacity", {"1024"}, {}, AxisKind::size, kMaxCapacity}},
      // speedup = items/s against the mutex + condvar queue at the same thread count
      .baseline = {{"variant", "v1_blocking_queue"}},
      .prepare = queue_trial,
      .figures = {{.id = "rate",
                   .title = "MPMC queues: items/s (threads = producers + consumers)",
                   .kind = FigureKind::lines,
                   .y = "items_per_s",
                   .log_y = true,
                   .y_label = "items/s (log)"},
                  {.id = "vs_blocking",
                   .title = "MPMC queues: items/s relative to the mutex + condvar queue",
                   .kind = FigureKind::bars,
                   .y = "speedup",
                   .log_y = true,
                   .y_label = "items/s / v1_blocking_queue's (log)"}},
      .claims = {{.id = "ring_keeps_up_with_moodycamel",
                  // Magnitude: against moodycamel's own queue (0.86-1.62x over the committed runs).
                  .statement =
                      "How fast the chapter's bounded lock-free ring moves items with one producer "
                      "and one consumer against moodycamel's ConcurrentQueue",
                  .select = {{"variant", "v2_ring_queue"}, {"threads", "2"}},
                  .versus = {{"variant", "moodycamel"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::peer_kernels, ClaimCause::caches},
                  .unit = "×",
                  .min_cpus = 2}},
  });

  register_experiment({
      .id = "ch02/stack_throughput",
      .chapter = "02-locks",
      .title = "Stacks: push+pop operations/s, mutex stack vs Treiber stack",
      .axes = {kStackVariants.axis("ch02/stack_throughput"),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"rounds", {"100K"}, {"10K"}, AxisKind::size, kMaxRounds}},
      .baseline = {{"variant", "locked_stack"}},
      .prepare = stack_trial,
      .figures = {{.id = "rate",
                   .title = "Stacks: push and pop operations/s",
                   .kind = FigureKind::lines,
                   .y = "items_per_s",
                   .y_label = "operations/s"}},
  });

  register_experiment({
      .id = "ch02/message_passing",
      .chapter = "02-locks",
      .title = "Message passing vs shared memory: a histogram under a lock vs an owner thread "
               "fed through a channel",
      .axes = {kMessagePassingVariants.axis("ch02/message_passing"),
               {"threads", thread_counts(), {}, AxisKind::count, kMaxThreads},
               {"items", {"2M"}, {"200K"}, AxisKind::size, kMaxItems}},
      .baseline = {{"variant", "v1_shared_state"}},
      .prepare = message_trial,
      .figures = {{.id = "rate",
                   .title = "Histogram of produced items: items/s vs producer threads",
                   .kind = FigureKind::lines,
                   .y = "items_per_s",
                   .log_y = true,
                   .y_label = "items/s (log)"}},
  });

  return true;
}();

}  // namespace

// The timed halves of exercises built here (exercise_timings.hpp).
namespace concurdl::locks::exercise_timings {

Experiment blocking_queue() {
  return exercise_timing(
      {.title = "blocking queue, student vs v1_blocking_queue",
       .axes = {{"items", {"200K"}, {"100K"}, AxisKind::size, kMaxItems},
                {"capacity", {"1024"}, {}, AxisKind::size, kMaxCapacity}},
       .prepare = [](Impl impl, const Params& p, GroupCache&) {
         const MpmcFn fn = impl == Impl::student
                               ? &run_mpmc<BlockingAdapter<StudentBlockingQueue<std::uint64_t>>>
                               : &run_mpmc<BlockingAdapter<BoundedBlockingQueue<std::uint64_t>>>;
         return mpmc_trial(fn, true, p);
       }});
}

Experiment treiber_stack() {
  return exercise_timing({.title = "Treiber stack, student vs reference",
                          .axes = {{"rounds", {"50K"}, {"10K"}, AxisKind::size, kMaxRounds}},
                          .prepare = [](Impl impl, const Params& p, GroupCache&) {
                            const StackFn fn = impl == Impl::student
                                                   ? &run_stack<StudentTreiberStack<std::uint64_t>>
                                                   : &run_stack<TreiberStack<std::uint64_t>>;
                            return stack_run_trial(fn, p);
                          }});
}

}  // namespace concurdl::locks::exercise_timings
