// Memory-ordering litmus tests (litmus.hpp):
//   ch02/litmus  store buffering and message passing, each under relaxed, acquire/release and
//                seq_cst atomics: how many trials per million show the outcome sequential
//                consistency forbids. On x86 (TSO): store buffering shows it unless seq_cst;
//                message passing never does. On ARM or POWER relaxed shows both.
// The check holds what the C++ model promises: store buffering under seq_cst and message
// passing under acquire/release or seq_cst never show it. Two threads, whatever the machine;
// with one CPU they take turns and never overlap (a note on the record says so).
//   concurdl run ch02/litmus
#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/locks/litmus.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::locks;

Trial litmus_trial(const Params& p, GroupCache&) {
  const std::optional<LitmusTest> test = parse_litmus_test(param_str(p, "test"));
  if (!test)
    throw UsageError(fmt::format("parameter 'test': '{}' is not store_buffering or message_passing",
                                 param_str(p, "test")));
  const std::optional<LitmusOrder> order = parse_litmus_order(param_str(p, "order"));
  if (!order)
    throw UsageError(fmt::format("parameter 'order': '{}' is not relaxed, acq_rel or seq_cst",
                                 param_str(p, "order")));
  const auto trials = static_cast<std::uint64_t>(param_int(p, "trials"));
  auto last = std::make_shared<LitmusResult>();
  Trial t;
  t.measure = [=, test = *test, order = *order] {
    *last = run_litmus(test, order, trials);
    return Sample{last->seconds,
                  {{"forbidden", static_cast<double>(last->forbidden())},
                   {"forbidden_per_million", last->forbidden_per_million()}}};
  };
  t.check = [last] { return check_litmus(*last); };
  t.work = {.items = static_cast<double>(trials)};
  if (hardware_threads() < 2)
    t.notes["overlap"] =
        "one hardware thread: the two threads take turns on one CPU and never access the "
        "locations at the same time, so the forbidden counts stay at or near 0";
  return t;
}

const bool registered = [] {
  register_experiment({
      .id = "ch02/litmus",
      .chapter = "02-locks",
      .title = "Memory-ordering litmus tests: outcomes sequential consistency forbids, per "
               "million trials (store buffering, message passing; relaxed, acq_rel, seq_cst)",
      .axes = {{"test", {"store_buffering", "message_passing"}},
               {"order", {"relaxed", "acq_rel", "seq_cst"}},
               // Trials per repetition: ~0.1-0.2 us each with two CPUs; the limit keeps the
               // outcome arrays at 128 MiB.
               {"trials", {"10M"}, {"1M"}, AxisKind::size, kMaxLitmusTrials, {"10K"}}},
      .metrics = {{"forbidden", "", true,
                   "trials that showed the outcome sequential consistency forbids (store "
                   "buffering: r1 = r2 = 0; message passing: r1 = 1, r2 = 0)"},
                  {"forbidden_per_million", "", true,
                   "the same per million trials; 0 wherever the order forbids it (checked)"}},
      .prepare = litmus_trial,
      .figures = {{.id = "forbidden",
                   .title = "Outcomes sequential consistency forbids, per million trials",
                   .kind = FigureKind::bars,
                   .x = "order",
                   .y = "forbidden_per_million",
                   .series = "test",
                   .y_label = "forbidden outcomes per million trials"}},
      // Not about speed: judged on every profile, smoke runs included. An invariant of the C++
      // memory model ([atomics.order]: seq_cst operations have one total order S consistent
      // with each thread's program order, so one thread's load follows the other's store). 0
      // forbidden outcomes is also what two threads that never overlapped would show, so it is
      // judged only where relaxed store buffering, in the same run, showed the outcome at
      // least once: the threads did race, and the test can see a reordering. (How often
      // relaxed shows it is the machine's business: reported, not claimed.)
      .claims = {{.id = "seq_cst_forbids_store_buffering",
                  .statement = "Under seq_cst the store-buffering litmus never shows r1 = r2 = 0, "
                               "the outcome sequential consistency forbids",
                  .select = {{"test", "store_buffering"}, {"order", "seq_cst"}},
                  .field = "forbidden",
                  .compare = Claim::Compare::at_most,
                  .bound = 0,
                  .min_cpus = 2,
                  .timing = false,
                  .control =
                      Claim::Control{.select = {{"test", "store_buffering"}, {"order", "relaxed"}},
                                     .field = "forbidden",
                                     .bound = 1,
                                     .shows = "relaxed store buffering shows r1 = r2 = 0"}}},
  });
  return true;
}();

}  // namespace
