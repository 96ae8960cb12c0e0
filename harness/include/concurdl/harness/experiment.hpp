// Experiments: a named, registered function that runs one configuration. A chapter declares
// what to sweep, what one run does, how to check it and what to chart; the harness does the
// rest (sweep expansion, validation before and after timing, warm-up, interleaved repetitions,
// statistics, derived metrics, records, charts). See docs/extending.md for a worked example.
#pragma once

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/core/axis.hpp"
#include "concurdl/core/hardware.hpp"
#include "concurdl/core/params.hpp"

namespace concurdl {

// quick: the default, minutes for the whole suite; full: the reference sweep; smoke: every
// configuration's glue once at the smallest sizes (CI runs every experiment this way).
enum class Profile { quick, full, smoke };

// The work one run does, declared once next to the code; the harness derives items/s, bytes/s
// and FLOP/s from it and the measured time. Zero means "not meaningful here".
struct Work {
  double items = 0;
  double bytes = 0;  // bytes moved to or from memory (as BabelStream counts them)
  double flops = 0;
};

// A value a trial yields besides the experiment's main metric: Jain's index beside the
// acquisitions/s, the overlap efficiency beside the epoch time, a count of wrong elements.
// Every sample carries every declared metric; each gets its own statistics in the record.
struct Metric {
  std::string name;  // "jain_index"
  std::string unit;  // "" for a ratio or a count
  bool lower_is_better = false;
  std::string what;  // one line: what it is and what a good value looks like
  // May be left out of a record where it was not measured (a peer that does not count it):
  // then absent from every sample of that record, never from some. Not measured is left out,
  // not 0.
  bool optional = false;
};

// What one repetition yields: the main metric (the time, unless the experiment declares
// another) and the named metrics.
struct Sample {
  double value = 0;
  std::map<std::string, double> metrics;
  Sample() = default;
  Sample(double v) : value(v) {}  // NOLINT(google-explicit-constructor): a bare number is fine
  Sample(double v, std::map<std::string, double> named) : value(v), metrics(std::move(named)) {}
};

// How a trial's `run` is timed. The harness's host steady clock by default; a CUDA chapter
// passes cuda_event_timer(stream) (cuda_timer.hpp): events around the run, and the time is
// known only once the device work is done. Under `--ranks` the runner wraps the timer so that
// the sample is the max over the ranks of each rank's time (ranks.hpp).
class Timer {
 public:
  virtual ~Timer() = default;
  virtual std::string name() const = 0;  // recorded with the configuration: "host", ...
  // Seconds one call of `run` took; returns when the timed work is complete.
  virtual double time(const std::function<void()>& run) = 0;
};
std::shared_ptr<Timer> host_timer();

// One prepared configuration. `run` is timed by `timer`; an experiment that must time itself
// (per-operation latency measured inside, a fairness index) sets `measure` instead, which
// returns the sample directly.
struct Trial {
  std::function<void()> run;
  std::function<Sample()> measure;
  // After each timed `run`, untimed: adds the named metrics of that repetition to the sample.
  std::function<void(Sample&)> observe;
  std::shared_ptr<Timer> timer;        // null: host_timer()
  std::function<void()> reset;         // untimed, before every run (including warm-up)
  std::function<std::string()> check;  // "" when the last run's output is right, else what is wrong
  Work work;
  // The roofline of the device it runs on, where the chapter knows it (a GPU's measured copy
  // bandwidth and its peak FLOP/s from the device query): the record then carries the
  // roofline's time for `work` (derived "roofline_time_s": the longer of moving its bytes and
  // computing its FLOPs at these rates) and the fraction of it the measured median reached
  // ("fraction_of_roofline"), and a configuration whose fastest repetition beat that time by
  // more than kImpossibleMargin is impossible (a timer that did not wait for the work, work
  // declared wrong, an input left in a cache) and fails, saying so. Zero rates: no bound.
  struct Bound {
    double bytes_per_s = 0;
    double flops_per_s = 0;
    std::string source;  // where the rates come from, copied into the record's notes
  } bound;
  // Facts about how this configuration really ran that its parameters do not say, copied into
  // its record: {"direct": "unsupported (tmpfs): buffered cold reads measured instead"}.
  std::map<std::string, std::string> notes;
};

// How far a repetition may beat its Trial::bound before it is impossible: 10%, for a measured
// copy bandwidth that a kernel streaming in one direction can exceed a little.
inline constexpr double kImpossibleMargin = 1.10;

// The roofline's time for `w` under `b`: the longer of moving its bytes at b.bytes_per_s and
// computing its FLOPs at b.flops_per_s (a zero rate or zero work leaves that term out); 0 when
// neither applies.
double roofline_time(const Work& w, const Trial::Bound& b);

// Inputs shared by the configurations that are measured together (one group, see
// Experiment::interleave), built once: cache.get<std::vector<float>>("input", [&]{ ... }).
class GroupCache {
 public:
  template <class T, class Make>
  T& get(const std::string& key, Make make) {
    auto it = items_.find(key);
    if (it == items_.end()) it = items_.emplace(key, std::make_shared<T>(make())).first;
    return *std::any_cast<std::shared_ptr<T>&>(it->second);
  }
  void clear() { items_.clear(); }

 private:
  std::map<std::string, std::any> items_;
};

enum class FigureKind {
  speedup,     // speedup vs x (threads/ranks) per series, with ideal line and Amdahl fit
  efficiency,  // parallel efficiency vs x per series
  bars,        // y per series (x groups the bars), with 95% CI error bars
  lines,       // y vs x per series; log axes on request (metric vs size)
  stacked,     // one bar per x, the series stacked on it in their axis order (no error bars):
               // a step's time by phase, each box its phase's median, the top their sum
};
// Drawn as bars over categories (bars and stacked).
inline bool is_bar_kind(FigureKind k) { return k == FigureKind::bars || k == FigureKind::stacked; }

enum class Overlay {
  ideal,          // S(p) = p
  amdahl,         // fitted serial fraction in the legend
  gustafson,      // weak scaling with the Amdahl-fitted fraction
  mem_ceiling,    // calibrated memory bandwidth (y must be bytes_per_s)
  flops_ceiling,  // calibrated peak FLOP/s (y must be flops_per_s)
  roofline,       // min(peak FLOP/s, x * memory bandwidth): x must be "intensity" (FLOP/byte)
                  // and y flops_per_s; drawn from the run's calibration
};

struct Record;
struct Calibration;

// Where a model is evaluated: an x of the figure, the measured records there (of the model's
// series, or all of the figure's), and the run's calibration (α and β, peak FLOP/s, ...).
struct ModelPoint {
  double x = 0;
  std::vector<const Record*> records;
  const Calibration* calibration = nullptr;
  // Every valid record of the figure's experiment in this run, whatever the figure's `where`:
  // what a model fits its parameters to (α and β of a collective over all its sizes).
  std::vector<const Record*> run_records;
};

// An analytical model drawn beside the measurements: dashed, labelled "model: LABEL" in the
// legend, and never a row of the results (the report lists it under the figure as a model).
struct Model {
  std::string label;   // "max(io, compute)", "alpha-beta ring", "bubble (p-1)/(m+p-1)"
  std::string series;  // evaluated at the x values of this measured series ("" = every x)
  // The model's y at a point, or nullopt where it has no value (a component not measured).
  std::function<std::optional<double>(const ModelPoint&)> y;
  // A projection: evaluated at these x values (and at no other) instead of the measured ones,
  // so the curve may run past the measurements (all-reduce time out to 1024 ranks). `records`
  // holds what was measured at an x, if anything.
  std::vector<double> xs;
  // Optional: a line for the chart's notes, from the run's records (the fitted parameters the
  // curve was drawn with); "" adds nothing. Given a ModelPoint with x = 0 and no `records`.
  std::function<std::string(const ModelPoint&)> note;
};

struct Figure {
  std::string id;  // file stem, unique within the experiment
  std::string title;
  FigureKind kind = FigureKind::lines;
  std::string x = "threads";       // parameter on the x axis, or else a derived metric
                                   // ("intensity", "elapsed_s"): records without it are left out
  std::string y = "median";        // "median" (the metric), a declared Metric's name (its
                                   // median and interval) or a derived metric's name
  std::string series = "variant";  // parameter naming the series; other varying parameters
                                   // are folded into the series label, never averaged away
  Params where;                    // only records with these parameter values (an axis
                                   // inapplicable to a record, which it leaves out, selects it
                                   // whatever the value: where_selects)
  bool log_x = false, log_y = false;
  std::vector<Overlay> overlays;  // empty: speedup gets {ideal, amdahl}; others none
  std::string y_label;            // default: the metric and its unit
  std::string x_label;            // default: x's name
  // Parameters that vary along x rather than between series (the epoch, when x is the elapsed
  // time): left out of the series labels instead of making one series per point.
  std::vector<std::string> along_x;
  std::vector<Model> models;  // analytical curves drawn dashed beside the series
};

// What fraction_of_ceiling divides by: the calibrated memory bandwidth, the calibrated peak
// FLOP/s of all cores, or that of the record's workers (the scaling axis's value: one core's
// peak times the workers, at most all cores'), for a step whose threads are an axis.
// roofline_per_worker: no fraction_of_ceiling, but a CPU roofline for each record on its own
// workers (roofline_time_s and fraction_of_roofline): the longer of its declared bytes at the
// calibrated copy bandwidth of that many threads and its declared FLOPs at the peak of its
// arithmetic on them (the record's metric own_peak_flops where the trial measured one, bfloat16's
// VDPBF16PS; else the calibrated FMA peak of that many threads). Its bytes are counted as coming
// from memory: a phase whose data the caches hold may beat it, which is said, not judged.
enum class Ceiling { none, mem_bandwidth, peak_flops, peak_flops_per_worker, roofline_per_worker };

// What a lesson says its experiment shows, as data the harness checks after every run
// (claims.hpp): "padding the partial sums to a cache line each makes them at least 1.5x faster
// at 2 threads". The value is one field of the records matching `select`; with `versus`, how
// many times better each is than its peer, the record with those parameters replaced (the
// same idiom as Experiment::baseline). Several matching records (a size the claim leaves
// free): the claim is about every one of them, and the worst is reported.
// What decides a claim's value on a given machine: said beside a magnitude, and beside a law
// that does not hold, as where to look (claims.hpp's cause_text says each in a sentence).
enum class ClaimCause {
  noise,          // other processes on the machine, or the hypervisor taking the vCPUs
  cores_and_smt,  // how many real cores the CPUs are: vCPUs sharing one core, the host moving them
  vector_isa,     // the vector instructions and FMA units a core has (AVX2, AVX-512)
  caches,         // cache sizes, associativity and prefetchers
  memory_bandwidth,  // DRAM bandwidth a core or the socket gets
  wakeup_latency,    // how fast the kernel wakes a sleeping thread (futex, epoll, eventfd)
  page_cache,        // whether the file is in the page cache, and the storage under it
  peer_kernels,      // the peer's own code and version (OpenBLAS, oneTBB, MPI, PyTorch)
};

struct Claim {
  // A law is the lesson's point, true on every machine the claim applies to: an analytical
  // model or an invariant, judged held or not held against `bound`, which a comment beside the
  // claim derives from a model the code under test does not share (never from the runs it
  // judges; a change goes into results/reference/README.md's changelog); `concurdl check` fails
  // when a law does not hold. A magnitude is a figure that depends on the machine (a speedup on
  // vCPUs, a fraction of a peak, a ratio against a peer's kernels): it is reported beside the
  // reference machine's value with what it depends on (`causes`), has no bound, and never fails a
  // check.
  enum class Kind { law, magnitude };
  std::string id;         // unique within the experiment: "padding_beats_adjacent"
  std::string statement;  // one sentence a student can read as the lesson's claim
  Params select;          // {{"variant", "padded"}, {"threads", "2"}}
  // "median" (the experiment's metric), a named Metric (its median) or a derived metric
  // ("speedup", "bytes_per_s", "fraction_of_ceiling").
  std::string field = "median";
  Params versus;  // {{"variant", "adjacent"}}: a ratio, better / worse, so > 1 means better
  // within: a count that has a model value, held to it from both sides (a count law with only
  // one side passes a defect in the other direction: a skipped gather, a buffer not counted).
  enum class Compare { at_least, at_most, within } compare = Compare::at_least;
  // Holds when value >= bound (at_least), value <= bound (at_most) or |value - bound| <=
  // tolerance (within).
  double bound = 0;
  double tolerance = 0;  // within only: what the model allows (uneven blocks, rounding)
  Kind kind = Kind::law;
  std::vector<ClaimCause> causes;  // what moves the value from machine to machine
  std::string unit;  // how the value is printed: "x" for a ratio, "" for a plain number
  // When it applies; otherwise it is "not applicable" with the reason.
  unsigned min_cpus = 0;    // CPUs this process may use (provenance.cores)
  std::string cpu_feature;  // "avx512f": among provenance.cpu.flags_used
  bool needs_gpu = false;   // provenance.gpus is not empty
  bool timing = true;       // depends on speed: not judged on the smoke profile
  // A positive control, for a law that could pass because nothing happened (no forbidden
  // outcome also when the threads never overlapped): the law is judged only when the control's
  // records (select, with this experiment's id) show the effect can be seen in that run, its
  // worst value meeting `bound`; otherwise the law is "not judged", saying so.
  struct Control {
    Params select;
    std::string field = "median";
    Compare compare = Compare::at_least;
    double bound = 0;
    std::string shows;  // what a passing control shows: "relaxed store buffering shows r1 = r2 = 0"
  };
  std::optional<Control> control;
  // Its value on the reference machine is no field: claim_reference() reads it from the
  // committed runs the claim was judged in (claims.hpp), so retaking a machine is committing a
  // run.
};

struct Experiment {
  std::string id;       // "ch01/sum_memory_bound"
  std::string chapter;  // "01-threads"
  std::string title;
  std::vector<Axis> axes;
  // The configuration speedup is measured against: each record's baseline is the record with
  // these parameters replaced, e.g. {{"threads", "1"}} or {{"variant", "serial"}, {"threads",
  // "1"}}.
  Params baseline;
  std::string metric = "time";
  std::string unit = "s";
  bool lower_is_better = true;
  // Named values every sample carries besides `metric` (see Metric).
  std::vector<Metric> metrics;
  // Experiment-specific derived metrics, computed once the statistics are known from the
  // parameters, the declared work and the record (algbw and busbw beside a collective, as
  // nccl-tests keeps getBw beside each one). Their names go in `derived` below.
  std::function<void(const Params&, const Work&, Record&)> derive;
  // The axis that counts the workers: efficiency = speedup x base / workers along it, and
  // the Amdahl fits of speedup figures use it. "threads", "ranks", "workers", "gpus", "stages".
  std::string scaling_axis = "threads";
  // Its workers compute: a speedup along the scaling axis above the CPUs the run had cannot be
  // right, and is flagged above_ceiling. False for workers that wait (reads in flight on
  // latency-bound storage), whose speedup past the cores is the point.
  bool cpu_bound = true;
  // Its `ranks` axis counts MPI processes: it runs only under `concurdl run --ranks N`, each
  // configuration on world ranks 0..ranks-1, timed as the max over them (ranks.hpp).
  bool mpi = false;
  std::vector<Inapplicable> inapplicable;
  Ceiling ceiling = Ceiling::none;
  // Axes whose configurations are prepared together and measured round-robin, repetition by
  // repetition, so that drift on a shared machine hits them alike. Other axes (sizes) form
  // separate groups, so only one group's inputs are in memory at a time.
  std::vector<std::string> interleave = {"variant", "threads"};
  int repetitions = 0;  // 0: the profile's default (quick 5, full 10)
  int warmup = 1;
  std::function<Trial(const Params&, GroupCache&)> prepare;
  std::vector<Figure> figures;
  // Set by register_microbenchmarks (gbench.hpp): this entry is a set of Google Benchmark
  // micro-benchmarks selected by this regex, run through the bridge instead of `prepare`.
  std::string microbenchmark_filter;
  std::vector<std::string> microbenchmark_args;
  // Derived metrics this experiment's records carry beyond the harness's own (items_per_s,
  // speedup, intensity, ...): a figure's x or y may name them.
  std::vector<std::string> derived;
  // What the lesson claims this experiment shows, checked after every run (Claim).
  std::vector<Claim> claims;
  // Recorded by a command of its own (`concurdl train`), not measured by `run`: it has no
  // `prepare`, `run` leaves it out, and its figures chart the records that command writes.
  std::string recorded_by;
  // Why it cannot run on this machine ("no CUDA device: ..."), or "" when it can; unset: it
  // always can. `run` leaves such an experiment out, says which and why before measuring,
  // and keeps the list in the run's provenance (`skipped_experiments`); the report repeats it.
  std::function<std::string()> unavailable;
};

// The experiments of `selected` that cannot run here, with the reason each gives.
std::vector<std::pair<const Experiment*, std::string>> unavailable_here(
    const std::vector<const Experiment*>& selected);

// Registration from a chapter's experiments.cpp:
//   static const bool registered = concurdl::register_experiment({ .id = ..., ... });
// Throws std::logic_error on a duplicate id or a malformed declaration (a bug, found at start).
bool register_experiment(Experiment e);
const std::vector<Experiment>& experiments();
const Experiment* find_experiment(const std::string& id);
// `p` without the parameters that the experiment's Inapplicable rules say mean nothing there.
Params applicable_params(const Experiment& e, Params p);
// Whether a record with these parameters has `where`'s values: each one it holds equal, each one
// it leaves out inapplicable there (a figure of samples/s against ranks selecting an axis that
// means nothing at 1 rank keeps its 1-rank points).
bool where_selects(const Experiment& e, const Params& record, const Params& where);

// Chapters known to the program (those that registered anything), "01-threads" etc.
struct ChapterInfo {
  std::string folder;  // "01-threads"
  std::string title;
};
bool register_chapter(ChapterInfo c);
const std::vector<ChapterInfo>& chapters();
// Accepts "01-threads", "01", "ch01", "1"; returns nullptr when unknown.
const ChapterInfo* find_chapter(const std::string& name);

// 1, 2, 4, ... up to max(8, 2 x hardware threads), plus the hardware thread count itself:
// scaling up to the cores and beyond them (oversubscription). Never assumes a core count.
// "Hardware threads" is the size of this process's CPU affinity mask (taskset, cpusets). Both
// lists stop at kMaxThreads.
std::vector<std::string> thread_counts();
// 1 .. hardware threads in powers of two plus the count itself (no oversubscription).
std::vector<std::string> thread_counts_up_to_cores();

}  // namespace concurdl
