// Chapter 05's mixed-precision experiments (precision.hpp, allreduce16.hpp):
//   ch05/precision           fp32, bf16 and fp16 data-parallel training (DataParallelTrainer) at
//                            1, 2 and 4 thread ranks of 64 rows (one rank's update fused into
//                            its weight-gradient GEMMs), on the chapter's MLP and, in the
//                            full profile, a wider one whose GEMMs dominate its step: samples/s
//                            and the bytes each rank sends per step (the communicator's count;
//                            float32 through the hand-written v4_ring, 16-bit through the 16-bit
//                            ring), beside PyTorch's plain loop under torch.autocast(bfloat16)
//                            where an interpreter with PyTorch is named. The trials of
//                            ch05/dp_train (train_trials.hpp). Afterwards the replicas must be
//                            identical and the loss must have gone down.
// ch05/precision_accuracy, the same precisions' test accuracy, registers in
// experiments_precision_accuracy.cpp; what the two share is in precision_trials.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/hardware.hpp"
#include "concurdl/core/memory.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/bf16.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/torch_peer.hpp"
#include "concurdl/nn/trainer.hpp"
#include "precision_trials.hpp"
#include "train_trials.hpp"

namespace concurdl::dp {

namespace {

using namespace precision_trials;
using namespace train_trials;

constexpr const char* kArch = "784-256-128-10";
// Wider: its GEMMs (64 x 1024 x 1024) are most of a step, where the chapter's MLP spends a
// large share of its step outside them.
constexpr const char* kWideArch = "784-1024-1024-10";

nn::MlpSpec arch_of(const Params& p) {
  nn::MlpSpec spec;
  try {
    spec = nn::MlpSpec::parse(param_str(p, "arch"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("parameter 'arch': {}", e.what()));
  }
  if (spec.widths.front() != 784 || spec.widths.back() != 10)
    throw UsageError(fmt::format(
        "parameter 'arch': '{}' must start at 784 (the images) and end at 10 (the classes)",
        spec.describe()));
  return spec;
}

// --- ch05/precision: speed and traffic ------------------------------------------------------

const std::vector<Metric> kSpeedMetrics = {
    {"sent_bytes_per_step", "B", false,
     "per rank per step: bytes sent (the communicator's count; 0 at 1 rank)"},
    {"sent_model_bytes_per_step", "B", false,
     "the ring's model: 2 (N-1)/N x Ψ values x 4 bytes (fp32) or 2 (bf16, fp16)"},
    {"skipped_steps", "", true, "steps skipped because the summed gradients were not finite"},
    {"step_compute_s", "s", true,
     "per step, rank 0: gathering the batch, forward and backward; at 1 rank also the update, "
     "fused into the weight-gradient GEMMs (ours only)",
     true},
    {"step_comm_s", "s", true,
     "per step, rank 0: the gradients' all-reduce after backward, with its wait for the other "
     "ranks (ours at 2 or more ranks)",
     true},
    {"step_update_s", "s", true,
     "per step, rank 0: the SGD update from the summed gradients (ours at 2 or more ranks; at 1 "
     "rank it is fused into the GEMMs and not timed apart)",
     true},
    {"step_median_s", "s", true,
     "per step, rank 0: the median of the timed steps' wall times (a step begins and ends "
     "together on every rank: it waits for the others in its exchange). The repetition's time "
     "also counts runs of slow steps (a rank's CPU taken for a while), which its median step "
     "does not (ours)",
     true},
    {"peak_rss_bytes", "B", false,
     "peak resident memory over the timed steps (VmHWM reset before them): ours, the one "
     "process whose threads are the ranks; PyTorch's, its process's (left out where /proc does "
     "not say)",
     true}};

struct SpeedState {
  double divergence = 0, first_loss = 0, last_loss = 0;
  std::atomic<int> unbound{0};  // ranks whose thread was to be bound to a CPU and was not
};

// Whether each rank's thread is bound to a CPU of its own: where every rank has one. Unbound,
// two ranks on this project's 2-vCPU guest shared a CPU now and then (the hypervisor's steal
// counter did not move): a 150-step repetition of the chapter's MLP at 2 ranks then held runs of
// 14-46 steps over twice the median step and took 10-30% longer than 150 median steps, and the
// ratio of FP16's samples/s to float32's swung 0.91-1.11 between runs. Bound, such runs were
// rarer, not gone (other work on the host): repetitions more than 10% longer than 150 median
// steps, 115 of 360 unbound (six runs), 22 of 240 bound (four runs of the same code).
bool bind_ranks(int ranks) { return static_cast<unsigned>(ranks) <= hardware_threads(); }

Sample measure_speed(const nn::Dataset& data, const nn::MlpSpec& spec, nn::Precision precision,
                     kernels::GemmVersion gemm, int ranks, bool sharded, SpeedState& st) {
  kernels::ComputeThreadsScope one(1);
  nn::TrainConfig config;
  config.spec = spec;
  config.gemm = gemm;
  config.batch = kRows;
  config.threads = 0;
  config.lr_decay = 1.0f;
  config.precision = precision;
  DataParallelOptions options;
  // float32 through the hand-written ring, so that its bytes are counted as the 16-bit ring's
  // are (the native all-reduce moves them inside the backend).
  if (precision == nn::Precision::fp32) options.algorithm = "v4_ring";
  // One rank, with nothing to sum, takes the fastest step it can, in every precision: the update
  // fused into the weight-gradient GEMMs, as nn::Trainer steps.
  options.fuse_update_alone = true;
  // At more ranks: every rank updates every parameter (replicated, as PyTorch DDP), or only
  // the block it holds summed between the ring's halves (sharded, ZeRO stage 1's step).
  options.shard_update = sharded;
  Sample s;
  const bool bind = bind_ranks(ranks);
  run_threads(ranks, [&](Communicator& comm) {
    std::optional<CpuBinding> cpu;
    if (bind && cpu.emplace(static_cast<unsigned>(comm.rank())).cpu() < 0) ++st.unbound;
    DataParallelTrainer t(comm, config, data, options);
    double first = 0, last = 0;
    for (int i = 0; i < kWarmSteps; ++i) {
      const auto r = t.step();
      first += r.loss_sum / static_cast<double>(r.rows ? r.rows : 1);
    }
    t.reset_times();
    const int steps = steps_for(t.global_batch());
    std::size_t skipped = 0;
    const bool rss_window = begin_resident_window(comm);  // these steps' peak alone
    const std::uint64_t sent0 = comm.bytes_sent();
    std::vector<double> step_s(static_cast<std::size_t>(steps));
    const auto t0 = std::chrono::steady_clock::now();
    auto step_start = t0;
    for (int i = 0; i < steps; ++i) {
      const auto r = t.step();
      const auto step_end = std::chrono::steady_clock::now();
      step_s[static_cast<std::size_t>(i)] =
          std::chrono::duration<double>(step_end - step_start).count();
      step_start = step_end;
      skipped += r.skipped ? 1 : 0;
      if (i >= steps - kWarmSteps) last += r.loss_sum / static_cast<double>(r.rows ? r.rows : 1);
    }
    comm.barrier();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::uint64_t sent = comm.bytes_sent() - sent0;
    t.gather_shards();  // sharded: the master weights and momentum whole again
    const double div = replica_divergence(comm, t.model().parameters());
    if (comm.rank() == 0) {
      const double psi = static_cast<double>(t.model().parameters().size());
      const double bytes = precision == nn::Precision::fp32 ? 4.0 : 2.0;
      s.value = secs;
      s.metrics["sent_bytes_per_step"] = static_cast<double>(sent) / steps;
      s.metrics["sent_model_bytes_per_step"] = 2.0 * (ranks - 1) / ranks * psi * bytes;
      s.metrics["skipped_steps"] = static_cast<double>(skipped);
      const StepTimes& tm = t.times();
      const double n = static_cast<double>(tm.steps);
      s.metrics["step_compute_s"] = tm.compute_s / n;
      std::nth_element(step_s.begin(), step_s.begin() + steps / 2, step_s.end());
      s.metrics["step_median_s"] = step_s[static_cast<std::size_t>(steps / 2)];
      if (ranks > 1) {
        s.metrics["step_comm_s"] = tm.wait_s / n;
        s.metrics["step_update_s"] = tm.update_s / n;
      }
      end_resident_window(rss_window, s);
      st.divergence = div;
      st.first_loss = first / kWarmSteps;
      st.last_loss = last / kWarmSteps;
    }
  });
  return s;
}

// The interpreter that runs the autocast peer: of those named with PyTorch (CPU autocast to
// bfloat16 is in every PyTorch the suite meets, 1.10 and later), the newest; nullptr, with why,
// if none has it.
const nn::TorchPython* autocast_python(std::string* why_not = nullptr) {
  std::string why;
  const nn::TorchPython* best = nullptr;
  const auto version = [](const std::string& v) {
    const std::size_t dot = v.find('.');
    return std::atoi(v.c_str()) * 1000 +
           (dot == std::string::npos ? 0 : std::atoi(v.c_str() + dot + 1));
  };
  for (const nn::TorchPython& t : nn::torch_pythons()) {
    if (!t.why_not.empty()) {
      why += (why.empty() ? "" : "; ") + t.why_not;
      continue;
    }
    if (best == nullptr || version(t.version) > version(best->version)) best = &t;
  }
  if (best == nullptr && why_not != nullptr)
    *why_not = why + fmt::format(" (name one in {})", nn::kPeerPythonEnv);
  return best;
}

std::vector<std::string> trainers() {
  std::vector<std::string> v = {"ours"};
  if (autocast_python() != nullptr) v.push_back("pytorch_autocast");
  return v;
}

// PyTorch's plain loop under torch.autocast("cpu", dtype=torch.bfloat16), 1 compute thread,
// 64 rows, the steps of ours at 1 rank; its repetitions timed inside one run of the script.
Trial autocast_trial(const std::string& arch) {
  Trial t;
  t.work.items = static_cast<double>(steps_for(kRows)) * static_cast<double>(kRows);
  auto pending = std::make_shared<std::vector<double>>();
  auto peak_rss = std::make_shared<double>(0);  // its process's VmHWM; 0: unknown
  t.measure = [=]() -> Sample {
    if (pending->empty()) {
      const nlohmann::json j = nn::run_torch_peer(
          fmt::format("--plain --autocast --threads 1 --arch {} --batch {} --steps {} --warmup {} "
                      "--repeat 6 --images {}",
                      arch, kRows, steps_for(kRows), kWarmSteps, kImages),
          autocast_python()->python);
      for (const auto& v : j.at("seconds")) pending->push_back(v.get<double>());
      *peak_rss = peer_peak_rss(j);
    }
    Sample s(pending->front());
    pending->erase(pending->begin());
    // One process: nothing sent and no loss scale to skip a step (true zeros, as ours at 1 rank).
    s.metrics["sent_bytes_per_step"] = 0;
    s.metrics["sent_model_bytes_per_step"] = 0;
    s.metrics["skipped_steps"] = 0;
    if (*peak_rss > 0) s.metrics["peak_rss_bytes"] = *peak_rss;
    return s;
  };
  t.notes["pytorch_autocast"] = fmt::format(
      "PyTorch {} ({}), plain loop under torch.autocast('cpu', dtype=torch.bfloat16) "
      "(kernels/nn/scripts/torch_peer.py --plain --autocast), 1 thread, float32 weights and "
      "SGD; its repetitions are timed in one run of the script, not interleaved",
      autocast_python()->version, autocast_python()->python);
  return t;
}

Trial speed_trial(const Params& p, GroupCache& cache) {
  const std::string arch = param_str(p, "arch");
  if (p.count("trainer") != 0 && param_str(p, "trainer") == "pytorch_autocast")
    return autocast_trial(arch_of(p).describe());
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const nn::Precision precision = precision_of(p);
  const nn::MlpSpec spec = arch_of(p);
  kernels::GemmVersion gemm{};
  if (!kernels::parse_gemm_version(param_str(p, "gemm"), gemm))
    throw UsageError(
        fmt::format("parameter 'gemm': '{}' is not a GEMM (want openblas or "
                    "v4_register)",
                    param_str(p, "gemm")));
  Trial t;
  const std::size_t global = kRows * static_cast<std::size_t>(ranks);
  t.work.items = static_cast<double>(steps_for(global)) * static_cast<double>(global);
  auto data = images(cache);
  auto st = std::make_shared<SpeedState>();
  t.reset = [] { kernels::settle_runtime(kernels::ThreadRuntime::openblas); };
  const bool sharded = p.count("update") != 0 && param_str(p, "update") == "sharded";
  t.measure = [=] { return measure_speed(*data, spec, precision, gemm, ranks, sharded, *st); };
  t.check = [st]() -> std::string {
    if (const int n = st->unbound.load(); n > 0)
      return fmt::format("{} rank thread(s) could not be bound to a CPU of their own", n);
    if (st->divergence != 0)
      return fmt::format("the replicas' parameters differ (divergence {})", st->divergence);
    if (!std::isfinite(st->last_loss) || !(st->last_loss < st->first_loss))
      return fmt::format("the loss did not go down: {:.3f} in the first steps, {:.3f} in the last",
                         st->first_loss, st->last_loss);
    return "";
  };
  t.notes["precision_compute"] = nn::precision_compute(precision);
  if (!bind_ranks(ranks))
    t.notes["oversubscribed"] =
        fmt::format("{} rank threads on {} hardware threads", ranks, hardware_threads());
  else
    t.notes["cpu_binding"] =
        "each rank's thread bound to a CPU of its own (the rank-th of this process's affinity "
        "mask), as Open MPI's --bind-to binds a rank";
  if (std::string why; precision == nn::Precision::bf16 && autocast_python(&why) == nullptr)
    t.notes["pytorch_autocast"] = "not measured: " + why;
  return t;
}

std::vector<Figure> precision_figures() {
  // At 1 rank the update is fused, whichever the figure names (the axis means nothing there).
  return {{.id = "samples_per_s",
           .title = "Training samples/s, 64 rows per rank, 784-256-128-10, GEMM v4, update "
                    "replicated",
           .x = "ranks",
           .y = "items_per_s",
           .series = "precision",
           .where = {{"trainer", "ours"},
                     {"arch", kArch},
                     {"gemm", "v4_register"},
                     {"update", "replicated"}},
           .y_label = "training samples/s"},
          {.id = "samples_per_s_wide",
           .title = "Training samples/s, 64 rows per rank, 784-1024-1024-10, GEMM v4, update "
                    "replicated",
           .x = "ranks",
           .y = "items_per_s",
           .series = "precision",
           .where = {{"trainer", "ours"},
                     {"arch", kWideArch},
                     {"gemm", "v4_register"},
                     {"update", "replicated"}},
           .y_label = "training samples/s"},
          {.id = "samples_per_s_wide_sharded",
           .title = "Training samples/s, 64 rows per rank, 784-1024-1024-10, GEMM v4, update "
                    "sharded",
           .x = "ranks",
           .y = "items_per_s",
           .series = "precision",
           .where = {{"trainer", "ours"},
                     {"arch", kWideArch},
                     {"gemm", "v4_register"},
                     {"update", "sharded"}},
           .y_label = "training samples/s"},
          {.id = "sent_bytes",
           .title = "Bytes each rank sends per step (784-256-128-10)",
           .x = "ranks",
           .y = "sent_bytes_per_step",
           .series = "precision",
           .where = {{"trainer", "ours"},
                     {"arch", kArch},
                     {"gemm", "v4_register"},
                     {"update", "replicated"}},
           .y_label = "bytes sent per rank per step"}};
}

std::vector<Claim> precision_claims() {
  return {{.id = "bf16_halves_the_allreduce",
           // Law: the same ring, 2 bytes a value on the wire instead of 4 (the blocks are cut on
           // pairs of values; only an odd total pads one value). The sharded update sends the
           // same: the ring's reduce-scatter, then the all-gather of the parameters' 16-bit copy.
           .statement = "At 2 ranks, the bfloat16 gradients' all-reduce sends half the bytes per "
                        "step of the float32 one (bf16's bytes over fp32's)",
           .select = {{"trainer", "ours"},
                      {"gemm", "v4_register"},
                      {"precision", "bf16"},
                      {"ranks", "2"},
                      {"arch", kArch}},
           .field = "sent_bytes_per_step",
           .versus = {{"precision", "fp32"}},
           .compare = Claim::Compare::within,
           .bound = 0.5,
           .tolerance = 1e-4,
           .unit = "×",
           .timing = false},
          {.id = "bf16_speed_wide",
           // Magnitude: VDPBF16PS's flops over the FMA's, against the update's float32 state
           // and the passes over memory the 16-bit step adds (the gradients' rounding, check and
           // widening).
           .statement = "On the wider MLP (784-1024-1024-10) at 1 rank, bfloat16 training's "
                        "samples/s over float32's on GEMM v4",
           .select = {{"trainer", "ours"},
                      {"gemm", "v4_register"},
                      {"precision", "bf16"},
                      {"ranks", "1"},
                      {"arch", kWideArch}},
           .field = "items_per_s",
           .versus = {{"precision", "fp32"}},
           .kind = Claim::Kind::magnitude,
           .causes = {ClaimCause::vector_isa, ClaimCause::memory_bandwidth},
           .unit = "×",
           .cpu_feature = "avx512_bf16"},
          {.id = "bf16_speed",
           // Magnitude: on the chapter's MLP the conversions and the element-wise work are a
           // large share of the step, and the GEMMs are small.
           .statement = "On the chapter's MLP at 1 rank, bfloat16 training's samples/s over "
                        "float32's on GEMM v4",
           .select = {{"trainer", "ours"},
                      {"gemm", "v4_register"},
                      {"precision", "bf16"},
                      {"ranks", "1"},
                      {"arch", kArch}},
           .field = "items_per_s",
           .versus = {{"precision", "fp32"}},
           .kind = Claim::Kind::magnitude,
           .causes = {ClaimCause::vector_isa, ClaimCause::memory_bandwidth},
           .unit = "×",
           .cpu_feature = "avx512_bf16"},
          {.id = "ahead_of_pytorch_autocast",
           // Magnitude: against PyTorch's autocast (its version in the record's notes).
           .statement = "At 1 rank of 64 rows, 1 thread, how many times as many samples/s the "
                        "chapter's bfloat16 training runs as PyTorch's loop under "
                        "torch.autocast(bfloat16) on the same model",
           .select = {{"trainer", "ours"},
                      {"gemm", "v4_register"},
                      {"precision", "bf16"},
                      {"ranks", "1"},
                      {"arch", kArch}},
           .field = "items_per_s",
           .versus = {{"trainer", "pytorch_autocast"}},
           .kind = Claim::Kind::magnitude,
           .causes = {ClaimCause::peer_kernels},
           .unit = "×"}};
}

Experiment precision_experiment() {
  return {
      .id = "ch05/precision",
      .chapter = "05-data-parallel",
      .title =
          "Mixed-precision data parallelism (fp32, bf16, fp16): samples/s and bytes sent "
          "per step against ranks",
      .axes = {{.name = "trainer", .values = trainers()},
               precision_axis(),
               ranks_axis({"1", "2", "4"}, {"1", "2"}),
               {.name = "arch", .values = {kArch, kWideArch}, .quick = {kArch}},
               // float32's GEMM, and FP16's once widened: the suite's own v4 (the lessons'
               // comparison: each precision on the suite's kernels) and OpenBLAS. bfloat16 runs
               // VDPBF16PS (gemm_bf16) whichever is named, where the CPU has it.
               {.name = "gemm", .values = {"v4_register", "openblas"}, .quick = {"v4_register"}},
               // At 2 or more ranks: the update replicated on every rank, or sharded (each rank
               // its block, then an all-gather); at 1 rank it is fused and the axis means nothing.
               {.name = "update", .values = {"replicated", "sharded"}, .quick = {"replicated"}}},
      .baseline = {{"precision", "fp32"}},
      .metrics = kSpeedMetrics,
      .scaling_axis = "ranks",
      .inapplicable = {{{{"trainer", "pytorch_autocast"}},
                        {"precision", "ranks", "gemm", "update"}},
                       {{{"ranks", "1"}}, {"update"}}},
      .interleave = {"trainer", "precision"},
      .prepare = speed_trial,
      .figures = precision_figures(),
      .claims = precision_claims(),
  };
}

const bool registered = [] {
  register_experiment(precision_experiment());
  return true;
}();

}  // namespace

namespace precision_trials {

nn::Precision precision_of(const Params& p) {
  try {
    return nn::parse_precision(param_str(p, "precision"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("parameter 'precision': {}", e.what()));
  }
}

Axis precision_axis() { return {.name = "precision", .values = {"fp32", "bf16", "fp16"}}; }

}  // namespace precision_trials

}  // namespace concurdl::dp
