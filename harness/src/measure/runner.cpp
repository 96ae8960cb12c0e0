// The runner: for each group of configurations measured together (sweep.cpp expands them):
// prepare, check, warm up, time round-robin while watching the machine, check again; then
// statistics (derived metrics: derive.cpp). How often a group is taken (until the calibration's
// takes agree, or until the cores probe finds the CPUs a core each) is runner_takes.cpp's.
#include "concurdl/harness/runner.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <set>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/gbench.hpp"
#include "concurdl/harness/noise.hpp"
#include "concurdl/harness/trace_files.hpp"
#include "runner_detail.hpp"

namespace concurdl {

using namespace runner_detail;

class HostTimer final : public Timer {
 public:
  std::string name() const override { return "host"; }
  double time(const std::function<void()>& run) override {
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

std::shared_ptr<Timer> host_timer() {
  static const std::shared_ptr<Timer> t = std::make_shared<HostTimer>();
  return t;
}

namespace {
std::atomic<bool> g_stop{false};
}  // namespace

void request_stop() { g_stop.store(true); }
bool stop_requested() { return g_stop.load(); }

namespace {

// The key that groups configurations measured together: every parameter not interleaved.
Params group_key(const Config& c) {
  Params key;
  for (const auto& [k, v] : c.params)
    if (std::find(c.experiment->interleave.begin(), c.experiment->interleave.end(), k) ==
        c.experiment->interleave.end())
      key[k] = v;
  // Across MPI ranks a group runs on one set of ranks: configurations of another size are
  // another group.
  if (c.experiment->mpi && c.params.count("ranks")) key["ranks"] = c.params.at("ranks");
  return key;
}

// `noise`, where given, is read around the measurement (after the untimed reset): outside the
// timer, which times only `run`.
Sample run_once(Trial& t, Timer& timer, bool across_ranks = false, NoiseMeter* noise = nullptr) {
  if (t.reset) t.reset();
  if (noise) noise->start();
  Sample sample;
  if (t.measure && across_ranks) {
    // The slowest rank's value; a rank that failed contributes infinity, so that every rank
    // leaves this repetition as failed and they stay in step.
    std::exception_ptr failed;
    try {
      sample = t.measure();
    } catch (...) {
      failed = std::current_exception();
      sample.value = std::numeric_limits<double>::infinity();
    }
    sample.value = ranks::max_over(sample.value);
    if (failed) std::rethrow_exception(failed);
  } else if (t.measure) {
    sample = t.measure();
  } else {
    sample.value = timer.time(t.run);
    if (t.observe) t.observe(sample);
  }
  if (noise) noise->stop();
  // A NaN or infinite sample would poison the statistics and cannot be stored as JSON.
  if (!std::isfinite(sample.value))
    throw std::runtime_error(fmt::format("the measurement is {}", sample.value));
  for (const auto& [name, v] : sample.metrics)
    if (!std::isfinite(v)) throw std::runtime_error(fmt::format("metric '{}' is {}", name, v));
  return sample;
}

// Every declared metric in every sample, and nothing undeclared: a metric missing from one
// repetition would silently shift its samples against the others. An optional metric is in
// every sample of a record or in none.
void add_sample(const Experiment& e, Record& r, Sample&& s) {
  for (const Metric& m : e.metrics) {
    const bool has = s.metrics.count(m.name) != 0;
    if (!has && !m.optional)
      throw std::runtime_error(fmt::format("the sample has no metric '{}'", m.name));
    if (m.optional && !r.samples.empty() && has == r.metrics.at(m.name).samples.empty())
      throw std::runtime_error(fmt::format(
          "optional metric '{}' is in some of the record's samples and not in others", m.name));
  }
  for (const auto& [name, v] : s.metrics) {
    auto it = r.metrics.find(name);
    if (it == r.metrics.end())
      throw std::logic_error(
          fmt::format("the sample has metric '{}', which the experiment does "
                      "not declare",
                      name));
    it->second.samples.push_back(v);
  }
  r.samples.push_back(s.value);
}

bool check(Slot& s, const char* when) {
  if (!s.record.valid || !s.trial.check) return s.record.valid;
  const std::string what = s.trial.check();
  if (!what.empty()) {
    s.record.valid = false;
    s.record.validation = fmt::format("{}: {}", when, what);
  }
  return s.record.valid;
}

// Across ranks every rank must leave a step with the same verdict on every configuration, or
// they would fall out of step in the next collective. A configuration is valid where it is
// valid on every rank; rank 0's record says which rank found what.
void agree(std::vector<Slot>& slots) {
  for (Slot& s : slots) {
    if (!s.across_ranks) continue;
    if (ranks::all_true(s.record.valid)) continue;
    const std::vector<std::string> why =
        ranks::gather_text(s.record.valid ? "" : s.record.validation);
    std::string text;
    for (std::size_t r = 0; r < why.size(); ++r)
      if (!why[r].empty())
        text += fmt::format("{}rank {}: {}", text.empty() ? "" : "; ", r, why[r]);
    s.record.valid = false;
    s.record.validation = text;
  }
}

// A file name for a configuration: "micro_batches=4,schedule=gpipe,stages=2".
std::string file_stem(const std::string& text) {
  std::string out;
  for (const char c : text)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '=' || c == ',' || c == '.' ||
                   c == '-' || c == '_'
               ? c
               : '_';
  return out.empty() ? "config" : out;
}

// --trace: the spans of one repetition of `s`, as DIR/EXPERIMENT/CONFIG.json, with the title its
// Gantt chart takes (drawn after the run, gantt.hpp). Nothing when the experiment's code records
// no spans.
void write_trace(const std::filesystem::path& dir, const Slot& s,
                 const std::vector<trace::Event>& events, std::size_t dropped) {
  if (events.empty()) return;
  const Experiment& e = *s.config->experiment;
  std::string params;
  for (const auto& [k, v] : s.config->params) params += (params.empty() ? "" : ",") + k + "=" + v;
  trace::write_chrome_trace(dir / file_stem(e.id) / (file_stem(params) + ".json"), events,
                            {{"experiment", e.id},
                             {"params", params},
                             {"title", fmt::format("{}\n{}", e.id, describe(s.config->params))}},
                            dropped);
}

}  // namespace

namespace runner_detail {

// `progress` is null when the group is measured again (a calibration's later takes).
void measure_group(std::vector<Slot>& slots, int repetitions, int warmup, Progress* progress,
                   const std::filesystem::path& trace_dir) {
  agree(slots);  // prepare
  // Before timing: each configuration runs once and is checked; a wrong one is never timed.
  for (Slot& s : slots) {
    if (progress)
      progress->step(fmt::format("{} {}", s.config->experiment->id, describe(s.config->params)));
    if (!s.record.valid) continue;  // prepare failed; its reason stays in the record
    guarded(s, "failed", [&] {
      run_once(s.trial, *s.timer, s.across_ranks);
      check(s, "before timing");
      for (int w = 1; w < warmup && s.record.valid; ++w)
        run_once(s.trial, *s.timer, s.across_ranks);
    });
  }
  agree(slots);
  // Timing, round-robin: repetition r runs every configuration once, starting at a rotating
  // offset so no configuration is always first (or always right after the same neighbour).
  const std::size_t n = slots.size();
  // The whole round-robin in one window too: configurations too short to judge on their own
  // repetitions were interleaved with the rest of the group, so the group's verdict is theirs.
  const bool across_ranks =
      std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return s.across_ranks; });
  NoiseMeter group;
  if (!across_ranks) group.start();
  for (int r = 0; r < repetitions; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      Slot& s = slots[(i + static_cast<std::size_t>(r)) % n];
      if (!s.record.valid) continue;
      // Other processes' CPU time is accounted around each timed repetition, except across
      // MPI ranks: there the other ranks are processes of ours, and their waiting for each
      // other would count as activity.
      // --trace records the last repetition (the trial's threads are joined when it returns).
      const bool traced = !trace_dir.empty() && r + 1 == repetitions;
      if (traced) trace::Recorder::global().start();
      guarded(s, "failed during timing", [&] {
        add_sample(
            *s.config->experiment, s.record,
            run_once(s.trial, *s.timer, s.across_ranks, s.across_ranks ? nullptr : &s.noise));
      });
      if (traced) {
        trace::Recorder& rec = trace::Recorder::global();
        const std::vector<trace::Event> events = rec.stop();
        try {
          write_trace(trace_dir, s, events, rec.dropped());
        } catch (const std::exception& e) {  // the measurement stands; its timeline is lost
          std::fprintf(stderr, "concurdl: warning: %s: no trace written: %s\n",
                       s.config->experiment->id.c_str(), e.what());
        }
      }
    }
  }
  // After timing: the last timed run's output must still be right.
  for (Slot& s : slots) guarded(s, "check after timing failed", [&] { check(s, "after timing"); });
  agree(slots);
  // A configuration timed while other processes used a quarter of a CPU or more (or the
  // hypervisor stole 5% of one) says so in its notes, which the report shows beside it.
  if (!across_ranks) group.stop();
  for (Slot& s : slots) {
    std::string note = s.noise.judged() ? s.noise.note()
                                        : group.note(
                                              "the timed repetitions of its group, "
                                              "interleaved with it");
    if (!note.empty()) s.record.notes["noisy"] = note;
  }
}

// The group's records, with statistics and derived metrics, moved out of its measured slots.
std::vector<Record> finish_group(const Experiment& e, std::vector<Slot>& slots) {
  std::vector<Record> out;
  for (Slot& s : slots) {
    if (!s.record.samples.empty()) s.record.stats = summarize(s.record.samples);
    for (auto& [name, m] : s.record.metrics)
      if (!m.samples.empty()) m.stats = summarize(m.samples);
    // An optional metric no sample had was not measured: left out of the record.
    if (!s.record.samples.empty())
      for (const Metric& m : e.metrics)
        if (m.optional && s.record.metrics.at(m.name).samples.empty())
          s.record.metrics.erase(m.name);
    const Work& w = s.trial.work;
    const double t = s.record.stats.median;
    if (e.metric == "time" && t > 0) {
      if (w.items > 0) s.record.derived["items_per_s"] = w.items / t;
      if (w.bytes > 0) s.record.derived["bytes_per_s"] = w.bytes / t;
      if (w.flops > 0) s.record.derived["flops_per_s"] = w.flops / t;
    }
    // Arithmetic intensity (FLOP per byte moved): where the run sits on a roofline.
    if (w.flops > 0 && w.bytes > 0) s.record.derived["intensity"] = w.flops / w.bytes;
    if (e.metric == "time") judge_roofline(s.record, w, s.trial.bound);
    if (e.derive && s.record.valid && s.record.stats.n > 0)
      guarded(s, "derive failed", [&] { e.derive(s.record.params, w, s.record); });
    out.push_back(std::move(s.record));
  }
  return out;
}

}  // namespace runner_detail

namespace {}  // namespace

std::vector<Record> run_configs(
    const std::vector<Config>& configs, const RunOptions& opt, const Calibration& calib,
    const std::function<void(const std::vector<Record>&)>& after_experiment) {
  std::vector<Record> records;
  Progress progress(configs.size(), opt.progress);
  // For tests of Ctrl-C: CONCURDL_INTERRUPT_AFTER_GROUPS=N raises SIGINT after the N-th group.
  long groups_finished = 0, interrupt_after = -1;
  if (const char* n = std::getenv("CONCURDL_INTERRUPT_AFTER_GROUPS"))
    interrupt_after = std::atol(n);
  std::size_t i = 0;
  while (i < configs.size()) {
    // One experiment at a time; within it, one group at a time.
    const Experiment* e = configs[i].experiment;
    std::size_t end = i;
    while (end < configs.size() && configs[end].experiment == e) ++end;
    std::vector<std::pair<Params, std::vector<const Config*>>> groups;
    for (std::size_t k = i; k < end; ++k) {
      Params key = group_key(configs[k]);
      auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == key; });
      if (it == groups.end())
        groups.push_back({key, {&configs[k]}});
      else
        it->second.push_back(&configs[k]);
    }
    const int reps = opt.repeat
                         ? *opt.repeat
                         : (e->repetitions > 0 ? e->repetitions : default_repetitions(opt.profile));
    std::vector<Record> done;
    if (!e->microbenchmark_filter.empty()) {
      progress.step(fmt::format("{} (Google Benchmark)", e->id));
      done = run_microbenchmarks(*e, opt.profile, reps);
      groups.clear();
    }
    for (auto& [key, members] : groups) {
      // Ctrl-C (or a test's stand-in for it): stop between groups; what is saved stays.
      if (stop_requested()) throw Interrupted("interrupted");
      // An MPI experiment's group runs on world ranks 0..ranks-1; the others wait for it.
      std::optional<ranks::Group> rank_group;
      if (e->mpi) {
        rank_group.emplace(key.count("ranks") ? static_cast<int>(param_int(key, "ranks"))
                                              : ranks::world_size());
        if (!rank_group->participating()) {
          for (std::size_t k = 0; k < members.size(); ++k) progress.step(e->id + " (other ranks)");
          continue;
        }
      }
      GroupCache cache;
      std::vector<Slot> slots;
      slots.reserve(members.size());
      for (const Config* c : members) {
        Slot s;
        s.config = c;
        s.record.experiment = e->id;
        s.record.chapter = e->chapter;
        s.record.params = c->params;
        s.record.metric = e->metric;
        s.record.unit = e->unit;
        s.record.lower_is_better = e->lower_is_better;
        for (const Metric& m : e->metrics)
          s.record.metrics[m.name] = {m.unit, m.lower_is_better, {}, {}};
        guarded(s, "prepare failed", [&] {
          s.trial = e->prepare(c->params, cache);
          if (!s.trial.run && !s.trial.measure)
            throw std::logic_error("prepare returned a trial with neither run nor measure");
          if (!s.trial.timer) s.trial.timer = host_timer();
          s.record.notes = s.trial.notes;
        });
        if (e->mpi) {
          s.trial.timer = max_over_ranks_timer(s.trial.timer ? s.trial.timer : host_timer());
          s.across_ranks = true;
        }
        s.timer = s.trial.timer ? s.trial.timer.get() : host_timer().get();
        s.record.timer = s.trial.measure ? (e->mpi ? "max_over_ranks(measured by the trial)"
                                                   : "measured by the trial")
                                         : s.timer->name();
        slots.push_back(std::move(s));
      }
      // Rows that cannot run here are left out, said, and the rest measured; across ranks
      // only when every rank found so (otherwise the row is invalid, as any failure is).
      std::erase_if(slots, [&](const Slot& s) {
        const bool mine = !s.unavailable.empty();
        if (!(s.across_ranks ? ranks::all_true(mine) : mine)) return false;
        if (opt.on_unavailable) opt.on_unavailable(*s.config, s.unavailable);
        return true;
      });
      std::vector<Record> group;
      if (e->chapter == kCalibrationChapter && !e->mpi) {
        group = measure_calibration_group(*e, slots, reps, std::max(1, e->warmup), progress,
                                          opt.progress);
      } else {
        group = measure_probed_group(*e, slots, reps, progress, opt);
      }
      done.insert(done.end(), std::make_move_iterator(group.begin()),
                  std::make_move_iterator(group.end()));
      // The journal: every finished group is on disk before the next one starts.
      if (after_experiment) {
        std::vector<Record> so_far = records;
        so_far.insert(so_far.end(), done.begin(), done.end());
        after_experiment(so_far);
      }
      if (++groups_finished == interrupt_after) std::raise(SIGINT);
    }
    derive_metrics(done, calib, hardware_threads());
    records.insert(records.end(), std::make_move_iterator(done.begin()),
                   std::make_move_iterator(done.end()));
    if (after_experiment) after_experiment(records);
    done.clear();
    i = end;
  }
  progress.done();
  return records;
}

}  // namespace concurdl
