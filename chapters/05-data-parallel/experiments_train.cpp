// Chapter 05's data-parallel training experiments (data_parallel.hpp), on the threads backend:
//   ch05/dp_train    samples/s against ranks (1, 2, 4; 4 oversubscribes a 2-core machine),
//                    weak scaling (64 rows per rank) and strong scaling (256 rows in all),
//                    all-reduce overlapped with backward or not, and PyTorch DDP (gloo) on the
//                    same MLP, batch and data as a peer row where /usr/bin/python3 has torch;
//                    with the step-time breakdown (compute, exposed communication, all-reduce
//                    busy time, the fraction of it hidden) as named metrics
//                    and, drawn as models beside the weak-scaling points, the samples/s that
//                    the 1-rank step plus a ring all-reduce of the gradient on two links
//                    (cost_model.hpp) would give out to 1024 workers (train_projection.cpp)
//   ch05/dp_buckets  step time against the bucket size at 2 and 4 ranks, overlap on and off
//   exercise 5.2     the student's bucketed, overlapped all-reduce against OverlapSync
// Every trial trains on kSamples samples in all (steps_for(): 300 steps of 64 rows at 1 rank,
// 150 of 2 x 64 at 2 ranks, 75 of 256 rows; 0.2-0.5 s a repetition on 2 cores, long enough to
// be stable, where 30 steps of ~1 ms were not) from the same initial model on the first 6400
// Fashion-MNIST images (3 untimed steps first), then checks that the replicas are identical and
// that the loss went down. The quick profile keeps dp_train to 1 and 2 ranks (PyTorch DDP at 4
// ranks cost 17-20 s a configuration, and the lesson's comparison is at 2) and dp_buckets to
// 2 ranks; the full profile runs 4 ranks as well.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/memory.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/torch_peer.hpp"
#include "exercises/student_bucket.hpp"
#include "train_projection.hpp"
#include "train_trials.hpp"

namespace concurdl::dp {

namespace {

using namespace train_trials;
using nn::torch_why_not;
using train_projection::kWeakRows;
using train_projection::projection_models;

std::size_t per_rank_batch(const Params& p) {
  const auto ranks = static_cast<std::size_t>(param_int(p, "ranks"));
  if (p.count("scaling") == 0 || param_str(p, "scaling") == "weak") return kWeakRows;
  if (param_str(p, "scaling") != "strong")
    throw UsageError(
        fmt::format("parameter 'scaling': '{}' is not weak or strong", param_str(p, "scaling")));
  if (256 % ranks != 0 || ranks > 256)
    throw UsageError(
        fmt::format("strong scaling splits 256 rows: ranks={} does not divide it", ranks));
  return 256 / ranks;
}

// Optional: PyTorch's rows leave out what is not measured inside DDP (the breakdown), and a
// row whose processes' /proc does not say leaves out its resident memory.
const std::vector<Metric> kStepMetrics = {
    {"step_compute_s", "s", true, "per step: gathering the batch, forward and backward", true},
    {"step_comm_s", "s", true,
     "per step: communication left exposed after backward (waiting for the all-reduce)", true},
    {"step_allreduce_s", "s", true, "per step: time inside the all-reduce calls (busy time)", true},
    {"overlap_hidden", "", false,
     "fraction of the all-reduce time hidden behind backward: 1 - exposed / busy (0 without "
     "overlap or without communication)",
     true},
    {"peak_rss_bytes", "B", false,
     "peak resident memory over the timed steps (VmHWM reset before them): ours, the one "
     "process whose threads are the ranks; PyTorch's, the largest of its processes'",
     true}};

struct RunState {
  double divergence = 0, first_loss = 0, last_loss = 0;
};

// `steps` timed steps on `ranks` thread ranks; the sample is their wall time (rank 0's clock,
// between two barriers) with rank 0's breakdown per step.
Sample measure_ours(const nn::Dataset& data, int ranks, std::size_t batch,
                    const DataParallelOptions& opt, RunState& st) {
  kernels::ComputeThreadsScope one(1);
  nn::TrainConfig config;
  config.batch = batch;
  config.threads = 0;
  config.lr_decay = 1.0f;
  Sample s;
  run_threads(ranks, [&](Communicator& comm) {
    DataParallelTrainer t(comm, config, data, opt);
    double first = 0, last = 0;
    for (int i = 0; i < kWarmSteps; ++i) {
      const auto r = t.step();
      first += r.loss_sum / static_cast<double>(r.rows ? r.rows : 1);
    }
    t.reset_times();
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
    const double div = replica_divergence(comm, t.model().parameters());
    if (comm.rank() == 0) {
      const StepTimes& tm = t.times();
      const double n = static_cast<double>(tm.steps);
      s.value = secs;
      s.metrics["step_compute_s"] = tm.compute_s / n;
      s.metrics["step_comm_s"] = tm.wait_s / n;
      s.metrics["step_allreduce_s"] = tm.reduce_s / n;
      s.metrics["overlap_hidden"] =
          tm.reduce_s > 0 ? std::max(0.0, 1.0 - tm.wait_s / tm.reduce_s) : 0.0;
      end_resident_window(rss_window, s);
      st.divergence = div;
      st.first_loss = first / kWarmSteps;
      st.last_loss = last / kWarmSteps;
    }
  });
  return s;
}

std::string check_run(const RunState& st) {
  if (st.divergence != 0)
    return fmt::format("the replicas differ after the steps (divergence {})", st.divergence);
  if (!std::isfinite(st.last_loss) || !(st.last_loss < st.first_loss))
    return fmt::format("the loss did not go down: {:.3f} in the first steps, {:.3f} in the last",
                       st.first_loss, st.last_loss);
  return "";
}

// Runs the PyTorch DDP peer; the JSON line it prints, or throws with its reason.
nlohmann::json run_peer(int ranks, std::size_t batch, int repeat) {
  return nn::run_torch_peer(fmt::format(
      "--ranks {} --batch {} --steps {} --warmup {} --repeat {} --images {}", ranks, batch,
      steps_for(batch * static_cast<std::size_t>(ranks)), kWarmSteps, repeat, kImages));
}

Trial dp_trial(const Params& p, GroupCache& cache) {
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const std::size_t batch = per_rank_batch(p);
  const std::string trainer = param_str(p, "trainer");
  Trial t;
  const auto global = batch * static_cast<std::size_t>(ranks);
  t.work.items = static_cast<double>(steps_for(global)) * static_cast<double>(global);
  if (trainer == "pytorch_ddp") {
    // Its repetitions are timed inside one PyTorch run (starting one costs seconds), so they
    // are not interleaved with ours; the samples come back one per call.
    auto pending = std::make_shared<std::vector<double>>();
    auto version = std::make_shared<std::string>();
    auto peak_rss = std::make_shared<double>(0);  // its processes' largest VmHWM; 0: unknown
    t.measure = [=]() -> Sample {
      if (pending->empty()) {
        const nlohmann::json j = run_peer(ranks, batch, 6);
        for (const auto& v : j.at("seconds")) pending->push_back(v.get<double>());
        *version = j.value("torch", "");
        *peak_rss = peer_peak_rss(j);
      }
      Sample s(pending->front());
      pending->erase(pending->begin());
      // The breakdown is not measured inside DDP: left out, not 0.
      if (*peak_rss > 0) s.metrics["peak_rss_bytes"] = *peak_rss;
      return s;
    };
    t.notes["pytorch_ddp"] =
        "PyTorch DDP (gloo, bucket_cap_mb 25, overlap built in) in ranks processes of "
        "kernels/nn/scripts/torch_peer.py, 1 thread each; its repetitions are timed in one run of "
        "the script, not interleaved; the breakdown metrics are not measured and left out; "
        "peak_rss_bytes is the largest of its processes' VmHWM over the timed steps";
    return t;
  }
  DataParallelOptions opt;
  opt.overlap = p.count("overlap") != 0 && param_str(p, "overlap") == "on";
  opt.bucket_bytes = p.count("bucket_kb")
                         ? static_cast<std::size_t>(param_int(p, "bucket_kb")) << 10
                         : kDefaultBucketBytes;
  auto data = images(cache);
  auto st = std::make_shared<RunState>();
  t.reset = [] { kernels::settle_runtime(kernels::ThreadRuntime::openblas); };
  t.measure = [=] { return measure_ours(*data, ranks, batch, opt, *st); };
  t.check = [st] { return check_run(*st); };
  if (static_cast<unsigned>(ranks) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} rank threads on {} hardware threads", ranks, hardware_threads());
  if (ranks == 1 && !torch_why_not().empty())
    t.notes["pytorch_ddp"] = "not measured: " + torch_why_not();
  return t;
}

std::vector<std::string> trainers() {
  std::vector<std::string> v = {"ours"};
  if (torch_why_not().empty()) v.push_back("pytorch_ddp");
  return v;
}

std::vector<Figure> dp_train_figures() {
  return {{.id = "samples_per_s",
           .title = "Training samples/s against ranks (more ranks than CPUs oversubscribe them)",
           .x = "ranks",
           .y = "items_per_s",
           .series = "trainer",
           .y_label = "training samples/s"},
          {.id = "speedup_weak",
           .title = "Weak scaling (64 rows per rank): speedup in samples/s over 1 rank",
           .kind = FigureKind::speedup,
           .x = "ranks",
           .series = "trainer",
           .where = {{"scaling", "weak"}}},
          {.id = "speedup_strong",
           .title = "Strong scaling (256 rows in all): speedup over 1 rank",
           .kind = FigureKind::speedup,
           .x = "ranks",
           .series = "trainer",
           .where = {{"scaling", "strong"}}},
          {.id = "projection",
           .title = "Weak scaling (64 rows per rank): measured, and ring all-reduce "
                    "models to 1024 workers",
           .x = "ranks",
           .y = "items_per_s",
           .series = "trainer",
           .where = {{"trainer", "ours"}, {"scaling", "weak"}},
           .log_x = true,
           .log_y = true,
           .y_label = "training samples/s (log)",
           .x_label = "workers (log; past the measured ones: model only)",
           .models = projection_models()},
          {.id = "breakdown_compute",
           .title = "Per step: compute (forward + backward)",
           .x = "ranks",
           .y = "step_compute_s",
           .series = "overlap",
           .where = {{"trainer", "ours"}}},
          {.id = "breakdown_comm",
           .title = "Per step: communication left exposed after backward",
           .x = "ranks",
           .y = "step_comm_s",
           .series = "overlap",
           .where = {{"trainer", "ours"}}}};
}

std::vector<Claim> dp_train_claims() {
  return {
      {.id = "weak_scaling_two_ranks",
       // Magnitude: a scaling ratio on vCPUs (1.19-1.25x on the Emerald Rapids
       // guest, 1.6-1.69x on Zen 5): each rank's GEMMs get what their core and the memory
       // give.
       .statement = "How many more samples/s data-parallel SGD with 64 rows per rank trains on 2 "
                    "ranks than on 1 (weak scaling, threads backend)",
       .select = {{"trainer", "ours"}, {"scaling", "weak"}, {"ranks", "2"}, {"overlap", "off"}},
       .field = "speedup",
       .kind = Claim::Kind::magnitude,
       .causes = {ClaimCause::cores_and_smt, ClaimCause::memory_bandwidth},
       .unit = "×",
       .min_cpus = 2},
      {.id = "ahead_of_pytorch_ddp",
       // Magnitude: against PyTorch DDP (its version in the record's notes).
       .statement = "On 2 ranks with 64 rows each, how many times as many samples/s the chapter's "
                    "data-parallel SGD trains as PyTorch DDP (gloo) on the same model, batch and "
                    "data (where the peer's Python has torch)",
       .select = {{"trainer", "ours"}, {"scaling", "weak"}, {"ranks", "2"}, {"overlap", "off"}},
       .field = "items_per_s",
       .versus = {{"trainer", "pytorch_ddp"}},
       .kind = Claim::Kind::magnitude,
       .causes = {ClaimCause::peer_kernels},
       .unit = "×",
       .min_cpus = 2}};
}

Experiment dp_train_experiment() {
  return {
      .id = "ch05/dp_train",
      .chapter = "05-data-parallel",
      .title =
          "Data-parallel SGD on the threads backend: samples/s against ranks, weak and "
          "strong scaling, overlap on and off, PyTorch DDP as a peer",
      .axes = {{.name = "trainer", .values = trainers()},
               {.name = "scaling", .values = {"weak", "strong"}},
               ranks_axis({"1", "2", "4"}, {"1", "2"}),
               {.name = "overlap", .values = {"off", "on"}}},
      .baseline = {{"ranks", "1"}},
      .metrics = kStepMetrics,
      .scaling_axis = "ranks",
      .inapplicable = {{{{"trainer", "pytorch_ddp"}}, {"overlap"}},
                       {{{"ranks", "1"}}, {"overlap"}}},
      .interleave = {"trainer", "ranks", "overlap"},
      .prepare = dp_trial,
      .figures = dp_train_figures(),
      .claims = dp_train_claims(),
  };
}

Experiment dp_buckets_experiment() {
  return {
      .id = "ch05/dp_buckets",
      .chapter = "05-data-parallel",
      .title =
          "Data-parallel SGD: time of 19200 samples against the gradient bucket size (784-256-"
          "128-10: 0 KiB = 3 buckets, 64-128 KiB = 2, 1024 KiB = 1)",
      .axes = {ranks_axis({"2", "4"}, {"2"}),
               {.name = "overlap", .values = {"off", "on"}},
               {.name = "bucket_kb",
                .values = {"0", "64", "128", "1024"},
                .kind = AxisKind::integer,
                .max = 1 << 20,
                .min = 0}},
      .metrics = kStepMetrics,
      .scaling_axis = "ranks",
      .interleave = {"overlap", "bucket_kb"},
      .prepare =
          [](const Params& p, GroupCache& cache) {
            Params q = p;
            q["trainer"] = "ours";
            q["scaling"] = "weak";
            return dp_trial(q, cache);
          },
      .figures = {{.id = "step_time",
                   .title = "Time of 19200 samples against the bucket size (64 rows per rank)",
                   .x = "bucket_kb",
                   .y = "median",
                   .series = "overlap"},
                  {.id = "exposed_comm",
                   .title = "Exposed communication per step against the bucket size",
                   .x = "bucket_kb",
                   .y = "step_comm_s",
                   .series = "overlap"}},
  };
}

const bool registered = [] {
  register_experiment(dp_train_experiment());
  register_experiment(dp_buckets_experiment());
  return true;
}();

}  // namespace

namespace train_trials {

int steps_for(std::size_t global_batch) {
  return static_cast<int>(std::max<std::size_t>(2 * kWarmSteps, kSamples / global_batch));
}

bool begin_resident_window(Communicator& comm) {
  comm.barrier();
  bool reset = false;
  if (comm.rank() == 0) reset = reset_resident_peak();
  comm.barrier();
  return reset;
}

void end_resident_window(bool began, Sample& s) {
  if (const auto rss = resident_memory(); rss && began)
    s.metrics["peak_rss_bytes"] = static_cast<double>(rss->hwm_bytes);
}

double peer_peak_rss(const nlohmann::json& report) {
  double most = 0;
  if (const auto it = report.find("peak_rss_bytes"); it != report.end()) {
    if (it->is_array())
      for (const auto& v : *it) most = std::max(most, v.get<double>());
    else if (it->is_number())
      most = it->get<double>();
  }
  return most;
}

std::shared_ptr<const nn::Dataset> images(GroupCache& cache) {
  return cache.get<std::shared_ptr<const nn::Dataset>>("fashion-mnist:6400", [] {
    const data::FashionMnist fm = data::load_fashion_mnist();
    return std::make_shared<const nn::Dataset>(nn::to_dataset(fm.train, kImages));
  });
}

Axis ranks_axis(std::vector<std::string> values, std::vector<std::string> quick) {
  return {.name = "ranks",
          .values = std::move(values),
          .quick = std::move(quick),
          .kind = AxisKind::count,
          .max = kMaxRanks};
}

}  // namespace train_trials

}  // namespace concurdl::dp

// The timed halves of exercises built here (exercise_timings.hpp).
namespace concurdl::dp::exercise_timings {

using namespace train_trials;

Experiment bucketed() {
  return exercise_timing(
      {.title = "bucketed overlapped all-reduce, student vs OverlapSync",
       .threads_axis = "",
       .axes = {ranks_axis({"2"}),
                {.name = "bucket_kb",
                 .values = {"0"},
                 .kind = AxisKind::integer,
                 .max = 1 << 20,
                 .min = 0}},
       .metrics = kStepMetrics,
       .prepare = [](Impl impl, const Params& p, GroupCache& cache) {
         const int ranks = static_cast<int>(param_int(p, "ranks"));
         DataParallelOptions opt;
         opt.overlap = true;
         opt.bucket_bytes = static_cast<std::size_t>(param_int(p, "bucket_kb")) << 10;
         if (impl == Impl::student)
           opt.make_sync = [](Communicator& c, std::span<float> g, std::vector<std::size_t> off,
                              std::size_t bytes, AllReduceFn f,
                              AlgoOptions o) -> std::unique_ptr<GradientSync> {
             return std::make_unique<StudentBucketSync>(c, g, std::move(off), bytes, f, o);
           };
         auto data = images(cache);
         auto st = std::make_shared<RunState>();
         Trial t;
         t.work.items =
             static_cast<double>(steps_for(64 * static_cast<std::size_t>(ranks))) * 64.0 * ranks;
         t.reset = [] { kernels::settle_runtime(kernels::ThreadRuntime::openblas); };
         t.measure = [=] { return measure_ours(*data, ranks, 64, opt, *st); };
         t.check = [st] { return check_run(*st); };
         return t;
       }});
}

}  // namespace concurdl::dp::exercise_timings
