// ch05/dp_train's projection of weak scaling to 1024 workers on other links
// (train_projection.hpp): one worker's step, read from the run's own record of ours at 1 rank,
// plus a ring all-reduce of the gradient (cost_model.hpp).
#include "train_projection.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <vector>

#include "concurdl/dp/cost_model.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::dp::train_projection {

namespace {

// The bytes one step all-reduces: every gradient of the MLP the trainer builds (784-256-128-10:
// 235146 floats).
double gradient_bytes() {
  static const double bytes =
      static_cast<double>(nn::Mlp(nn::TrainConfig{}.spec, 1).gradients().size_bytes());
  return bytes;
}

bool has(const Params& p, const std::string& key, const std::string& value) {
  const auto it = p.find(key);
  return it != p.end() && it->second == value;
}

// One worker's step, from the run's own record of ours at 1 rank, weak scaling: 64 rows / its
// samples/s, which is everything a worker does besides communicating (gathering the batch,
// forward, backward, the optimiser step); step_compute_s, forward and backward alone, is
// kept for the note. nullopt where the run has no such record.
struct OneRank {
  double step_s = 0, compute_s = 0;
};
std::optional<OneRank> one_rank_step(const ModelPoint& m) {
  for (const Record* r : m.run_records) {
    if (!has(r->params, "trainer", "ours") || !has(r->params, "scaling", "weak") ||
        !has(r->params, "ranks", "1"))
      continue;
    const auto rate = r->derived.find("items_per_s");
    if (rate == r->derived.end() || !(rate->second > 0)) continue;
    OneRank o{.step_s = static_cast<double>(kWeakRows) / rate->second};
    if (const auto c = r->metrics.find("step_compute_s"); c != r->metrics.end())
      o.compute_s = c->second.stats.median;
    return o;
  }
  return std::nullopt;
}

std::string seconds_text(double s) {
  return s < 1e-3 ? fmt::format("{:.3g} us", s * 1e6) : fmt::format("{:.3g} ms", s * 1e3);
}
std::string rate_text(double r) {
  return r < 1e6 ? fmt::format("{:.3g}K", r / 1e3) : fmt::format("{:.3g}M", r / 1e6);
}

std::vector<double> projection_workers() {
  std::vector<double> xs;
  for (double p = 1; p <= 1024; p *= 2) xs.push_back(p);
  return xs;
}

// Samples/s of p workers at 64 rows each: 64p / step time (cost_model.hpp's dp_step_time).
std::optional<double> projected_rate(const ModelPoint& m, const Link& link, bool overlap) {
  const auto one = one_rank_step(m);
  if (!one) return std::nullopt;
  return m.x * static_cast<double>(kWeakRows) /
         dp_step_time(one->step_s, m.x, gradient_bytes(), link, overlap);
}

// What every curve of the projection was drawn with: one worker's step, the gradient, the
// formulas; and where no communication at all would take 1024 workers (p times one rank, not
// drawn: the perfectly overlapped curves follow it until the all-reduce outlasts the step).
std::string projection_note(const ModelPoint& m) {
  const auto one = one_rank_step(m);
  if (!one) return "";
  return fmt::format(
      "one worker's step t1 = {} (64 rows / its samples/s; forward and backward, "
      "step_compute_s, are {} of it); gradient {:.0f} floats = {:.0f} bytes; ring all-reduce "
      "t_ar(p) = 2(p-1) alpha + 2(p-1)/p bytes beta; samples/s = 64p / step, step = t1 + "
      "t_ar(p) after backward, max(t1, t_ar(p)) perfectly overlapped; without communication, "
      "1024 workers would train {} samples/s",
      seconds_text(one->step_s), seconds_text(one->compute_s), gradient_bytes() / sizeof(float),
      gradient_bytes(), rate_text(1024.0 * static_cast<double>(kWeakRows) / one->step_s));
}

}  // namespace

// The models of the projection figure: the ring on each link of cost_model.hpp, after backward
// and perfectly overlapped. Each note says the values it was drawn with at 2, 64 and 1024
// workers; the first's also what they all share.
std::vector<Model> projection_models() {
  std::vector<Model> models;
  for (const Link* link : {&kLink25GBs, &kLink100GbE})
    for (const bool overlap : {false, true}) {
      Model model{
          .label = fmt::format("ring all-reduce on {}, {}", link->name,
                               overlap ? "perfectly overlapped" : "after backward"),
          .y = [link, overlap](const ModelPoint& m) { return projected_rate(m, *link, overlap); },
          .xs = projection_workers()};
      const bool first = models.empty();
      model.note = [link, overlap, first](const ModelPoint& m) -> std::string {
        std::vector<std::string> at;
        for (const double p : {2.0, 64.0, 1024.0}) {
          const auto rate =
              projected_rate(ModelPoint{p, {}, m.calibration, m.run_records}, *link, overlap);
          if (!rate) return "";
          at.push_back(fmt::format(
              "p = {:.0f}: t_ar {}, {} samples/s", p,
              seconds_text(allreduce_time("v4_ring", p, gradient_bytes(), *link).value_or(0)),
              rate_text(*rate)));
        }
        return fmt::format("{}{}", first ? projection_note(m) + ". " : "", fmt::join(at, "; "));
      };
      models.push_back(std::move(model));
    }
  return models;
}

}  // namespace concurdl::dp::train_projection
