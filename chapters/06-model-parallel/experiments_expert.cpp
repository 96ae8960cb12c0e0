// Chapter 06's expert-parallelism experiment:
//   ch06/expert_parallel  one forward and backward of a mixture-of-experts layer (E = 4 experts
//                         of 256 x 256 at width 256, 4096 tokens) with its experts over 1, 2
//                         and 4 thread ranks (ExpertParallelMoe), top-1 and top-2, capacity
//                         factors 1, 1.25, 2 and dropless, a router skewed towards expert 0 or
//                         not, the backend's all-to-all or chapter 05's pairwise exchange;
//                         validated against nn::MoeLayer on the whole batch. Measured: the step
//                         (the slowest rank), its phases, the routing's counts, the bytes the
//                         communicator counted, and how long the least loaded rank waits in
//                         the exchanges for the busiest.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/expert_parallel.hpp"
#include "concurdl/nn/moe.hpp"
#include "experiments_common.hpp"

namespace concurdl::mp {

namespace {

using detail::pseudo_random;

struct Whole {
  nn::MoeSpec spec;
  std::vector<float> x, dy, y, dx, params, grads;
  std::size_t kept = 0;  // choices computed (the routing's, the same on every rank count)
};

nn::MoeSpec spec_of(const Params& p) {
  nn::MoeSpec s;
  s.width = static_cast<std::size_t>(param_int(p, "width"));
  s.hidden = s.width;
  s.experts = static_cast<std::size_t>(param_int(p, "experts"));
  s.top_k = static_cast<std::size_t>(param_int(p, "top_k"));
  const std::string c = param_str(p, "capacity");
  if (c == "dropless") {
    s.dropless = true;
  } else {
    char* end = nullptr;
    s.capacity_factor = std::strtod(c.c_str(), &end);
    if (end != c.c_str() + c.size() || !(s.capacity_factor > 0))
      throw UsageError(
          fmt::format("parameter 'capacity': '{}' is not a factor > 0 or 'dropless'", c));
  }
  s.aux_alpha = 0.01f;
  try {
    nn::moe_check_spec(s, "ch06/expert_parallel");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return s;
}

// Router bias towards expert 0: `skew` added to its logit, so that most tokens choose it.
void skew_router(const nn::MoeSpec& s, std::span<float> router, double skew) {
  router[s.experts * s.width] += static_cast<float>(skew);
}

Trial expert_trial(const Params& p, GroupCache&) {
  const nn::MoeSpec spec = spec_of(p);
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const auto tokens = static_cast<std::size_t>(param_int(p, "tokens"));
  const double skew = std::strtod(param_str(p, "skew").c_str(), nullptr);
  const TokenExchange exchange =
      param_str(p, "exchange") == "pairwise" ? TokenExchange::pairwise : TokenExchange::native;
  if (spec.experts < static_cast<std::size_t>(ranks))
    throw UsageError(
        fmt::format("{} experts over {} ranks: a rank would hold none", spec.experts, ranks));
  const std::size_t d = spec.width;
  auto whole = std::make_shared<Whole>();
  whole->spec = spec;
  whole->x = pseudo_random(tokens * d, 5);
  whole->dy = pseudo_random(tokens * d, 9);
  for (float& v : whole->dy) v /= static_cast<float>(tokens);
  {
    kernels::ComputeThreadsScope one(1);
    nn::MoeLayer layer(spec, 3);
    skew_router(spec, layer.router_parameters(), skew);
    whole->params.assign(layer.parameters().begin(), layer.parameters().end());
    whole->y.resize(tokens * d);
    whole->dx.resize(tokens * d);
    layer.forward(whole->x.data(), tokens, whole->y.data());
    layer.backward(whole->dy.data(), whole->dx.data());
    for (const std::size_t n : layer.stats().kept) whole->kept += n;
    whole->grads.assign(layer.gradients().begin(), layer.gradients().end());
  }
  struct RankOut {
    std::vector<float> y, dx, grads;
    ExpertParallelStats stats;
    double step = 0;
    std::size_t dropped = 0;  // this rank's tokens' choices its routes say were not computed
  };
  auto out = std::make_shared<std::vector<RankOut>>(static_cast<std::size_t>(ranks));
  Trial t;
  t.measure = [whole, out, ranks, tokens, exchange]() -> Sample {
    kernels::ComputeThreadsScope one(1);  // one compute thread per rank
    const nn::MoeSpec& s = whole->spec;
    const std::size_t d = s.width;
    dp::run_threads(ranks, [&](dp::Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      ExpertParallelMoe ep(comm, s, 3, {.exchange = exchange});
      // The whole layer's router (skewed); the experts are its from the same seed.
      std::copy_n(whole->params.begin(), ep.router_parameters().size(),
                  ep.router_parameters().begin());
      const std::size_t first = r * tokens / static_cast<std::size_t>(comm.size());
      const std::size_t rows = (r + 1) * tokens / static_cast<std::size_t>(comm.size()) - first;
      RankOut& o = (*out)[r];
      o.y.resize(rows * d);
      o.dx.resize(rows * d);
      // One step untimed first: the layer's buffers are new, and their first touch (page
      // faults) would be timed otherwise, more of it on fewer ranks.
      ep.forward(whole->x.data() + first * d, rows, o.y.data());
      ep.backward(whole->dy.data() + first * d, o.dx.data());
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      ep.forward(whole->x.data() + first * d, rows, o.y.data());
      ep.backward(whole->dy.data() + first * d, o.dx.data());
      ep.all_reduce_router_gradients();
      o.step = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      o.stats = ep.stats();
      o.dropped = static_cast<std::size_t>(std::count_if(
          ep.routes().begin(), ep.routes().end(), [](const nn::MoeRoute& x) { return !x.kept; }));
      o.grads.assign(ep.gradients().begin(), ep.gradients().end());
    });
    // The slowest rank's step; the phases of forward and backward together, each the most
    // over the ranks; the wait: the exchanges' seconds on the rank whose experts computed the
    // fewest rows, over those on the rank that computed the most.
    Sample sample(0.0);
    double route = 0, dispatch = 0, experts = 0, combine = 0, exchange_s = 0;
    std::size_t busiest = 0, idlest = 0, dropped = 0;
    // The rank whose counted bytes are furthest from the model's: sent over model (each kept
    // choice with its expert elsewhere, 4 d bytes, out and back, forward and backward).
    double sent_over_model = 1;
    for (std::size_t r = 0; r < out->size(); ++r) {
      const RankOut& o = (*out)[r];
      const auto& f = o.stats.forward_s;
      const auto& b = o.stats.backward_s;
      sample.value = std::max(sample.value, o.step);
      route = std::max(route, f.route + b.route);
      dispatch = std::max(dispatch, f.dispatch + b.dispatch);
      experts = std::max(experts, f.experts + b.experts);
      combine = std::max(combine, f.combine + b.combine);
      exchange_s = std::max(exchange_s, f.exchange + b.exchange);
      const auto& rows = o.stats.rank_rows;
      if (rows[r] > rows[busiest]) busiest = r;
      if (rows[r] < rows[idlest]) idlest = r;
      dropped += o.dropped;
      const auto sent =
          static_cast<double>(o.stats.bytes_sent_forward + o.stats.bytes_sent_backward);
      const auto model = static_cast<double>(2 * o.stats.payload_bytes);
      const double ratio = model > 0 ? sent / model : 1.0 + sent;  // none expected: 1 when none
      if (std::fabs(ratio - 1.0) > std::fabs(sent_over_model - 1.0)) sent_over_model = ratio;
    }
    const auto exch = [&](std::size_t r) {
      return (*out)[r].stats.forward_s.exchange + (*out)[r].stats.backward_s.exchange;
    };
    const auto exp_s = [&](std::size_t r) {
      return (*out)[r].stats.forward_s.experts + (*out)[r].stats.backward_s.experts;
    };
    const nn::MoeStats& g = out->front().stats.global;
    const double choices = static_cast<double>(s.top_k * g.tokens);
    std::size_t overflow = 0;
    for (const std::size_t n : g.routed) overflow += n > g.capacity ? n - g.capacity : 0;
    sample.metrics = {
        {"route_s", route},
        {"dispatch_s", dispatch},
        {"experts_s", experts},
        {"combine_s", combine},
        {"exchange_s", exchange_s},
        {"wait_s", exch(idlest) - exch(busiest)},
        {"experts_spread_s", exp_s(busiest) - exp_s(idlest)},
        {"dropped_fraction", static_cast<double>(dropped) / choices},
        {"overflow_fraction", static_cast<double>(overflow) / choices},
        {"drops_over_overflow", static_cast<double>(dropped) - static_cast<double>(overflow)},
        {"imbalance", g.imbalance},
        {"rank_imbalance", out->front().stats.rank_imbalance}};
    if (exchange == TokenExchange::pairwise && out->size() > 1)
      sample.metrics["sent_over_model"] = sent_over_model;
    return sample;
  };
  // Every rank's outputs, input gradients and its experts' gradients are the whole layer's on
  // its rows, and its router gradient (summed over the ranks in the step) is the whole one's,
  // to 1e-4 of 1 + |value| (the sums' order: a few float roundings).
  t.check = [whole, out, tokens]() -> std::string {
    const nn::MoeSpec& s = whole->spec;
    const std::size_t d = s.width, R = out->size();
    const std::size_t router = nn::moe_router_size(s), expert = nn::moe_expert_size(s);
    const auto off = [](float got, float want) {
      return !(std::fabs(got - want) <= 1e-4f * (1.0f + std::fabs(want)));
    };
    for (std::size_t r = 0; r < R; ++r) {
      const auto& o = (*out)[r];
      const std::size_t first = r * tokens / R;
      for (std::size_t i = 0; i < o.y.size(); ++i)
        if (off(o.y[i], whole->y[first * d + i]) || off(o.dx[i], whole->dx[first * d + i]))
          return fmt::format("rank {}: output or input gradient {} differs from one process's", r,
                             i);
      for (std::size_t i = 0; i < router; ++i)
        if (off(o.grads[i], whole->grads[i]))
          return fmt::format("rank {}: the router's gradient differs from one process's", r);
      const std::size_t e0 = first_expert_of(static_cast<int>(r), s.experts, static_cast<int>(R));
      for (std::size_t i = router; i < o.grads.size(); ++i)
        if (off(o.grads[i], whole->grads[router + e0 * expert + (i - router)]))
          return fmt::format("rank {}: an expert's gradient differs from one process's", r);
    }
    return "";
  };
  t.work.items = static_cast<double>(tokens);
  // The experts' GEMMs on the kept rows (two of 2 d h each forward, twice that backward) and
  // the router's (2 d E forward, 4 d E backward), for the whole batch: dropped choices are not
  // computed.
  const auto kept = static_cast<double>(whole->kept);
  t.work.flops = 3.0 * kept * 4.0 * static_cast<double>(d * spec.hidden) +
                 6.0 * static_cast<double>(tokens * d * spec.experts);
  if (static_cast<unsigned>(ranks) > hardware_threads())
    t.notes["oversubscribed"] = fmt::format("{} ranks on {} hardware threads: they share the cores",
                                            ranks, hardware_threads());
  return t;
}

const bool registered = register_experiment({
    .id = "ch06/expert_parallel",
    .chapter = "06-model-parallel",
    .title = "Expert parallelism: one forward and backward of a 4-expert MoE layer over thread "
             "ranks; capacity, drops, imbalance, phases, bytes and the wait for the busiest rank",
    .axes =
        {{.name = "exchange",
          .values = {"native", "pairwise"},
          .quick = {"native", "pairwise"},
          .smoke = {"pairwise"}},
         {.name = "ranks",
          .values = {"1", "2", "4"},
          .quick = {"1", "2", "4"},
          .kind = AxisKind::count,
          .max = 64,
          .smoke = {"4"}},
         {.name = "top_k", .values = {"1", "2"}, .kind = AxisKind::count, .max = 2, .smoke = {"2"}},
         {.name = "capacity", .values = {"1.0", "1.25", "2.0", "dropless"}, .smoke = {"1.0"}},
         // The logit added to expert 0: 0 leaves the random router near uniform, 0.5 tilts
         // it, 2 sends every token there first.
         {.name = "skew", .values = {"0", "0.5", "2"}, .quick = {"0", "2"}, .smoke = {"2"}},
         {.name = "experts", .values = {"4"}, .kind = AxisKind::count, .max = 64},
         {.name = "width", .values = {"256"}, .kind = AxisKind::count, .max = 4096},
         {.name = "tokens", .values = {"4096"}, .kind = AxisKind::count, .max = 1 << 16}},
    .baseline = {{"ranks", "1"}},
    .metric = "time",
    .unit = "s",
    .lower_is_better = true,
    .metrics =
        {{"route_s", "s", true, "router, counts' all-gather and plan, forward + backward"},
         {"dispatch_s", "s", true, "rows (gradients) packed, exchanged, placed"},
         {"experts_s", "s", true, "the experts' GEMMs on their rows (the busiest rank)"},
         {"combine_s", "s", true, "outputs (input gradients) exchanged back and summed"},
         {"exchange_s", "s", true, "inside the all-to-alls (the most over the ranks)"},
         {"wait_s", "s", true,
          "the exchanges' seconds on the rank with the fewest expert rows minus those on the "
          "rank with the most: its wait for the busiest"},
         {"experts_spread_s", "s", true,
          "the busiest rank's expert seconds minus the idlest's: the wait's model"},
         {"dropped_fraction", "", true,
          "choices whose routes say they were not computed, over every rank, / choices made"},
         {"overflow_fraction", "", true,
          "sum over experts of max(0, routed - capacity) / choices: the capacity arithmetic"},
         {"drops_over_overflow", "", true,
          "choices dropped (the routes') minus sum over experts of max(0, routed - capacity): "
          "0"},
         {"imbalance", "", true, "max / mean choices per expert (1: balanced)"},
         {"rank_imbalance", "", true, "max / mean rows per rank's experts"},
         {"sent_over_model", "", false,
          "bytes the communicator counted leaving a rank over the routing's model of them, on "
          "the rank furthest from 1 (pairwise exchange, 2 ranks or more)",
          true}},
    .scaling_axis = "ranks",
    .interleave = {"exchange", "ranks"},
    .repetitions = 5,
    .warmup = 1,
    .prepare = expert_trial,
    .figures = {{.id = "dropped",
                 .title = "Dropped choices by capacity factor (4 experts, 4096 tokens)",
                 .kind = FigureKind::bars,
                 .x = "capacity",
                 .y = "dropped_fraction",
                 .series = "skew",
                 .where = {{"ranks", "1"}, {"exchange", "native"}},
                 .y_label = "fraction of choices dropped",
                 .x_label = "capacity factor"},
                {.id = "step_time",
                 .title = "One forward and backward by ranks, router skewed to expert 0",
                 .kind = FigureKind::lines,
                 .x = "ranks",
                 .y = "median",
                 .series = "capacity",
                 .where = {{"skew", "2"}, {"top_k", "1"}, {"exchange", "native"}},
                 .y_label = "time per step, slowest rank (s)",
                 .x_label = "thread ranks"},
                {.id = "wait",
                 .title = "The least loaded rank's wait for the busiest, by capacity",
                 .kind = FigureKind::bars,
                 .x = "capacity",
                 .y = "wait_s",
                 .series = "skew",
                 .where = {{"ranks", "4"}, {"top_k", "1"}, {"exchange", "native"}},
                 .y_label = "wait in the exchanges (s)",
                 .x_label = "capacity factor"}},
    .claims =
        {{.id = "drops_are_the_overflow",
          // Invariant: an expert keeps min(routed, C) of its choices, so the drops are
          // sum_e max(0, routed_e - C), whatever the order slots are handed out in. The drops
          // counted are the routes' (every rank's choices marked not kept), the routed counts
          // the router's.
          .statement = "The choices dropped, counted on every rank's routes, are exactly those "
                       "over capacity: sum over experts of max(0, routed - C), C = "
                       "min(ceil(factor x k x tokens / E), tokens)",
          .select = {{"ranks", "4"}},
          .field = "drops_over_overflow",
          .compare = Claim::Compare::within,
          .bound = 0,
          .tolerance = 0,
          .timing =
              false,
          .control = Claim::Control{.select = {{"ranks", "4"}, {"capacity", "1.0"}, {"skew", "2"}},
                                    .field = "dropped_fraction",
                                    .compare = Claim::Compare::at_least,
                                    .bound = 0.05,
                                    .shows = "capacity factor 1 drops choices when the router "
                                             "is skewed"}},
         {.id = "dropless_drops_nothing",
          .statement = "Without a capacity no choice is dropped, even with the router skewed "
                       "to one expert",
          .select = {{"capacity", "dropless"}},
          .field = "dropped_fraction",
          .compare = Claim::Compare::at_most,
          .bound = 0,
          .timing = false,
          .control = Claim::Control{.select = {{"capacity", "1.0"}, {"skew", "2"}},
                                    .field = "dropped_fraction",
                                    .compare = Claim::Compare::at_least,
                                    .bound = 0.05,
                                    .shows = "capacity factor 1 drops choices when the router "
                                             "is skewed"}},
         {.id = "wire_bytes_are_the_routing",
          // Model: each kept choice whose expert is on another rank crosses twice forward
          // (the row out, its output back) and twice backward, 4 d bytes each time.
          .statement = "On every rank, the bytes the communicator counted leaving it equal the "
                       "routing's rows to and from other ranks, 4 d bytes each, forward and "
                       "backward",
          .select = {{"exchange", "pairwise"}, {"ranks", "4"}},
          .field = "sent_over_model",
          .compare = Claim::Compare::within,
          .bound = 1,
          .tolerance = 1e-9,
          .timing = false},
         {.id = "wait_at_skew",
          .statement = "With the router skewed to expert 0 and capacity factor 2, how long the "
                       "least loaded of 4 ranks waits in the exchanges for the busiest, per "
                       "forward and backward",
          .select = {{"ranks", "4"},
                     {"skew", "2"},
                     {"capacity", "2.0"},
                     {"top_k", "1"},
                     {"exchange", "native"}},
          .field = "wait_s",
          .kind = Claim::Kind::magnitude,
          .causes = {ClaimCause::cores_and_smt, ClaimCause::noise},
          .unit = "s"}},
});

}  // namespace

}  // namespace concurdl::mp
