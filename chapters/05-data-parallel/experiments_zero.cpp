// Chapter 05's sharded data-parallel experiment (zero.hpp), on the threads backend:
//   ch05/zero  ZeRO stages 0-3 against ranks (1, 2, 4; 4 oversubscribes a 2-core machine),
//              the communication thread off and on: per rank, the bytes of parameters,
//              gradients and momentum it keeps (counted by its ledger) and the bytes it sends
//              per step (counted by the communicator), each beside ZeRO's model (dashed), and
//              samples/s. 64 rows per rank, on the chapter's MLP (784-256-128-10, Ψ = 235146)
//              and, in the full profile, a deeper one whose largest layer is a smaller part
//              of it; the trials of ch05/dp_train (train_trials.hpp). Afterwards every rank's
//              gathered parameters must be rank 0's and the loss must have gone down.
//   exercise 5.3  the student's ZeRO-2 steps against zero_reduce_layer / zero_update_layer
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/memory.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/dp/zero.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/torch_peer.hpp"
#include "exercise_timings.hpp"
#include "exercises/student_zero.hpp"
#include "train_trials.hpp"

namespace concurdl::dp {

namespace {

using namespace train_trials;

constexpr std::size_t kRows = 64;  // per rank
// The chapter's MLP (Ψ = 235146; its first layer is 85% of it) and a deeper one (Ψ = 532490;
// its largest layer 38%): what a rank holds at its peak depends on the largest layer, which
// stage 3 gathers whole.
constexpr const char* kArch = "784-256-128-10";
constexpr const char* kDeepArch = "784-256-256-256-256-256-256-10";

const std::vector<Metric> kZeroMetrics = {
    {"parameters_bytes", "B", false, "per rank, between steps: parameters held (ledger)", true},
    {"gradients_bytes", "B", false, "per rank, between steps: gradients held (ledger)", true},
    {"optimizer_bytes", "B", false, "per rank, between steps: momentum held (ledger)", true},
    {"state_bytes", "B", false,
     "per rank, between steps: parameters + gradients + momentum (ZeRO's model states)", true},
    {"state_model_bytes", "B", false,
     "ZeRO's model of state_bytes: (4 + 4 + 4)Ψ, one term /N a stage", true},
    {"peak_bytes", "B", false,
     "per rank, the most held at once during the steps: model states, a layer's gathered "
     "parameters or whole gradient in flight, and activations",
     true},
    {"activations_bytes", "B", false,
     "per rank: the batch's inputs and the layers' outputs (ledger)", true},
    {"sent_bytes_per_step", "B", false, "per rank per step: bytes sent (communicator's count)",
     true},
    {"sent_model_bytes_per_step", "B", false,
     "ZeRO's model of sent_bytes_per_step: 2Ψ (stages 0-2) or 3Ψ (stage 3) floats x (N-1)/N", true},
    {"peak_rss_bytes", "B", false,
     "the process's peak resident set over the timed steps (VmHWM reset before them; every rank "
     "thread, the data set and the libraries): the ledger's bytes are a small part of it",
     true}};

struct ZeroState {
  double divergence = 0, first_loss = 0, last_loss = 0;
};

Sample measure_zero(const nn::Dataset& data, const nn::MlpSpec& spec, int ranks, int stage,
                    bool overlap, ZeroState& st, const Zero2Steps& steps = {}) {
  kernels::ComputeThreadsScope one(1);
  nn::TrainConfig config;
  config.spec = spec;
  config.batch = kRows;
  config.threads = 0;
  config.lr_decay = 1.0f;
  Sample s;
  run_threads(ranks, [&](Communicator& comm) {
    ZeroOptions z;
    z.stage = stage;
    z.overlap = overlap;
    z.zero2 = steps;
    ZeroTrainer t(comm, config, data, z);
    double first = 0, last = 0;
    for (int i = 0; i < kWarmSteps; ++i) {
      const auto r = t.step();
      first += r.loss_sum / static_cast<double>(r.rows ? r.rows : 1);
    }
    t.memory().reset_peak();
    const std::uint64_t sent0 = t.step_bytes_sent(), steps0 = t.steps_counted();
    const int steps = steps_for(t.global_batch());
    const bool rss_window = begin_resident_window(comm);  // these steps' peak alone
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      const auto r = t.step();
      if (i >= steps - kWarmSteps) last += r.loss_sum / static_cast<double>(r.rows ? r.rows : 1);
    }
    comm.barrier();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<float> params = t.gather_parameters();
    const double div = replica_divergence(comm, params);
    if (comm.rank() == 0) {
      const MemoryBytes now = t.memory().current();
      const ZeroModel model = zero_model(t.parameter_count(), ranks, stage);
      s.value = secs;
      s.metrics["parameters_bytes"] = static_cast<double>(now[MemoryKind::parameters]);
      s.metrics["gradients_bytes"] = static_cast<double>(now[MemoryKind::gradients]);
      s.metrics["optimizer_bytes"] = static_cast<double>(now[MemoryKind::optimizer]);
      s.metrics["activations_bytes"] = static_cast<double>(now[MemoryKind::activations]);
      s.metrics["state_bytes"] = static_cast<double>(
          now[MemoryKind::parameters] + now[MemoryKind::gradients] + now[MemoryKind::optimizer]);
      s.metrics["state_model_bytes"] = model.total();
      s.metrics["peak_bytes"] = static_cast<double>(t.memory().peak_total());
      s.metrics["sent_bytes_per_step"] = static_cast<double>(t.step_bytes_sent() - sent0) /
                                         static_cast<double>(t.steps_counted() - steps0);
      s.metrics["sent_model_bytes_per_step"] = model.sent_per_step;
      end_resident_window(rss_window, s);
      st.divergence = div;
      st.first_loss = first / kWarmSteps;
      st.last_loss = last / kWarmSteps;
    }
  });
  return s;
}

std::string check_zero(const ZeroState& st) {
  if (st.divergence != 0)
    return fmt::format("the ranks' gathered parameters differ (divergence {})", st.divergence);
  if (!std::isfinite(st.last_loss) || !(st.last_loss < st.first_loss))
    return fmt::format("the loss did not go down: {:.3f} in the first steps, {:.3f} in the last",
                       st.first_loss, st.last_loss);
  return "";
}

// The interpreter that runs the FSDP peer: the first named one whose torch is 2.6 or later
// (FSDP2's fully_shard, on CPU with gloo); nullptr, with why, where none is.
const nn::TorchPython* fsdp_python(std::string* why_not = nullptr) {
  std::string why;
  for (const nn::TorchPython& t : nn::torch_pythons()) {
    if (!t.why_not.empty()) {
      why += (why.empty() ? "" : "; ") + t.why_not;
      continue;
    }
    const int major = std::atoi(t.version.c_str());
    const std::size_t dot = t.version.find('.');
    const int minor = dot == std::string::npos ? 0 : std::atoi(t.version.c_str() + dot + 1);
    if (major > 2 || (major == 2 && minor >= 6)) return &t;
    why += (why.empty() ? "" : "; ") +
           fmt::format("{} has PyTorch {} (FSDP2's fully_shard needs 2.6 or later)", t.python,
                       t.version);
  }
  if (why_not != nullptr)
    *why_not = why + fmt::format(" (name one in {}, e.g. a virtual environment with pip's torch)",
                                 nn::kPeerPythonEnv);
  return nullptr;
}

std::vector<std::string> trainers() {
  std::vector<std::string> v = {"ours"};
  if (fsdp_python() != nullptr) v.push_back("pytorch_fsdp");
  return v;
}

// PyTorch FSDP (fully_shard per Linear) over `ranks` gloo processes, 64 rows each, the steps of
// ours; its repetitions timed inside one run of the peer script.
Trial fsdp_trial(int ranks) {
  Trial t;
  const std::size_t global = kRows * static_cast<std::size_t>(ranks);
  t.work.items = static_cast<double>(steps_for(global)) * static_cast<double>(global);
  auto pending = std::make_shared<std::vector<double>>();
  auto peak_rss = std::make_shared<double>(0);  // the peer's processes' largest VmHWM; 0: unknown
  t.measure = [=]() -> Sample {
    if (pending->empty()) {
      const nlohmann::json j = nn::run_torch_peer(
          fmt::format("--fsdp --ranks {} --batch {} --steps {} --warmup {} --repeat 6 --images {}",
                      ranks, kRows, steps_for(global), kWarmSteps, kImages),
          fsdp_python()->python);
      for (const auto& v : j.at("seconds")) pending->push_back(v.get<double>());
      *peak_rss = peer_peak_rss(j);
    }
    Sample s(pending->front());
    pending->erase(pending->begin());
    // What PyTorch holds by kind and sends is not counted from outside it: left out, not 0.
    // Each of its processes' peak resident memory is, where /proc says it.
    if (*peak_rss > 0) s.metrics["peak_rss_bytes"] = *peak_rss;
    return s;
  };
  t.notes["pytorch_fsdp"] = fmt::format(
      "PyTorch {} FSDP2 (fully_shard on each Linear and the model: ZeRO stage 3, gloo) in "
      "ranks processes of kernels/nn/scripts/torch_peer.py --fsdp, 1 thread each; its "
      "repetitions are timed in one run of the script, not interleaved; its memory by kind and "
      "its traffic are not measured and left out; peak_rss_bytes is the largest of its "
      "processes' VmHWM over the timed steps",
      fsdp_python()->version);
  return t;
}

Trial zero_trial(const Params& p, GroupCache& cache) {
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  if (p.count("trainer") != 0 && param_str(p, "trainer") == "pytorch_fsdp")
    return fsdp_trial(ranks);
  const int stage = static_cast<int>(param_int(p, "stage"));
  const bool overlap = p.count("overlap") != 0 && param_str(p, "overlap") == "on";
  nn::MlpSpec spec;
  try {
    spec = nn::MlpSpec::parse(param_str(p, "arch"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("parameter 'arch': {}", e.what()));
  }
  if (spec.widths.front() != 784 || spec.widths.back() != 10)
    throw UsageError(
        fmt::format("parameter 'arch': '{}' must start at 784 (the images) and end "
                    "at 10 (the classes)",
                    spec.describe()));
  Trial t;
  const std::size_t global = kRows * static_cast<std::size_t>(ranks);
  t.work.items = static_cast<double>(steps_for(global)) * static_cast<double>(global);
  auto data = images(cache);
  auto st = std::make_shared<ZeroState>();
  t.reset = [] { kernels::settle_runtime(kernels::ThreadRuntime::openblas); };
  t.measure = [=] { return measure_zero(*data, spec, ranks, stage, overlap, *st); };
  t.check = [st] { return check_zero(*st); };
  if (static_cast<unsigned>(ranks) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} rank threads on {} hardware threads", ranks, hardware_threads());
  if (std::string why; stage == 3 && fsdp_python(&why) == nullptr)
    t.notes["pytorch_fsdp"] = "not measured: " + why;
  return t;
}

// The MLP's parameter count Ψ.
std::size_t psi() {
  static const std::size_t n = nn::Mlp(nn::TrainConfig{}.spec, 1).parameters().size();
  return n;
}

// ZeRO's model of `what` ("state" or "sent") for each stage, drawn dashed beside its series.
std::vector<Model> stage_models(bool sent) {
  std::vector<Model> models;
  for (int stage = 0; stage <= 3; ++stage) {
    Model m{.label = fmt::format("stage {}", stage),
            .series = fmt::format("stage={}", stage),
            .y = [stage, sent](const ModelPoint& pt) -> std::optional<double> {
              const ZeroModel z = zero_model(psi(), static_cast<int>(pt.x), stage);
              return sent ? z.sent_per_step : z.total();
            }};
    if (stage == 0)
      m.note = [sent](const ModelPoint&) {
        return sent ? fmt::format(
                          "Ψ = {} floats; a ring sends (N-1)/N of each tensor it "
                          "reduce-scatters or all-gathers: 2 x 4Ψ bytes x (N-1)/N a step "
                          "(stages 0-2), 3 x (stage 3)",
                          psi())
                    : fmt::format(
                          "Ψ = {} floats, float32 parameters, gradients and SGD "
                          "momentum: 4Ψ + 4Ψ + 4Ψ bytes at stage 0; stage 1 divides "
                          "the momentum by N, stage 2 the gradients too, stage 3 all",
                          psi());
      };
    models.push_back(std::move(m));
  }
  return models;
}

std::vector<Figure> zero_figures() {
  return {{.id = "state_bytes",
           .title = "Model states per rank between steps; dashed: ZeRO's model",
           .x = "ranks",
           .y = "state_bytes",
           .series = "stage",
           .where = {{"trainer", "ours"}, {"overlap", "off"}, {"arch", kArch}},
           .y_label = "bytes per rank",
           .models = stage_models(false)},
          {.id = "sent_bytes",
           .title = "Bytes each rank sends per step; dashed: ZeRO's model",
           .x = "ranks",
           .y = "sent_bytes_per_step",
           .series = "stage",
           .where = {{"trainer", "ours"}, {"overlap", "off"}, {"arch", kArch}},
           .y_label = "bytes sent per rank per step",
           .models = stage_models(true)},
          {.id = "peak_bytes",
           .title = "The most a rank holds at once during a step",
           .x = "ranks",
           .y = "peak_bytes",
           .series = "stage",
           .where = {{"trainer", "ours"}, {"overlap", "off"}},
           .y_label = "bytes per rank at the peak"},
          {.id = "samples_per_s",
           .title = "Training samples/s, 64 rows per rank",
           .x = "ranks",
           .y = "items_per_s",
           .series = "stage",
           .where = {{"trainer", "ours"}, {"overlap", "off"}, {"arch", kArch}},
           .y_label = "training samples/s"}};
}

std::vector<Claim> zero_claims() {
  return {{.id = "stage3_quarter_memory",
           // Law, from ZeRO's accounting: every term is divided by N = 4; the blocks of layers
           // that do not divide by 4 add at most a float a layer (3 floats of 58787).
           .statement = "At 4 ranks, ZeRO stage 3 keeps a quarter of the model states per rank "
                        "that plain data parallelism keeps (stage 3's bytes over stage 0's)",
           .select = {{"trainer", "ours"},
                      {"stage", "3"},
                      {"ranks", "4"},
                      {"overlap", "off"},
                      {"arch", kArch}},
           .field = "state_bytes",
           .versus = {{"stage", "0"}},
           .compare = Claim::Compare::within,
           .bound = 0.25,
           .tolerance = 1e-4,
           .unit = "×",
           .timing = false},
          {.id = "stage2_traffic_unchanged",
           // Law: reduce-scatter + all-gather is the ring all-reduce's traffic (both halves);
           // the counts are exact, so the ratio is 1.
           .statement = "ZeRO stage 2 sends what plain data parallelism sends per step (its "
                        "bytes over stage 0's, at 4 ranks)",
           .select = {{"trainer", "ours"},
                      {"stage", "2"},
                      {"ranks", "4"},
                      {"overlap", "off"},
                      {"arch", kArch}},
           .field = "sent_bytes_per_step",
           .versus = {{"stage", "0"}},
           .compare = Claim::Compare::within,
           .bound = 1.0,
           .tolerance = 1e-4,
           .unit = "×",
           .timing = false},
          {.id = "stage3_traffic_half_again",
           // Law: a second all-gather of the parameters (before backward) on top of stage 2's
           // reduce-scatter and all-gather: 3/2, within the uneven blocks' floats.
           .statement = "ZeRO stage 3 sends 1.5 times plain data parallelism's bytes per step "
                        "(its bytes over stage 0's, at 4 ranks)",
           .select = {{"trainer", "ours"},
                      {"stage", "3"},
                      {"ranks", "4"},
                      {"overlap", "off"},
                      {"arch", kArch}},
           .field = "sent_bytes_per_step",
           .versus = {{"stage", "0"}},
           .compare = Claim::Compare::within,
           .bound = 1.5,
           .tolerance = 1e-3,
           .unit = "×",
           .timing = false},
          {.id = "stage3_samples_per_s",
           // Magnitude: what the extra gathers cost depends on the machine's cores and memory.
           .statement = "On 2 ranks, ZeRO stage 3's samples/s over plain data parallelism's "
                        "(the price of gathering each layer twice a step)",
           .select = {{"trainer", "ours"},
                      {"stage", "3"},
                      {"ranks", "2"},
                      {"overlap", "off"},
                      {"arch", kArch}},
           .field = "items_per_s",
           .versus = {{"stage", "0"}},
           .kind = Claim::Kind::magnitude,
           .causes = {ClaimCause::cores_and_smt, ClaimCause::memory_bandwidth},
           .unit = "×",
           .min_cpus = 2},
          {.id = "ahead_of_pytorch_fsdp",
           // Magnitude: against PyTorch's FSDP2 (its version in the record's notes), where an
           // interpreter with PyTorch 2.6 or later is named.
           .statement = "On 2 ranks with 64 rows each, how many times as many samples/s the "
                        "chapter's ZeRO stage 3 trains as PyTorch FSDP (fully_shard, gloo) on "
                        "the same model, batch and data",
           .select = {{"trainer", "ours"},
                      {"stage", "3"},
                      {"ranks", "2"},
                      {"overlap", "off"},
                      {"arch", kArch}},
           .field = "items_per_s",
           .versus = {{"trainer", "pytorch_fsdp"}},
           .kind = Claim::Kind::magnitude,
           .causes = {ClaimCause::peer_kernels},
           .unit = "×",
           .min_cpus = 2}};
}

Experiment zero_experiment() {
  return {
      .id = "ch05/zero",
      .chapter = "05-data-parallel",
      .title =
          "Sharded data parallelism (ZeRO stages 0-3, FSDP = 3): memory per rank, bytes "
          "sent per step and samples/s against ranks",
      .axes = {{.name = "trainer", .values = trainers()},
               {.name = "stage",
                .values = {"0", "1", "2", "3"},
                .kind = AxisKind::integer,
                .max = 3,
                .min = 0},
               ranks_axis({"1", "2", "4"}, {"2", "4"}),
               {.name = "overlap", .values = {"off", "on"}, .quick = {"off"}},
               {.name = "arch", .values = {kArch, kDeepArch}, .quick = {kArch}}},
      .baseline = {{"stage", "0"}},
      .metrics = kZeroMetrics,
      .scaling_axis = "ranks",
      .inapplicable = {{{{"ranks", "1"}}, {"overlap"}},
                       {{{"trainer", "pytorch_fsdp"}}, {"stage", "overlap", "arch"}}},
      .interleave = {"trainer", "stage", "overlap"},
      .prepare = zero_trial,
      .figures = zero_figures(),
      .claims = zero_claims(),
  };
}

const bool registered = [] {
  register_experiment(zero_experiment());
  return true;
}();

}  // namespace

}  // namespace concurdl::dp

// The timed half of exercise 5.3 (exercise_timings.hpp).
namespace concurdl::dp::exercise_timings {

Experiment zero2() {
  return exercise_timing(
      {.title = "ZeRO-2 steps, student vs zero_reduce_layer / zero_update_layer",
       .threads_axis = "",
       .axes = {train_trials::ranks_axis({"2"})},
       .metrics = kZeroMetrics,
       .prepare = [](Impl impl, const Params& p, GroupCache& cache) {
         const int ranks = static_cast<int>(param_int(p, "ranks"));
         Zero2Steps steps;
         if (impl == Impl::student)
           steps = {&student_zero_reduce_layer, &student_zero_update_layer};
         auto data = train_trials::images(cache);
         auto st = std::make_shared<ZeroState>();
         Trial t;
         const std::size_t global = kRows * static_cast<std::size_t>(ranks);
         t.work.items =
             static_cast<double>(train_trials::steps_for(global)) * static_cast<double>(global);
         t.reset = [] { kernels::settle_runtime(kernels::ThreadRuntime::openblas); };
         t.measure = [=] {
           return measure_zero(*data, nn::MlpSpec{}, ranks, 2, false, *st, steps);
         };
         t.check = [st] { return check_zero(*st); };
         return t;
       }});
}

}  // namespace concurdl::dp::exercise_timings
