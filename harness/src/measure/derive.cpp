// Derived metrics of a run's records: speedup and efficiency against each record's baseline,
// Karp-Flatt, the fraction of the calibrated ceiling, and the above-ceiling flag; and a
// device's roofline (Trial::bound) with its impossible figures.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "concurdl/harness/runner.hpp"
#include "concurdl/harness/stats.hpp"

namespace concurdl {

namespace {

// The worker count along the experiment's scaling axis, or 0 where it has none.
double workers(const Params& p, const std::string& axis) {
  auto it = p.find(axis);
  if (it == p.end()) return 0;
  try {
    return static_cast<double>(std::stoll(it->second));
  } catch (const std::exception&) {
    return 0;
  }
}

// The peak of its own arithmetic a record measured beside it (metric own_peak_flops: bfloat16's
// VDPBF16PS), or 0 where it has none.
double own_peak_flops(const Record& r) {
  const auto own = r.metrics.find("own_peak_flops");
  return own != r.metrics.end() && own->second.stats.median > 0 ? own->second.stats.median : 0;
}

// The calibration's figure for `threads` threads in one of its per-thread tables
// (mem_copy_bytes_per_s_by_threads, fma_flops_per_s_by_threads); 0 where it has none.
double by_threads(const Calibration& calib, const char* table, double threads) {
  if (!calib.detail.is_object() || !calib.detail.contains(table) || threads < 1) return 0;
  const nlohmann::json& t = calib.detail.at(table);
  const std::string key = std::to_string(static_cast<long long>(threads));
  if (!t.is_object() || !t.contains(key) || !t.at(key).is_number()) return 0;
  return t.at(key).get<double>();
}

// Ceiling::roofline_per_worker (experiment.hpp): the record's roofline on its own workers, from
// the run's calibration (and its own measured peak, where it has one). Not a validity check: its
// bytes are priced at the memory's bandwidth, and a phase whose data sits in a cache may beat it.
void derive_cpu_roofline(Record& r, const Calibration& calib, double threads) {
  r.derived.erase("roofline_time_s");  // derived again under another calibration
  r.derived.erase("fraction_of_roofline");
  r.notes.erase("roofline");
  if (r.stats.median <= 0) return;
  const auto rate = [&](const char* name) {
    const auto it = r.derived.find(name);
    return it == r.derived.end() ? 0.0 : it->second;
  };
  const double bytes = rate("bytes_per_s") * r.stats.median;
  const double flops = rate("flops_per_s") * r.stats.median;
  const double copy = by_threads(calib, "mem_copy_bytes_per_s_by_threads", threads);
  double peak = 0;
  std::string peak_from;
  if ((peak = own_peak_flops(r)) > 0) {
    peak_from = "the peak of its own arithmetic measured beside it (own_peak_flops)";
  } else if ((peak = by_threads(calib, "fma_flops_per_s_by_threads", threads)) > 0) {
    peak_from = "the calibrated FMA peak";
  }
  const double memory_s = bytes > 0 && copy > 0 ? bytes / copy : 0;
  const double compute_s = flops > 0 && peak > 0 ? flops / peak : 0;
  // A side whose rate is missing while the record declares its work: no bound, rather than the
  // other side alone passed off as the roofline.
  if ((bytes > 0 && copy <= 0) || (flops > 0 && peak <= 0) || (memory_s <= 0 && compute_s <= 0))
    return;
  const double model = std::max(memory_s, compute_s);
  r.derived["roofline_time_s"] = model;
  r.derived["fraction_of_roofline"] = model / r.stats.median;
  const auto t = static_cast<long long>(threads);
  std::string note = fmt::format("{} thread{}: ", t, t == 1 ? "" : "s");
  if (bytes > 0)
    note += fmt::format("{:.4g} bytes at the calibrated copy bandwidth ({:.4g} GB/s) take {:.4g} s",
                        bytes, copy / 1e9, memory_s);
  if (bytes > 0 && flops > 0) note += "; ";
  if (flops > 0)
    note += fmt::format("{:.4g} FLOPs at {} ({:.4g} GFLOP/s) take {:.4g} s", flops, peak_from,
                        peak / 1e9, compute_s);
  if (model > 1.05 * r.stats.median)
    note +=
        "; measured faster than this roofline: its bytes came from a cache, or its work is "
        "declared wrong";
  r.notes["roofline"] = note;
}

}  // namespace

// A measurement above the ceiling it is measured against is suspect: either the
// calibration was disturbed (another program ran while it measured) or the work the
// experiment declares is not the work it does. Said in the record's notes, which the report
// shows beside the record. The calibrated peak FLOP/s bounds every record the CPU did; the
// memory bandwidth only those that declare it as their ceiling (data in cache may go faster).
// Work timed on a device is not the CPU's: its own roofline bounds it (Trial::bound,
// judge_roofline), so the CPU's calibration says nothing about it.
// The same holds of a scaling speedup above the CPUs the run had (the same configuration on
// fewer workers as its baseline; against another variant a speedup may be anything): p CPUs
// cannot do more than p times one CPU's work in the same time, so such a figure was timed wrongly
// (threads that started late timing themselves) or its baseline was slow. Caches that add up across
// cores can give a little more than p; kSpeedupTolerance leaves that margin and the two medians'
// noise. An MPI experiment's ranks may run on other hosts, whose CPUs this one does not know: not
// checked.
namespace {
void flag_above_ceiling(Record& r, const Calibration& calib, unsigned cpus, bool scaling) {
  constexpr double kTolerance = 1.05;
  // A speedup is a ratio of two medians, each with its own noise: twice the calibration's margin.
  constexpr double kSpeedupTolerance = 1.1;
  r.notes.erase("above_ceiling");  // derived again under another calibration
  if (r.timed_on_a_device()) return;
  if (const auto s = r.derived.find("speedup"); s != r.derived.end() && cpus > 0 && scaling) {
    const Experiment* e = find_experiment(r.experiment);
    if ((!e || (!e->mpi && e->cpu_bound)) && s->second > kSpeedupTolerance * cpus) {
      r.notes["above_ceiling"] = fmt::format(
          "{:.2f} x the CPUs this run had: a speedup of {:.2f} on {} CPU{} is more than they can "
          "do; the threads were timed from different starts, or the baseline was slow",
          s->second / cpus, s->second, cpus, cpus == 1 ? "" : "s");
      return;
    }
  }
  auto note = [&](double fraction, const char* ceiling) {
    r.notes["above_ceiling"] = fmt::format(
        "{:.2f} x the calibrated {}: the calibration may have been disturbed (another program "
        "running while it measured), or the declared work is wrong",
        fraction, ceiling);
  };
  // The calibrated bandwidth counts bytes as BabelStream does, without the line a store reads
  // before it writes (write-allocate): the best of copy (3 lines on the bus for the 2 counted)
  // and triad (4 for 3). A kernel that only reads moves what it counts, so a correct one may
  // reach 4/3 to 3/2 of the calibrated figure (which of the two set it), more where reads alone
  // stream faster (McCalpin's STREAM notes on counting); above 1.5x, with the same 5% margin,
  // it is suspect. A kernel that writes is held to the same margin (Work does not say which).
  constexpr double kReadOnlyBandwidth = 1.5;
  const Experiment* ex = find_experiment(r.experiment);
  const bool bandwidth = !ex || ex->ceiling == Ceiling::mem_bandwidth;
  if (auto it = r.derived.find("fraction_of_ceiling");
      it != r.derived.end() && it->second > kTolerance * (bandwidth ? kReadOnlyBandwidth : 1.0)) {
    note(it->second, bandwidth ? "memory bandwidth (a kernel that only reads may reach 1.33-1.5x "
                                 "it under its byte counting; above 1.5x it is suspect)"
                               : "peak FLOP/s");
  } else if (auto f = r.derived.find("flops_per_s"); f != r.derived.end()) {
    // A record that measured the peak of its own arithmetic (metric own_peak_flops: bfloat16's
    // VDPBF16PS, twice float32's FMA) is held to that, not to the calibrated float32 peak.
    if (const double own = own_peak_flops(r); own > 0) {
      if (f->second > kTolerance * own)
        r.notes["above_ceiling"] = fmt::format(
            "{:.2f} x the peak of its own arithmetic measured beside it (own_peak_flops): the "
            "peak's measurement was disturbed, or the declared work is wrong",
            f->second / own);
    } else if (calib.peak_flops > 0 && f->second > kTolerance * calib.peak_flops) {
      note(f->second / calib.peak_flops, "peak FLOP/s");
    }
  }
}
}  // namespace

void derive_metrics(std::vector<Record>& records, const Calibration& calib, unsigned cpus) {
  for (Record& r : records) {
    if (!r.valid || r.stats.n == 0) continue;
    const Experiment* e = find_experiment(r.experiment);
    bool scaling = false;  // the speedup is this configuration's against fewer of its workers
    if (e && !e->baseline.empty()) {
      Params base = r.params;
      for (const auto& [k, v] : e->baseline) base[k] = v;
      base = applicable_params(*e, std::move(base));
      auto it = std::find_if(records.begin(), records.end(), [&](const Record& b) {
        return b.experiment == r.experiment && b.params == base && b.valid && b.stats.n > 0;
      });
      if (it != records.end() && r.stats.median > 0 && it->stats.median > 0) {
        // Speedup is the ratio of throughputs when the work is declared: for strong scaling
        // (same work) that equals the ratio of times; for weak scaling (work grows with the
        // workers) it is the only meaningful one.
        double s = r.lower_is_better ? it->stats.median / r.stats.median
                                     : r.stats.median / it->stats.median;
        for (const char* rate : {"items_per_s", "flops_per_s", "bytes_per_s"}) {
          auto a = r.derived.find(rate), b = it->derived.find(rate);
          if (a != r.derived.end() && b != it->derived.end() && b->second > 0) {
            s = a->second / b->second;
            break;
          }
        }
        r.derived["speedup"] = s;
        const double p = workers(r.params, e->scaling_axis), p0 = workers(base, e->scaling_axis);
        scaling =
            p > p0 && p0 > 0 && std::all_of(r.params.begin(), r.params.end(), [&](const auto& kv) {
              const auto b = base.find(kv.first);
              return kv.first == e->scaling_axis || (b != base.end() && b->second == kv.second);
            });
        if (p > 0 && p0 > 0 && p != p0) {
          r.derived["efficiency"] = s * p0 / p;
          if (p0 == 1 && p > 1) r.derived["karp_flatt"] = karp_flatt(s, p);
        }
      }
    }
    if (e && e->ceiling == Ceiling::mem_bandwidth && calib.mem_bandwidth_bytes_per_s > 0 &&
        r.derived.count("bytes_per_s"))
      r.derived["fraction_of_ceiling"] = r.derived["bytes_per_s"] / calib.mem_bandwidth_bytes_per_s;
    if (e && e->ceiling == Ceiling::peak_flops && calib.peak_flops > 0 &&
        r.derived.count("flops_per_s"))
      r.derived["fraction_of_ceiling"] = r.derived["flops_per_s"] / calib.peak_flops;
    if (e && e->ceiling == Ceiling::peak_flops_per_worker && calib.peak_flops_1core > 0 &&
        r.derived.count("flops_per_s")) {
      const double p = std::max(1.0, workers(r.params, e->scaling_axis));
      double peak = calib.peak_flops > 0 ? std::min(p * calib.peak_flops_1core, calib.peak_flops)
                                         : p * calib.peak_flops_1core;
      // A record that measured the peak of its own arithmetic on its workers (own_peak_flops:
      // bfloat16's VDPBF16PS) is a fraction of that instead.
      if (const double own = own_peak_flops(r); own > 0) peak = own;
      r.derived["fraction_of_ceiling"] = r.derived["flops_per_s"] / peak;
    }
    if (e && e->ceiling == Ceiling::roofline_per_worker)
      derive_cpu_roofline(r, calib, std::max(1.0, workers(r.params, e->scaling_axis)));
    // A speedup derived before (a file read back) is judged as one against fewer workers.
    if (!e || e->baseline.empty()) scaling = r.derived.count("speedup") > 0;
    flag_above_ceiling(r, calib, cpus, scaling);
  }
}

double roofline_time(const Work& w, const Trial::Bound& b) {
  double t = 0;
  if (w.bytes > 0 && b.bytes_per_s > 0) t = w.bytes / b.bytes_per_s;
  if (w.flops > 0 && b.flops_per_s > 0) t = std::max(t, w.flops / b.flops_per_s);
  return t;
}

void judge_roofline(Record& r, const Work& w, const Trial::Bound& b) {
  const double model = roofline_time(w, b);
  if (model <= 0 || r.stats.n == 0) return;
  if (!b.source.empty()) r.notes["roofline"] = b.source;
  r.derived["roofline_time_s"] = model;
  if (r.stats.median > 0) r.derived["fraction_of_roofline"] = model / r.stats.median;
  const double fastest = r.stats.min;
  if (r.valid && fastest * kImpossibleMargin < model) {
    r.valid = false;
    r.validation = fmt::format(
        "impossible: its fastest repetition took {:.4g} s, {:.2f} x faster than the roofline "
        "allows ({:.4g} s for {:.4g} bytes and {:.4g} FLOPs at {}): a timer that did not wait "
        "for the work, work declared wrong, or an input left in a cache",
        fastest, model / fastest, model, w.bytes, w.flops,
        b.source.empty() ? std::string("the declared rates") : b.source);
  }
}

}  // namespace concurdl
