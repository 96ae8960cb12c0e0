// Data loaders against slow storage: what overlapping I/O with compute buys.
// A synthetic data set (Fashion-MNIST-sized records: 784 bytes of pixels plus a 16-byte
// header) is read through a Throttle that gives every record read `latency_us` of simulated
// device latency, so that the page cache cannot hide the I/O. Each batch is then "trained on":
// a spin of a fixed time, set to compute_ratio x the measured I/O time per batch.
//   concurdl run ch03/loader_epoch          epoch time per loader vs compute/io, beside the models
//                                           io + compute (no overlap) and max(io, compute)
//   concurdl run ch03/overlap_efficiency    (io + compute - epoch) / min(io, compute): 0 = no
//                                           overlap, 1 = perfect
//   concurdl run ch03/loader_workers        samples/s vs workers (reads in flight for uring)
//   concurdl exercise ch03                  exercises 3.1 and 3.3 are timed here
// The model rows of ch03/loader_epoch (loader = model_no_overlap, model_perfect_overlap) are
// measured, not assumed: each repetition times an epoch of the sync loader without compute
// (io) and the compute alone, and reports io + compute, or max(io, compute).
// Every run checks that every sample of the epoch arrived exactly once (the decode step checks
// each record's id and CRC too).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "concurdl/async_io/file.hpp"
#include "concurdl/async_io/loaders.hpp"
#include "concurdl/async_io/throttle.hpp"
#include "concurdl/async_io/uring.hpp"
#include "concurdl/data/synthetic.hpp"
#include "concurdl/harness/errors.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "exercises/student_prefetch.hpp"
#include "exercises/student_reorder.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::async_io;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One group's data set and store, shared by the loaders measured together.
struct Setup {
  std::shared_ptr<TempDir> dir;
  data::SyntheticSpec spec;
  std::shared_ptr<RecordStore> store;
  LoaderOptions opt;
  std::size_t batches = 0;
  double io_epoch = 0;  // the sync loader's epoch without compute: the serial I/O time
};

// Per-run tally: every sample exactly once, checked after the run.
struct Tally {
  std::vector<std::uint8_t> hits;
  std::uint64_t sum = 0;
  std::size_t batches = 0;
  void clear() {
    std::fill(hits.begin(), hits.end(), 0);
    sum = 0;
    batches = 0;
  }
  std::string check(std::size_t expected_batches) const {
    const std::uint64_t n = hits.size();
    std::size_t lost = 0, repeated = 0;
    for (std::uint8_t h : hits) {
      lost += h == 0;
      repeated += h > 1;
    }
    if (lost + repeated > 0 || batches != expected_batches || sum != n * (n - 1) / 2)
      return fmt::format("of {} samples {} never arrived and {} arrived more than once; {} of {} "
                         "batches",
                         n, lost, repeated, batches, expected_batches);
    return "";
  }
};

// One epoch: take every batch, count its samples, spin `compute` seconds per batch.
void run_epoch(Loader& loader, std::uint64_t epoch, double compute, Tally& t) {
  loader.start_epoch(epoch);
  while (std::optional<Batch> b = loader.next_batch()) {
    for (std::uint64_t id : b->ids) {
      if (id < t.hits.size() && t.hits[id] < 255) ++t.hits[id];
      t.sum += id;
    }
    ++t.batches;
    spin_for(compute);
  }
}

LoaderOptions base_options(const Params& p) {
  LoaderOptions opt;
  opt.batch_size = static_cast<std::size_t>(param_int(p, "batch"));
  opt.workers = static_cast<unsigned>(param_int(p, "workers"));
  opt.prefetch = 2;  // double buffering
  opt.seed = 1234;
  return opt;
}

Setup& setup_for(const Params& p, GroupCache& cache) {
  return cache.get<Setup>("setup", [&] {
    Setup s;
    s.spec.records = static_cast<std::uint64_t>(param_int(p, "records"));
    s.spec.payload_bytes = 784;
    s.spec.seed = 42;
    const double latency = param_real(p, "latency_us") * 1e-6;
    if (latency < 0) throw UsageError("parameter 'latency_us' must be >= 0");
    s.dir = std::make_shared<TempDir>("concurdl-ch03-loader");
    data::write_synthetic_dataset(s.dir->path() / "ds", s.spec, 1024);
    s.store = std::make_shared<RecordStore>(
        s.dir->path() / "ds", StoreOptions{.mode = ReadMode::pread, .storage = {.latency_s = latency}});
    s.opt = base_options(p);
    s.batches = EpochPlan(s.spec.records, s.opt, 0).batches();
    // The serial I/O time of an epoch: the sync loader with no compute, median of three.
    SyncLoader sync(*s.store, s.opt);
    Tally t{std::vector<std::uint8_t>(s.spec.records)};
    std::vector<double> io;
    for (int i = 0; i < 3; ++i) {
      t.clear();
      const auto t0 = Clock::now();
      run_epoch(sync, 1000 + i, 0, t);
      io.push_back(seconds_since(t0));
    }
    std::sort(io.begin(), io.end());
    s.io_epoch = io[1];
    return s;
  });
}

std::vector<std::string> loader_names() {
  std::vector<std::string> names;
  for (const LoaderKind& k : loader_kinds())
    if (!k.needs_uring || uring_available()) names.emplace_back(k.name);
  return names;
}

std::unique_ptr<Loader> make_loader(const std::string& name, const RecordStore& store,
                                    const LoaderOptions& opt) {
  const LoaderKind* k = find_loader_kind(name);
  if (k == nullptr) {
    std::string known;
    for (const LoaderKind& kind : loader_kinds()) known += (known.empty() ? "" : ", ") + std::string(kind.name);
    throw UsageError(fmt::format("parameter 'loader': unknown loader '{}' (known: {})", name, known));
  }
  if (std::string why; k->needs_uring && !uring_available(&why))
    throw UsageError(fmt::format("parameter 'loader': '{}' cannot run here: {}", name, why));
  return k->make(store, opt);
}

// A loader's epoch with compute, timed by the harness.
Trial loader_trial(Setup& s, std::unique_ptr<Loader> loader, double compute) {
  auto tally = std::make_shared<Tally>(Tally{std::vector<std::uint8_t>(s.spec.records)});
  auto epoch = std::make_shared<std::uint64_t>(0);
  std::shared_ptr<Loader> l = std::move(loader);
  Trial t;
  t.reset = [tally] { tally->clear(); };
  t.run = [l, tally, epoch, compute] { run_epoch(*l, (*epoch)++, compute, *tally); };
  t.check = [tally, n = s.batches] { return tally->check(n); };
  t.work = {.items = double(s.spec.records), .bytes = double(s.spec.records) * s.spec.record_size()};
  return t;
}

double compute_per_batch(const Setup& s, const Params& p) {
  const double ratio = param_real(p, "compute_ratio");
  if (ratio < 0) throw UsageError("parameter 'compute_ratio' must be >= 0");
  return ratio * s.io_epoch / static_cast<double>(s.batches);
}

Trial epoch_trial(const Params& p, GroupCache& cache) {
  Setup& s = setup_for(p, cache);
  const double compute = compute_per_batch(s, p);
  const std::string& name = param_str(p, "loader");
  LoaderOptions opt = s.opt;
  opt.workers = static_cast<unsigned>(param_int(p, "workers"));
  if (name == "model_no_overlap" || name == "model_perfect_overlap") {
    // Measured components, combined by the model: io = an epoch of the sync loader without
    // compute, compute = the same number of spins alone.
    const bool overlap = name == "model_perfect_overlap";
    auto sync = std::make_shared<SyncLoader>(*s.store, opt);
    auto tally = std::make_shared<Tally>(Tally{std::vector<std::uint8_t>(s.spec.records)});
    auto epoch = std::make_shared<std::uint64_t>(0);
    Trial t;
    t.reset = [tally] { tally->clear(); };
    t.measure = [sync, tally, epoch, compute, overlap, n = s.batches] {
      const auto t0 = Clock::now();
      run_epoch(*sync, (*epoch)++, 0, *tally);
      const double io = seconds_since(t0);
      const auto t1 = Clock::now();
      for (std::size_t b = 0; b < n; ++b) spin_for(compute);
      const double c = seconds_since(t1);
      return overlap ? std::max(io, c) : io + c;
    };
    t.check = [tally, n = s.batches] { return tally->check(n); };
    return t;
  }
  return loader_trial(s, make_loader(name, *s.store, opt), compute);
}

// (io + compute - T) / min(io, compute): the fraction of the shorter of the two that the loader
// hid behind the longer. io is the group's measured serial I/O time, compute is known.
Trial efficiency_trial(const Params& p, GroupCache& cache) {
  Setup& s = setup_for(p, cache);
  const double compute = compute_per_batch(s, p);
  if (compute <= 0) throw UsageError("ch03/overlap_efficiency needs compute_ratio > 0");
  LoaderOptions opt = s.opt;
  opt.workers = static_cast<unsigned>(param_int(p, "workers"));
  std::shared_ptr<Loader> loader = make_loader(param_str(p, "loader"), *s.store, opt);
  auto tally = std::make_shared<Tally>(Tally{std::vector<std::uint8_t>(s.spec.records)});
  auto epoch = std::make_shared<std::uint64_t>(0);
  const double io = s.io_epoch, c = compute * static_cast<double>(s.batches);
  Trial t;
  t.reset = [tally] { tally->clear(); };
  t.measure = [loader, tally, epoch, compute, io, c] {
    const auto t0 = Clock::now();
    run_epoch(*loader, (*epoch)++, compute, *tally);
    return (io + c - seconds_since(t0)) / std::min(io, c);
  };
  t.check = [tally, n = s.batches] { return tally->check(n); };
  return t;
}

Trial workers_trial(const Params& p, GroupCache& cache) {
  Setup& s = setup_for(p, cache);
  LoaderOptions opt = s.opt;
  opt.workers = static_cast<unsigned>(param_int(p, "workers"));
  return loader_trial(s, make_loader(param_str(p, "loader"), *s.store, opt), 0);
}

// Exercises 3.1 and 3.3: the student's loader against the reference, same store, same compute.
Trial exercise_trial(const Params& p, GroupCache& cache, bool prefetch_exercise) {
  Setup& s = setup_for(p, cache);
  LoaderOptions opt = s.opt;
  opt.workers = static_cast<unsigned>(param_int(p, "workers"));
  const bool student = param_str(p, "impl") == "student";
  std::unique_ptr<Loader> loader;
  if (prefetch_exercise)
    loader = student ? std::unique_ptr<Loader>(std::make_unique<StudentPrefetchLoader>(*s.store, opt))
                     : std::make_unique<PrefetchLoader>(*s.store, opt);
  else
    loader = student ? std::unique_ptr<Loader>(
                           std::make_unique<WorkerLoader<StudentReorderBuffer<Batch>>>(
                               *s.store, opt, "student_ordered"))
                     : std::make_unique<OrderedWorkerLoader>(*s.store, opt, "workers_ordered");
  return loader_trial(s, std::move(loader), prefetch_exercise ? compute_per_batch(s, p) : 0);
}

std::vector<std::string> with_models(std::vector<std::string> names) {
  names.emplace_back("model_no_overlap");
  names.emplace_back("model_perfect_overlap");
  return names;
}

const bool registered = [] {
  const Axis records{"records", {"4096"}, {"2048"}, AxisKind::size};
  const Axis batch{"batch", {"64"}, {}, AxisKind::count};
  const Axis latency{"latency_us", {"50", "200"}, {"50"}, AxisKind::real};

  register_experiment({
      .id = "ch03/loader_epoch",
      .chapter = "03-async-io",
      .title = "Epoch time per loader vs compute/io, latency-bound storage (model rows: measured "
               "io-only and compute-only epochs as io + compute and max(io, compute))",
      .axes = {{"loader", with_models(loader_names())},
               {"workers", {"4"}, {}, AxisKind::count},
               {"compute_ratio", {"0.25", "0.5", "1", "2", "4"}, {"0.5", "1", "2"}, AxisKind::real},
               latency, records, batch},
      .baseline = {{"loader", "sync"}},
      .interleave = {"loader", "workers"},
      .prepare = epoch_trial,
      .figures = {{.id = "vs_compute",
                   .title = "Epoch time vs compute/io per batch (model_*: no overlap, perfect "
                            "overlap)",
                   .kind = FigureKind::lines,
                   .x = "compute_ratio",
                   .series = "loader",
                   .log_x = true,
                   .y_label = "epoch time (s)"},
                  {.id = "at_equal",
                   .title = "Epoch time per loader, compute = io per batch",
                   .kind = FigureKind::bars,
                   .x = "loader",
                   .series = "latency_us",
                   .where = {{"compute_ratio", "1"}},
                   .y_label = "epoch time (s)"}},
  });

  std::vector<std::string> overlapping;
  for (const std::string& n : loader_names()) overlapping.push_back(n);
  register_experiment({
      .id = "ch03/overlap_efficiency",
      .chapter = "03-async-io",
      .title = "Overlap efficiency (io + compute - epoch) / min(io, compute): 0 = none, 1 = perfect",
      .axes = {{"loader", overlapping},
               {"workers", {"4"}, {}, AxisKind::count},
               {"compute_ratio", {"0.25", "0.5", "1", "2", "4"}, {"1"}, AxisKind::real},
               latency, records, batch},
      .metric = "overlap_efficiency",
      .unit = "",
      .lower_is_better = false,
      .interleave = {"loader", "workers"},
      .prepare = efficiency_trial,
      .figures = {{.id = "bars",
                   .title = "Overlap efficiency per loader (1 = I/O completely hidden)",
                   .kind = FigureKind::bars,
                   .x = "loader",
                   .series = "compute_ratio",
                   .y_label = "overlap efficiency"}},
  });

  std::vector<std::string> parallel;
  for (const std::string& n : loader_names())
    if (n != "sync" && n != "prefetch") parallel.push_back(n);
  register_experiment({
      .id = "ch03/loader_workers",
      .chapter = "03-async-io",
      .title = "Samples/s vs workers (threads; for uring: reads in flight on one thread), "
               "latency-bound storage, no compute",
      .axes = {{"loader", parallel},
               {"workers", {"1", "2", "4", "8", "16", "32"}, {"1", "2", "4", "8"}, AxisKind::count},
               {"latency_us", {"50"}, {}, AxisKind::real},
               records, batch},
      .baseline = {{"workers", "1"}},
      .interleave = {"loader", "workers"},
      .prepare = workers_trial,
      .figures = {{.id = "speedup",
                   .title = "Loader speedup vs workers: latency-bound I/O scales past the cores",
                   .kind = FigureKind::speedup,
                   .x = "workers",
                   .series = "loader",
                   .overlays = {Overlay::ideal}},
                  {.id = "rate",
                   .title = "Samples per second vs workers",
                   .kind = FigureKind::lines,
                   .x = "workers",
                   .y = "items_per_s",
                   .series = "loader",
                   .log_x = true,
                   .y_label = "samples/s"}},
  });

  auto exercise_timing = [&](const char* id, const char* title, bool prefetch) {
    return Experiment{
        .id = id,
        .chapter = "03-async-io",
        .title = title,
        .axes = {{"impl", {"reference", "student"}},
                 {"workers", {prefetch ? std::string("1") : exercise_threads()}, {}, AxisKind::count},
                 {"compute_ratio", {prefetch ? "1" : "0"}, {}, AxisKind::real},
                 {"latency_us", {"50"}, {}, AxisKind::real},
                 {"records", {"2048"}, {"1024"}, AxisKind::size},
                 batch},
        .interleave = {"impl"},
        .prepare = [prefetch](const Params& p, GroupCache& c) { return exercise_trial(p, c, prefetch); }};
  };
  register_exercise({.id = "3.1",
                     .chapter = "03-async-io",
                     .title = "prefetching loader with a bounded queue",
                     .test_binary = "ch03_tests",
                     .test_filter = "LoaderTyped/student_prefetch.*",
                     .timing = exercise_timing("ch03/exercise_3.1",
                                               "prefetching loader, student vs reference, "
                                               "compute = io",
                                               true)});
  register_exercise({.id = "3.3",
                     .chapter = "03-async-io",
                     .title = "ordered delivery from N workers (reorder buffer)",
                     .test_binary = "ch03_tests",
                     .test_filter = "ReorderTyped/student.*:LoaderTyped/student_ordered.*",
                     .timing = exercise_timing("ch03/exercise_3.3",
                                               "ordered worker loader, student vs reference "
                                               "reorder buffer",
                                               false)});
  return true;
}();

}  // namespace
