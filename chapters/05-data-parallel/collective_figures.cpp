// The α–β fits of chapter 05's all-reduce runs and the figures drawn from them: busbw and time
// against size, and the projection to 1024 ranks (collectives.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "concurdl/dp/cost_model.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl::dp::collectives {

// --- the α–β fits and their projection ---------------------------------------------------------

// Per-operation times of one algorithm at `ranks` ranks, out of place, over every size of the
// run; then the line through them (fit_time_vs_bytes: a from the smallest, b from the largest).
std::optional<LineFit> fit_of(const ModelPoint& m, const std::string& algorithm, int ranks) {
  std::vector<double> bytes, seconds;
  for (const Record* r : m.run_records)
    if (param_str(r->params, "algorithm") == algorithm && param_int(r->params, "ranks") == ranks &&
        param_str(r->params, "in_place") == "no") {
      bytes.push_back(static_cast<double>(param_int(r->params, "bytes")));
      seconds.push_back(r->stats.median);
    }
  return fit_time_vs_bytes(bytes, seconds);
}

// The smallest rank count measured for the algorithm (2 where it is: no oversubscription).
std::optional<int> fitted_ranks(const ModelPoint& m, const std::string& algorithm) {
  std::optional<int> best;
  for (const Record* r : m.run_records)
    if (param_str(r->params, "algorithm") == algorithm) {
      const int n = static_cast<int>(param_int(r->params, "ranks"));
      if (n >= 2 && (!best || n < *best)) best = n;
    }
  return best;
}

std::optional<Link> machine_link(const ModelPoint& m, const std::string& algorithm) {
  const auto ranks = fitted_ranks(m, algorithm);
  if (!ranks) return std::nullopt;
  const auto fit = fit_of(m, algorithm, *ranks);
  if (!fit) return std::nullopt;
  return link_from_fit(algorithm, *ranks, *fit);
}

std::string link_text(const Link& l) {
  return fmt::format("alpha = {:.3g} us, 1/beta = {:.3g} GB/s", l.alpha_s * 1e6,
                     1e-9 / l.beta_s_per_byte);
}

// Every fit of the run, one line: "v4_ring 2 ranks: a = .. us, b^-1 = .. GB/s; ...".
std::string fits_note(const ModelPoint& m) {
  std::map<std::pair<std::string, int>, bool> seen;
  for (const Record* r : m.run_records)
    seen[{param_str(r->params, "algorithm"), static_cast<int>(param_int(r->params, "ranks"))}] =
        true;
  std::string out;
  for (const auto& [key, unused] : seen) {
    const auto fit = fit_of(m, key.first, key.second);
    if (!fit) continue;
    out +=
        fmt::format("{}{} at {} ranks: {:.3g} us + bytes / ({:.3g} GB/s)", out.empty() ? "" : "; ",
                    key.first, key.second, fit->a * 1e6, fit->b > 0 ? 1e-9 / fit->b : 0.0);
  }
  return out.empty() ? ""
                     : "fits of time = a + b * bytes (out of place; the line through the "
                       "smallest and the largest size, so a is the latency regime's and b the "
                       "bandwidth regime's): " +
                           out;
}

std::vector<double> projection_ranks() {
  std::vector<double> xs;
  for (double p = 2; p <= 1024; p *= 2) xs.push_back(p);
  return xs;
}

// A constant array, not a vector: the experiments' registration (another file, at static
// initialisation) draws these figures, and a vector here might not be built yet.
constexpr const char* kModelled[] = {"v1_naive", "v2_tree", "v3_halving_doubling", "v4_ring"};

// The projection figures: all-reduce time of 64 MiB against ranks, measured points and models.
// "projection": each algorithm with the α and β its own fit implies for this machine's link.
// "projection_links": ring, halving-doubling and tree on two links beyond this machine.
std::vector<Figure> projection_figures(const std::string& backend) {
  const double bytes = static_cast<double>(std::int64_t{64} << 20);
  Figure own{.id = "projection",
             .title = fmt::format("All-reduce of 64 MiB ({}): measured, and alpha-beta models "
                                  "fitted here, to 1024 ranks",
                                  backend),
             .kind = FigureKind::lines,
             .x = "ranks",
             .y = "median",
             .series = "algorithm",
             .where = {{"bytes", kQuoted}, {"in_place", "no"}},
             .log_x = true,
             .log_y = true,
             .y_label = "time per all-reduce (s, log)",
             .x_label = "ranks (log; past the measured ones: model only)"};
  for (const std::string a : kModelled)
    own.models.push_back({.label = a + ", alpha-beta fitted here",
                          .series = a,
                          .y = [a, bytes](const ModelPoint& m) -> std::optional<double> {
                            const auto link = machine_link(m, a);
                            if (!link) return std::nullopt;
                            return allreduce_time(a, m.x, bytes, *link);
                          },
                          .xs = projection_ranks(),
                          .note = [a](const ModelPoint& m) -> std::string {
                            const auto link = machine_link(m, a);
                            const auto ranks = fitted_ranks(m, a);
                            if (!link || !ranks) return "";
                            return fmt::format("link implied by the fit at {} ranks: {}", *ranks,
                                               link_text(*link));
                          }});
  own.models.front().note = [a = std::string(kModelled[0])](const ModelPoint& m) -> std::string {
    std::string line = fits_note(m);
    const auto link = machine_link(m, a);
    const auto ranks = fitted_ranks(m, a);
    if (link && ranks)
      line += fmt::format("{}link implied by the fit at {} ranks: {}", line.empty() ? "" : ". ",
                          *ranks, link_text(*link));
    return line;
  };

  Figure links{.id = "projection_links",
               .title = fmt::format("All-reduce of 64 MiB: ring measured ({}), models on "
                                    "other links to 1024 ranks",
                                    backend),
               .kind = FigureKind::lines,
               .x = "ranks",
               .y = "median",
               .series = "algorithm",
               .where = {{"bytes", kQuoted}, {"in_place", "no"}, {"algorithm", "v4_ring"}},
               .log_x = true,
               .log_y = true,
               .y_label = "time per all-reduce (s, log)",
               .x_label = "ranks (log; past the measured ones: model only)"};
  for (const Link* link : {&kLink25GBs, &kLink100GbE})
    for (std::string a : {"v4_ring", "v3_halving_doubling", "v2_tree"})
      links.models.push_back(
          {.label = fmt::format("{} on {}", a, link->name),
           .series = "v4_ring",
           .y = [a, link,
                 bytes](const ModelPoint& m) { return allreduce_time(a, m.x, bytes, *link); },
           .xs = projection_ranks()});
  return {own, links};
}

// The figures both experiments share: busbw and time against size, in place vs out of place.
// The threads backend's busbw is drawn against the calibrated memory bandwidth; the mpi
// backend's (whose runs calibrate only the ping-pong between ranks) against 1/beta of that
// ping-pong, the bandwidth of one large message between two ranks.
std::vector<Figure> bandwidth_figures(const std::string& backend, bool mpi) {
  std::vector<Figure> f = {
      {.id = "busbw",
       .title =
           fmt::format("All-reduce ({}), out of place: bus bandwidth vs size (dashed: {})", backend,
                       mpi ? "ping-pong bandwidth 1/beta" : "calibrated memory bandwidth"),
       .kind = FigureKind::lines,
       .x = "bytes",
       .y = "bytes_per_s",
       .series = "algorithm",
       .where = {{"in_place", "no"}},
       .log_x = true,
       .log_y = true,
       .overlays = {Overlay::mem_ceiling},
       .y_label = "busbw = algbw x 2(n-1)/n (bytes/s, log)",
       .x_label = "bytes per rank (log)",
       .models = {}},
      {.id = "time",
       .title = fmt::format("All-reduce ({}), out of place: time vs size", backend),
       .kind = FigureKind::lines,
       .x = "bytes",
       .y = "median",
       .series = "algorithm",
       .where = {{"in_place", "no"}},
       .log_x = true,
       .log_y = true,
       .y_label = "time per all-reduce, slowest rank (s, log)",
       .x_label = "bytes per rank (log)"},
      {.id = "in_place",
       .title = fmt::format("All-reduce of 64 MiB ({}): busbw in place vs out of place", backend),
       .kind = FigureKind::bars,
       .x = "algorithm",
       .y = "bytes_per_s",
       .series = "in_place",
       .where = {{"bytes", kQuoted}},
       .y_label = "busbw (bytes/s)"}};
  if (mpi) {
    f.front().overlays.clear();
    f.front().models.push_back(
        {.label = "1/beta of calibrate/rank_pingpong (one message between two ranks)",
         .y = [](const ModelPoint& m) -> std::optional<double> {
           if (!m.calibration || m.calibration->rank_beta_s_per_byte <= 0) return std::nullopt;
           return 1 / m.calibration->rank_beta_s_per_byte;
         }});
  }
  for (Figure& p : projection_figures(backend)) f.push_back(std::move(p));
  return f;
}

}  // namespace concurdl::dp::collectives
