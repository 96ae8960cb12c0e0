// Calibration from its records (calibrate.hpp): the figures the experiments' ceilings use (the
// best rates, the 1-core peak, the ping-pong's alpha and beta), the takes that must agree, and
// what the runner noted on the calibration records (unstable, noisy) or what the figures
// themselves show (cores_short). The measuring trials are in calibrate.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/experiment.hpp"

namespace concurdl {

namespace {

double best(const std::vector<Record>& records, const std::string& id, const char* metric,
            nlohmann::json* per_thread = nullptr) {
  double b = 0;
  for (const Record& r : records) {
    if (r.experiment != id || !r.valid) continue;
    auto it = r.derived.find(metric);
    if (it == r.derived.end()) continue;
    b = std::max(b, it->second);
    if (per_thread) {
      auto th = r.params.find("threads");
      (*per_thread)[th != r.params.end() ? th->second : describe(r.params)] = it->second;
    }
  }
  return b;
}

// The FMA loop keeps each thread on its own core's FMA units, and the calibration measures it
// only up to the cores there are: T threads should reach about T times one thread's rate. Far
// below (kCoresShortRatio) the threads did not get a core each while it ran: on a virtual
// machine, the host placing two vCPUs on one physical core's FMA units (seen on the Zen 5 guest:
// 2 threads at 1.00x one, for stretches of tens to hundreds of milliseconds); or another program
// on the cores. Ceilings and fractions at those thread counts are then against a peak the code
// never had, and read high. One line per such count.
constexpr double kCoresShortRatio = 0.75;
nlohmann::json cores_short(const nlohmann::json& fma_by_threads, double one) {
  nlohmann::json lines = nlohmann::json::array();
  if (!(one > 0)) return lines;
  for (const auto& [key, value] : fma_by_threads.items()) {
    int threads = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), threads);
    if (ec != std::errc{} || end != key.data() + key.size() || threads < 2 || !value.is_number())
      continue;
    const double ratio = value.get<double>() / one;
    if (ratio < kCoresShortRatio * threads)
      lines.push_back(fmt::format(
          "calibrate/fma_peak threads={}: {:.2f}x one thread's FLOP/s, not about {}x: these "
          "threads did not get a core each while it ran (a host placing vCPUs on shared cores, "
          "or another program); fractions of the peak at {} threads read high",
          threads, ratio, threads, threads));
  }
  return lines;
}

}  // namespace

bool takes_agree(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > tolerance * std::max(std::fabs(a[i]), std::fabs(b[i])))
      return false;
  return true;
}

Takes agreeing_takes(const std::function<std::vector<double>()>& take, double tolerance,
                     int max_takes) {
  Takes t;
  for (int i = 0; i < std::max(1, max_takes); ++i) {
    t.figures.push_back(take());
    if (t.figures.back().empty()) {
      t.agreed = true;
      break;
    }
    const std::size_t n = t.figures.size();
    if (n >= 2 && takes_agree(t.figures[n - 2], t.figures[n - 1], tolerance)) {
      t.agreed = true;
      break;
    }
  }
  return t;
}

std::vector<std::pair<std::string, double>> calibration_figures(const std::vector<Record>& group) {
  if (group.empty()) return {};
  const Experiment* e = find_experiment(group.front().experiment);
  if (!e || e->chapter != kCalibrationChapter || e->ceiling == Ceiling::none) return {};
  const char* rate = e->ceiling == Ceiling::peak_flops ? "flops_per_s" : "bytes_per_s";
  double best = 0, one = 0;
  for (const Record& r : group) {
    auto it = r.derived.find(rate);
    if (!r.valid || it == r.derived.end()) continue;
    best = std::max(best, it->second);
    if (auto th = r.params.find("threads"); th != r.params.end() && th->second == "1")
      one = it->second;
  }
  if (e->ceiling == Ceiling::mem_bandwidth) return {{"memory bandwidth", best}};
  if (group.size() > 1) return {{"peak FLOP/s, all cores", best}, {"peak FLOP/s, 1 core", one}};
  return {{"peak FLOP/s", best}};
}

Calibration calibration_from_records(const std::vector<Record>& records) {
  Calibration c;
  nlohmann::json copy = nlohmann::json::object(), triad = nlohmann::json::object(),
                 fma = nlohmann::json::object();
  c.mem_bandwidth_bytes_per_s =
      std::max(best(records, "calibrate/mem_copy", "bytes_per_s", &copy),
               best(records, "calibrate/mem_triad", "bytes_per_s", &triad));
  c.peak_flops = best(records, "calibrate/fma_peak", "flops_per_s", &fma);
  for (const Record& r : records)
    if (r.experiment == "calibrate/fma_peak" && r.valid && r.params.count("threads") &&
        r.params.at("threads") == "1" && r.derived.count("flops_per_s"))
      c.peak_flops_1core = r.derived.at("flops_per_s");
  c.thread_copy_bytes_per_s = best(records, "calibrate/thread_copy", "bytes_per_s");
  // alpha: the one-way time of the smallest message; beta: the least-squares slope of the
  // one-way time over the sizes with the intercept held at alpha (large messages dominate it,
  // as they should: beta is the inverse of the bandwidth they reach).
  double smallest = 0, sxx = 0, sxy = 0;
  std::vector<std::pair<double, double>> pingpong;  // bytes, one-way seconds
  for (const Record& r : records)
    if (r.experiment == "calibrate/rank_pingpong" && r.valid && r.derived.count("one_way_s"))
      pingpong.emplace_back(static_cast<double>(param_int(r.params, "bytes")),
                            r.derived.at("one_way_s"));
  std::sort(pingpong.begin(), pingpong.end());
  if (!pingpong.empty()) {
    smallest = pingpong.front().second;
    for (const auto& [x, t] : pingpong) {
      sxx += x * x;
      sxy += x * (t - smallest);
    }
    c.rank_alpha_s = smallest;
    c.rank_beta_s_per_byte = sxx > 0 ? std::max(0.0, sxy / sxx) : 0;
  }
  c.detail = {{"mem_copy_bytes_per_s_by_threads", copy},
              {"mem_triad_bytes_per_s_by_threads", triad},
              {"fma_flops_per_s_by_threads", fma},
              {"array_bytes", calibration_array_elements() * sizeof(double)},
              {"last_level_cache_bytes", last_level_cache_bytes()}};
  // What the runner noted on the calibration records: figures whose takes never agreed, and
  // configurations measured while other processes ran (once each, in the records' order).
  nlohmann::json unstable = nlohmann::json::array(), noisy = nlohmann::json::array();
  for (const Record& r : records) {
    const Experiment* e = find_experiment(r.experiment);
    if (!e || e->chapter != kCalibrationChapter) continue;
    if (auto it = r.notes.find("unstable"); it != r.notes.end()) {
      const std::string line = r.experiment + ": " + it->second;
      if (std::find(unstable.begin(), unstable.end(), line) == unstable.end())
        unstable.push_back(line);
    }
    if (auto it = r.notes.find("noisy"); it != r.notes.end())
      noisy.push_back(fmt::format("{} {}: {}", r.experiment, describe(r.params), it->second));
  }
  if (!unstable.empty()) c.detail["unstable"] = unstable;
  if (!noisy.empty()) c.detail["noisy"] = noisy;
  if (nlohmann::json short_lines = cores_short(fma, c.peak_flops_1core); !short_lines.empty())
    c.detail["cores_short"] = short_lines;
  return c;
}

}  // namespace concurdl
