// Sweep expansion: every configuration of the selected experiments under the run's options,
// checked before anything runs; and the progress line.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/runner.hpp"

namespace concurdl {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The smoke profile: every quick value of a text axis (each variant's glue runs once), the
// smallest quick value of a numeric one, unless the axis names its own.
std::vector<std::string> smoke_values(const Axis& a) {
  if (!a.smoke.empty()) return a.smoke;
  const std::vector<std::string>& q = a.quick.empty() ? a.values : a.quick;
  if (a.kind == AxisKind::text) return q;
  auto number = [&](const std::string& v) {
    return a.kind == AxisKind::real
               ? parse_real(a.name, v)
               : static_cast<double>(a.kind == AxisKind::integer ? parse_integer(a.name, v)
                                                                 : parse_size(a.name, v));
  };
  return {*std::min_element(q.begin(), q.end(), [&](const std::string& x, const std::string& y) {
    return number(x) < number(y);
  })};
}

std::vector<std::string> axis_values(const Axis& a, Profile p) {
  if (p == Profile::smoke) return smoke_values(a);
  return p == Profile::quick && !a.quick.empty() ? a.quick : a.values;
}

}  // namespace

int default_repetitions(Profile p) {
  switch (p) {
    case Profile::smoke:
      return 1;
    case Profile::quick:
      return 5;
    case Profile::full:
      return 10;
  }
  return 5;
}

std::vector<Config> expand(const std::vector<const Experiment*>& selected, const RunOptions& opt) {
  std::set<std::string> used_keys;
  std::vector<Config> out;
  for (const Experiment* e : selected) {
    if (!e->microbenchmark_filter.empty()) {  // one entry; the bridge runs the whole set
      out.push_back({e, {}});
      continue;
    }
    std::vector<Params> partial{Params{}};
    for (const Axis& a : e->axes) {
      std::vector<std::string> values = axis_values(a, opt.profile);
      if (auto it = opt.set.find(a.name); it != opt.set.end()) {
        values = it->second;
        used_keys.insert(a.name);
      }
      if (a.name == "threads" && opt.threads) values = *opt.threads;
      if (a.name == "ranks" && opt.ranks) values = *opt.ranks;
      for (const auto& v : values) check_axis_value(a, v);
      std::vector<Params> next;
      for (const Params& p : partial)
        for (const auto& v : values) {
          Params q = p;
          q[a.name] = v;
          next.push_back(std::move(q));
        }
      partial = std::move(next);
    }
    // Inapplicable axes are dropped, and the configurations that then coincide measured once.
    std::vector<Params> kept;
    for (auto& p : partial) {
      Params q = applicable_params(*e, std::move(p));
      if (std::find(kept.begin(), kept.end(), q) == kept.end()) kept.push_back(std::move(q));
    }
    for (auto& p : kept) out.push_back({e, std::move(p)});
  }
  for (const auto& [key, values] : opt.set)
    if (!used_keys.count(key))
      throw UsageError(
          fmt::format("--set {}: no selected experiment has a parameter '{}'", key, key));
  return out;
}

Progress::Progress(std::size_t total, bool enabled)
    : total_(total), enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1), start_(now_s()) {}

Progress::~Progress() { done(); }

void Progress::step(const std::string& what) {
  ++current_;
  if (!enabled_) return;
  const double t = now_s();
  const double elapsed = t - start_;
  // On a pipe or a log file: a line every few seconds, not one per configuration.
  if (!tty_ && t - last_print_ < 3.0 && current_ != 1 && current_ != total_) return;
  last_print_ = t;
  std::string eta = "?";
  if (current_ > 1) {
    const double per = elapsed / static_cast<double>(current_ - 1);
    eta = fmt::format("{:.0f}s", per * static_cast<double>(total_ - current_ + 1));
  }
  const std::string line =
      fmt::format("[{}/{}] {:.0f}s elapsed, ETA {}  {}", current_, total_, elapsed, eta, what);
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s", line.substr(0, 160).c_str());
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void Progress::done() {
  if (enabled_ && tty_ && current_ > 0) std::fprintf(stderr, "\n");
  enabled_ = false;
}

}  // namespace concurdl
