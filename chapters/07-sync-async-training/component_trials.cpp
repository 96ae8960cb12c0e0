// Chapter 07's parts timed alone, off the training loop, on the sizes the chapter's training
// moves: the timed halves of its exercises (exercise_timings.hpp), the student's code against
// the chapter's own in one process, interleaved:
//   exercise 7.1  a parameter server's pull and push: N threads pull and push the MLP's 235146
//                 floats, 4 shards (StudentParameterServer vs ParameterServer)
//   exercise 7.2  the SSP wait: N workers, odd ones twice as slow, step under bound 1
//                 (StudentSspClock vs SspClock)
//   exercise 7.3  Hogwild's update: 1 and 2 threads update one shared copy of the 235146 floats
//                 (student_hogwild_step vs hogwild_step)
// Every trial is checked after it runs (every push in, every clock where it should be, every
// Hogwild element a count of updates): a wrong result is an invalid run, never a fast one.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "concurdl/asgd/hogwild.hpp"
#include "concurdl/asgd/parameter_server.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/nn/sgd.hpp"
#include "exercise_timings.hpp"
#include "exercises/student_hogwild.hpp"
#include "exercises/student_ps.hpp"
#include "exercises/student_ssp.hpp"

namespace concurdl::asgd {

namespace {

// The largest vector the timings take: 1 GiB per array (a trial holds 3 of them and one more
// per thread).
constexpr std::int64_t kMaxFloats = std::int64_t{1} << 28;
constexpr std::int64_t kMaxSteps = 100'000'000;

// The parameters of `concurdl train`'s MLP (784-256-128-10): what each pull, push and Hogwild
// step of the chapter's training moves.
Axis floats_axis() { return {"floats", {"235146"}, {}, AxisKind::size, kMaxFloats, {"4096"}}; }

// Runs body(w) for w = 0 .. threads-1 on threads of their own, and joins them.
template <class Body>
void run_team(int threads, const Body& body) {
  std::vector<std::jthread> team;
  for (int w = 0; w < threads; ++w) team.emplace_back([&body, w] { body(w); });
}

// `total` split over `threads` as evenly as it goes: worker w's share.
std::uint64_t share(std::uint64_t total, int threads, int w) {
  const auto t = static_cast<std::uint64_t>(threads), i = static_cast<std::uint64_t>(w);
  return total / t + (i < total % t ? 1 : 0);
}

// --- 7.1 a parameter server's pull and push ----------------------------------------------------

// What the servers of a group start from and must end at. Every push is the same gradient, so
// K pushes leave each shard where K nn::Sgd steps leave it, in whatever order they came: a
// push lost, doubled or torn shows in the last bit.
struct PsInputs {
  std::vector<float> initial, gradient, expected;
};
const nn::SgdOptions kSgd{};  // `concurdl train`'s defaults

template <class Server>
Trial ps_trial(const Params& p, GroupCache& cache) {
  const int threads = static_cast<int>(param_int(p, "threads"));
  const auto n = static_cast<std::size_t>(param_int(p, "floats"));
  const int shards = static_cast<int>(param_int(p, "shards"));
  const auto pushes = static_cast<std::uint64_t>(param_int(p, "pushes"));
  if (static_cast<std::size_t>(shards) > n)
    throw UsageError(fmt::format("parameter 'shards': {} shards of {} floats", shards, n));
  const auto in = cache.get<std::shared_ptr<const PsInputs>>("ps_inputs", [&] {
    auto x = std::make_shared<PsInputs>();
    x->initial.resize(n);
    x->gradient.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      x->initial[i] = 0.01f * static_cast<float>((i * 37) % 101) - 0.5f;
      x->gradient[i] = 1e-3f * static_cast<float>((i * 53) % 97) - 0.05f;
    }
    x->expected = x->initial;
    nn::Sgd sgd(n, kSgd);
    for (std::uint64_t k = 0; k < pushes; ++k) sgd.step(x->expected, x->gradient);
    return std::shared_ptr<const PsInputs>(std::move(x));
  });
  struct State {
    std::unique_ptr<Server> server;
    std::vector<std::vector<float>> pulled;  // each worker's copy
  };
  auto st = std::make_shared<State>();
  st->pulled.assign(static_cast<std::size_t>(threads), std::vector<float>(n));
  Trial t;
  t.reset = [st, in, shards] {
    st->server.reset();
    st->server = std::make_unique<Server>(in->initial, kSgd, shards);
  };
  // Each worker pulls and pushes its share of the pushes back to back, as ps-async's workers
  // do with the compute left out: what the server itself costs.
  t.run = [st, in, threads, pushes] {
    Server& ps = *st->server;
    run_team(threads, [&](int w) {
      std::span<float> mine = st->pulled[static_cast<std::size_t>(w)];
      for (std::uint64_t i = share(pushes, threads, w); i > 0; --i)
        ps.push(in->gradient, ps.pull(mine));
    });
  };
  t.check = [st, in, pushes, n]() -> std::string {
    if (!st->server) return "the server was not built";
    Server& ps = *st->server;
    if (ps.version() != pushes)
      return fmt::format("version {} after {} pushes", ps.version(), pushes);
    std::vector<float> out(n);
    ps.pull(out);
    const auto [got, want] = std::mismatch(out.begin(), out.end(), in->expected.begin());
    if (got == out.end()) return "";
    return fmt::format("parameter {} is {} after {} pushes; as many nn::Sgd steps give {}",
                       got - out.begin(), *got, pushes, *want);
  };
  // Per pull and push: the pull reads and writes n floats; the push reads parameters, momentum
  // and gradient and writes parameters and momentum: 7 floats of memory traffic per parameter.
  t.work = {.items = static_cast<double>(pushes),
            .bytes = static_cast<double>(pushes) * 7.0 * sizeof(float) * static_cast<double>(n)};
  return t;
}

// --- 7.2 the SSP wait condition ----------------------------------------------------------------

void spin(std::int64_t iterations) {
  volatile double x = 0;
  for (std::int64_t k = 0; k < iterations; ++k) x = x + 1.0;
}

// Every worker takes `steps` steps under the bound; a step is `work` spin iterations on even
// workers and twice that on odd ones, so the fast ones keep catching up with the bound and
// waiting: what is timed is the clock's waits and wake-ups, with as little else as will do.
template <class Clock>
Trial ssp_trial(const Params& p, GroupCache&) {
  const int workers = static_cast<int>(param_int(p, "threads"));
  const auto bound = static_cast<std::uint64_t>(param_int(p, "bound"));
  const auto steps = static_cast<std::uint64_t>(param_int(p, "steps"));
  const std::int64_t work = param_int(p, "work");
  struct State {
    std::unique_ptr<Clock> clock;
    std::atomic<std::uint64_t> over{0};  // leads above the bound that wait_turn returned
  };
  auto st = std::make_shared<State>();
  Trial t;
  t.reset = [st, workers, bound] {
    st->clock.reset();
    st->clock = std::make_unique<Clock>(workers, bound);
    st->over = 0;
  };
  t.run = [st, workers, bound, steps, work] {
    Clock& clock = *st->clock;
    run_team(workers, [&](int w) {
      for (std::uint64_t i = 0; i < steps; ++i) {
        if (clock.wait_turn(w) > bound) st->over.fetch_add(1, std::memory_order_relaxed);
        spin(work * (1 + w % 2));
        clock.advance(w);
      }
      clock.leave(w);
    });
  };
  t.check = [st, workers, bound, steps]() -> std::string {
    if (!st->clock) return "the clock was not built";
    if (st->over.load() > 0)
      return fmt::format("wait_turn returned a lead above bound {} {} times", bound,
                         st->over.load());
    if (st->clock->max_lead() > bound)
      return fmt::format("max_lead {} above bound {}", st->clock->max_lead(), bound);
    for (int w = 0; w < workers; ++w)
      if (st->clock->clock(w) != steps)
        return fmt::format("worker {}'s clock is {} after {} steps", w, st->clock->clock(w), steps);
    return "";
  };
  t.work = {.items = static_cast<double>(steps) * workers};
  return t;
}

// --- 7.3 Hogwild's update loop -----------------------------------------------------------------

using StepFn = void (*)(std::span<float>, std::span<float>, std::span<const float>,
                        const nn::SgdOptions&);

// `updates` Hogwild steps in all, shared out over the threads, on one copy of the parameters.
// lr 1, no momentum, gradient -1: each step adds 1 to every element, so every element ends a
// whole number of updates between 1 and `updates` (exactly `updates` on one thread), and the
// velocity is -1 throughout. The arithmetic per element is nn::Sgd's whatever the options.
Trial hogwild_trial(StepFn step, const Params& p, GroupCache& cache) {
  const int threads = static_cast<int>(param_int(p, "threads"));
  const auto n = static_cast<std::size_t>(param_int(p, "floats"));
  const auto updates = static_cast<std::uint64_t>(param_int(p, "updates"));
  const auto grad = cache.get<std::shared_ptr<const std::vector<float>>>(
      "minus_one", [n] { return std::make_shared<const std::vector<float>>(n, -1.0f); });
  struct State {
    std::vector<float> params, velocity;
  };
  auto st = std::make_shared<State>();
  st->params.resize(n);
  st->velocity.resize(n);
  Trial t;
  t.reset = [st] {
    std::fill(st->params.begin(), st->params.end(), 0.0f);
    std::fill(st->velocity.begin(), st->velocity.end(), 0.0f);
  };
  t.run = [st, grad, step, threads, updates] {
    const nn::SgdOptions sgd{1.0f, 0.0f, 0.0f};
    run_team(threads, [&](int w) {
      for (std::uint64_t i = share(updates, threads, w); i > 0; --i)
        step(st->params, st->velocity, *grad, sgd);
    });
  };
  t.check = [st, threads, updates]() -> std::string {
    const auto made = static_cast<float>(updates);
    for (std::size_t i = 0; i < st->params.size(); ++i) {
      const float x = st->params[i];
      if (!(x >= 1.0f && x <= made && x == std::floor(x)) || (threads == 1 && x != made))
        return fmt::format("element {} is {} after {} updates on {} threads", i, x, updates,
                           threads);
      if (st->velocity[i] != -1.0f)
        return fmt::format("velocity {} is {}, not -1", i, st->velocity[i]);
    }
    return "";
  };
  // Per step and element: read parameter, velocity and gradient, write parameter and velocity.
  t.work = {.items = static_cast<double>(updates),
            .bytes = static_cast<double>(updates) * 5.0 * sizeof(float) * static_cast<double>(n)};
  return t;
}

}  // namespace

}  // namespace concurdl::asgd

// The timed halves of exercises 7.1, 7.2 and 7.3 (exercise_timings.hpp).
namespace concurdl::asgd::exercise_timings {

Experiment parameter_server() {
  return exercise_timing(
      {.title = "parameter server: N threads pull and push, student vs ParameterServer",
       .axes = {floats_axis(),
                {"shards", {"4"}, {}, AxisKind::count, 4096},
                {"pushes", {"1500"}, {}, AxisKind::count, kMaxSteps, {"4"}}},
       .prepare = [](Impl impl, const Params& p, GroupCache& cache) {
         return impl == Impl::student ? ps_trial<StudentParameterServer>(p, cache)
                                      : ps_trial<ParameterServer>(p, cache);
       }});
}

Experiment ssp_clock() {
  return exercise_timing(
      {.title = "SSP clock: N workers of unequal speed under a bound, student vs SspClock",
       .axes = {{.name = "bound",
                 .values = {"1"},
                 .kind = AxisKind::integer,
                 .max = kMaxSteps,
                 .min = 0},
                {"steps", {"20000"}, {}, AxisKind::count, kMaxSteps, {"100"}},
                {"work", {"300"}, {}, AxisKind::count, 1'000'000}},
       .prepare = [](Impl impl, const Params& p, GroupCache& cache) {
         return impl == Impl::student ? ssp_trial<StudentSspClock>(p, cache)
                                      : ssp_trial<SspClock>(p, cache);
       }});
}

Experiment hogwild() {
  return exercise_timing(
      {.title = "Hogwild step on one shared copy, student vs hogwild_step",
       .threads_axis = "",
       .axes = {{"threads", {"1", "2"}, {}, AxisKind::count, kMaxThreads},
                floats_axis(),
                {"updates", {"1000"}, {}, AxisKind::count, kMaxSteps, {"4"}}},
       .prepare = [](Impl impl, const Params& p, GroupCache& cache) {
         return hogwild_trial(impl == Impl::student ? StepFn{&student_hogwild_step} : &hogwild_step,
                              p, cache);
       }});
}

}  // namespace concurdl::asgd::exercise_timings
