// The takes of a group (runner_detail.hpp): a calibration group is taken until its figures
// agree; an experiment's group between cores probes, taken again while the CPUs share a core.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/cores_probe.hpp"
#include "concurdl/harness/experiment.hpp"
#include "runner_detail.hpp"

namespace concurdl::runner_detail {

namespace {

// The records of a group's slots before their first take: what a later take starts from.
std::vector<Record> records_of(const std::vector<Slot>& slots) {
  std::vector<Record> r;
  for (const Slot& s : slots) r.push_back(s.record);
  return r;
}

// The slots as before their first take, for another.
void start_again(std::vector<Slot>& slots, const std::vector<Record>& fresh) {
  for (std::size_t k = 0; k < slots.size(); ++k) {
    slots[k].record = fresh[k];
    slots[k].noise = {};
  }
}

// Of two records of one configuration, the better measured: valid first, then the better
// median.
bool better(const Record& a, const Record& b) {
  if (a.valid != b.valid) return a.valid;
  if (a.stats.n == 0 || b.stats.n == 0) return a.stats.n > b.stats.n;
  return a.lower_is_better ? a.stats.median < b.stats.median : a.stats.median > b.stats.median;
}

constexpr double kCoresWaitSeconds = 1.0;
constexpr int kCoresShortRetakes = 2;

double probe_waiting_for_cores() {
  double ratio = cores_probe_ratio(2);
  const auto t0 = std::chrono::steady_clock::now();
  while (ratio < kCoresShortFraction * 2 &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
             kCoresWaitSeconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ratio = cores_probe_ratio(2);
  }
  return ratio;
}

}  // namespace

// A group between two cores probes (cores_probe.hpp), when the options ask for them. Two threads
// are enough to see vCPUs that share a core, and on a machine with SMT two threads still land on
// two cores (the scheduler spreads them first). Before a take, the probe is repeated for up to
// kCoresWaitSeconds while the CPUs share a core; a take whose probes found them sharing is
// measured again, up to kCoresShortRetakes times, and the last take's records keep the note
// "cores_short" when every take was short.
std::vector<Record> measure_probed_group(const Experiment& e, std::vector<Slot>& slots, int reps,
                                         Progress& progress, const RunOptions& opt) {
  const int warmup = std::max(1, e.warmup);
  const bool probe = opt.probe_cores && !e.mpi && hardware_threads() >= 2;
  if (!probe) {
    measure_group(slots, reps, warmup, &progress, opt.trace_dir);
    return finish_group(e, slots);
  }
  const std::vector<Record> fresh = records_of(slots);
  std::string note;
  int take = 0;
  for (;; ++take) {
    if (take > 0) start_again(slots, fresh);
    const double before = probe_waiting_for_cores();
    measure_group(slots, reps, warmup, take == 0 ? &progress : nullptr, opt.trace_dir);
    note = cores_short_note(before, cores_probe_ratio(2), 2);
    if (note.empty() || take == kCoresShortRetakes) break;
  }
  std::vector<Record> group = finish_group(e, slots);
  for (Record& r : group) {
    if (!note.empty())
      r.notes["cores_short"] = fmt::format("{} ({} takes, each short)", note, take + 1);
    else if (take > 0)
      r.notes["cores_retaken"] = fmt::format(
          "measured {} times: the cores probe found the CPUs sharing a core around the "
          "earlier take{}, and not around this one",
          take + 1, take > 1 ? "s" : "");
  }
  return group;
}

// A calibration group is measured again until its figures (calibration_figures) agree in two
// consecutive takes within kCalibrationTolerance, at most kCalibrationMaxTakes times. Each
// configuration keeps its better record of the agreeing pair (of every take when none agreed:
// a disturbed take is the slower one). A figure that never settled is said in the records'
// note "unstable", which calibration_from_records gathers into Calibration::detail (the
// calibration's "unstable" in results.json), and in one line on stderr. Each take is also
// watched as a whole, in one window, which the jiffy counters can judge even where the
// repetitions are too short to: a take during which other processes were busy gets the note
// "noisy" where its repetitions did not already.
std::vector<Record> measure_calibration_group(const Experiment& e, std::vector<Slot>& slots,
                                              int reps, int warmup, Progress& progress,
                                              bool verbose) {
  const std::vector<Record> fresh = records_of(slots);
  std::vector<std::vector<Record>> taken;
  std::vector<std::string> names;
  const Takes takes = agreeing_takes(
      [&] {
        if (!taken.empty()) start_again(slots, fresh);
        NoiseMeter whole;
        whole.start();
        measure_group(slots, reps, warmup, taken.empty() ? &progress : nullptr);
        whole.stop();
        taken.push_back(finish_group(e, slots));
        if (std::string note = whole.note("this calibration take"); !note.empty())
          for (Record& r : taken.back())
            if (!r.notes.count("noisy")) r.notes["noisy"] = note;
        std::vector<double> values;
        names.clear();
        for (const auto& [name, v] : calibration_figures(taken.back())) {
          names.push_back(name);
          values.push_back(v);
        }
        // No valid record, no figure: measuring again would only fail again.
        if (std::all_of(values.begin(), values.end(), [](double v) { return v == 0; }))
          values.clear();
        return values;
      },
      kCalibrationTolerance, kCalibrationMaxTakes);
  const std::size_t n = taken.size();
  const std::size_t first = takes.agreed && n >= 2 ? n - 2 : 0;
  std::vector<Record> kept = taken.back();
  for (std::size_t k = 0; k < kept.size(); ++k)
    for (std::size_t t = first; t < n; ++t)
      if (better(taken[t][k], kept[k])) kept[k] = taken[t][k];
  if (!takes.agreed) {
    // The figures that disagree in the last two takes, with every take's value.
    const std::vector<double>& last = takes.figures[n - 1];
    const std::vector<double>& before = takes.figures[n >= 2 ? n - 2 : 0];
    std::string text;
    for (std::size_t f = 0; f < names.size(); ++f) {
      if (n >= 2 && takes_agree({before[f]}, {last[f]}, kCalibrationTolerance)) continue;
      std::vector<std::string> values;
      for (const auto& take : takes.figures) values.push_back(fmt::format("{:.3g}", take[f]));
      text += fmt::format("{}{}: takes {} disagree by more than {:.0f}%", text.empty() ? "" : "; ",
                          names[f], fmt::join(values, ", "), 100 * kCalibrationTolerance);
    }
    text += "; the best take of each configuration is kept";
    for (Record& r : kept) r.notes["unstable"] = text;
    if (verbose) {
      std::fprintf(stderr, "concurdl: warning: %s did not settle: %s\n", e.id.c_str(),
                   text.c_str());
      std::fflush(stderr);
    }
  }
  return kept;
}

}  // namespace concurdl::runner_detail
