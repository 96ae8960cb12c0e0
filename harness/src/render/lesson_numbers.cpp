// Lesson numbers filled in from committed runs (lesson_numbers.hpp).
#include "concurdl/harness/lesson_numbers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace concurdl {

namespace {

constexpr std::string_view kOpen = "<!-- n ";
constexpr std::string_view kOpenEnd = " -->";
constexpr std::string_view kClose = "<!-- /n -->";

[[noreturn]] void fail(std::size_t line, const std::string& what) {
  throw std::runtime_error(fmt::format("line {}: {}", line, what));
}

std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

Params parse_select(const std::string& text, std::size_t line) {
  Params p;
  if (text == "-") return p;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      fail(line, fmt::format("'{}' is not key=value in '{}'", item, text));
    p[item.substr(0, eq)] = item.substr(eq + 1);
    pos = end + 1;
  }
  return p;
}

bool known_format(const std::string& f) {
  static constexpr std::array<std::string_view, 17> kFormats = {"x1", "x2", "f0", "f1", "f2", "f3",
                                                                "f4", "g2", "g3", "g4", "p0", "p1",
                                                                "s2", "s3", "t2", "t3", "t4"};
  return std::find(kFormats.begin(), kFormats.end(), f) != kFormats.end();
}

std::optional<double> calibration_field(const Calibration& c, const std::string& field) {
  if (field == "mem_bandwidth_bytes_per_s") return c.mem_bandwidth_bytes_per_s;
  if (field == "peak_flops") return c.peak_flops;
  if (field == "peak_flops_1core") return c.peak_flops_1core;
  if (field == "thread_copy_bytes_per_s") return c.thread_copy_bytes_per_s;
  if (field == "rank_alpha_s") return c.rank_alpha_s;
  if (field == "rank_beta_s_per_byte") return c.rank_beta_s_per_byte;
  return std::nullopt;
}

// The field of one record and whether lower is better for it.
std::optional<double> record_field(const Record& r, const std::string& field, bool& lower) {
  lower = r.lower_is_better;
  if (field == "median") return r.stats.median;
  if (field == "min") return r.stats.min;
  if (field == "max") return r.stats.max;
  if (field == "ci95_lo") return r.stats.ci95_lo;
  if (field == "ci95_hi") return r.stats.ci95_hi;
  if (auto m = r.metrics.find(field); m != r.metrics.end()) {
    lower = m->second.lower_is_better;
    return m->second.stats.median;
  }
  // A named metric's smallest or largest repetition: "forbidden_per_million.max".
  if (const std::size_t dot = field.rfind('.'); dot != std::string::npos) {
    const std::string which = field.substr(dot + 1);
    if (auto m = r.metrics.find(field.substr(0, dot));
        m != r.metrics.end() && (which == "min" || which == "max")) {
      lower = m->second.lower_is_better;
      return which == "min" ? m->second.stats.min : m->second.stats.max;
    }
  }
  if (auto d = r.derived.find(field); d != r.derived.end()) {
    lower = false;
    return d->second;
  }
  return std::nullopt;
}

const Record& one_record(const RunFile& run, const std::string& experiment, const Params& select,
                         const std::string& run_name) {
  const Record* found = nullptr;
  int count = 0;
  for (const Record& r : run.records)
    if (r.experiment == experiment && params_match(r.params, select)) {
      found = &r;
      ++count;
    }
  if (count == 0)
    throw std::runtime_error(
        fmt::format("{} has no record of {} with {{{}}}", run_name, experiment, describe(select)));
  if (count > 1)
    throw std::runtime_error(
        fmt::format("{} has {} records of {} with {{{}}}: name more "
                    "parameters",
                    run_name, count, experiment, describe(select)));
  return *found;
}

// The peer of `r`: the record whose every parameter is the `versus` value where one is given,
// else r's own (a parameter r has and the peer lacks is an axis that does not apply to it).
const Record& peer_record(const RunFile& run, const Record& r, const Params& versus,
                          const std::string& run_name) {
  const Record* found = nullptr;
  int count = 0;
  for (const Record& q : run.records) {
    if (q.experiment != r.experiment || !params_match(q.params, versus)) continue;
    const bool same_elsewhere = std::all_of(q.params.begin(), q.params.end(), [&](const auto& kv) {
      if (versus.count(kv.first)) return true;
      auto it = r.params.find(kv.first);
      return it != r.params.end() && it->second == kv.second;
    });
    if (same_elsewhere) {
      found = &q;
      ++count;
    }
  }
  if (count != 1)
    throw std::runtime_error(fmt::format("{} has {} peers of {{{}}} with {{{}}}", run_name, count,
                                         describe(r.params), describe(versus)));
  return *found;
}

// v rounded to `digits` significant digits, and as text with no exponent.
double significant_value(double v, int digits) {
  if (v == 0) return 0;
  int magnitude = static_cast<int>(std::floor(std::log10(std::abs(v))));
  if (std::abs(v) >= std::pow(10.0, magnitude + 1) * (1 - 0.5 * std::pow(10.0, -digits)))
    ++magnitude;  // 0.9997 at 3 digits rounds to 1.00: the magnitude of the rounded value
  const double step = std::pow(10.0, magnitude + 1 - digits);
  return std::round(v / step) * step;
}

std::string significant(double v, int digits) {
  const double r = significant_value(v, digits);
  const int magnitude = r == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::abs(r))));
  return fmt::format("{:.{}f}", r, std::max(0, digits - 1 - magnitude));
}

std::string with_unit(std::string number, const std::string& unit) {
  return unit.empty() ? number : number + " " + unit;
}

}  // namespace

std::vector<NumberMarker> parse_number_markers(const std::string& text) {
  std::vector<NumberMarker> out;
  std::size_t pos = 0;
  while ((pos = text.find(kOpen, pos)) != std::string::npos) {
    NumberMarker m;
    m.line = 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + pos, '\n'));
    const std::size_t body = pos + kOpen.size();
    const std::size_t body_end = text.find(kOpenEnd, body);
    if (body_end == std::string::npos || text.find('\n', body) < body_end)
      fail(m.line, "a number marker opens without ' -->' on its line");
    const std::vector<std::string> t = tokens(text.substr(body, body_end - body));
    if (t.size() < 4) fail(m.line, "a number marker needs EXPERIMENT SELECT FIELD FORMAT");
    m.experiment = t[0];
    m.select = parse_select(t[1], m.line);
    m.field = t[2];
    m.format = t[3];
    if (!known_format(m.format)) fail(m.line, fmt::format("unknown format '{}'", m.format));
    for (std::size_t i = 4; i < t.size(); ++i) {
      const std::string& opt = t[i];
      if (opt.rfind("vs:", 0) == 0) {
        m.versus = parse_select(opt.substr(3), m.line);
      } else if (opt.rfind("run:", 0) == 0) {
        m.run = opt.substr(4);
      } else if (opt == "inv") {
        m.invert = true;
      } else if (opt.rfind("unit:", 0) == 0) {
        m.unit = opt.substr(5);
      } else {
        fail(m.line, fmt::format("unknown option '{}' (vs:, run:, unit:, inv)", opt));
      }
    }
    m.text_begin = body_end + kOpenEnd.size();
    m.text_end = text.find(kClose, m.text_begin);
    if (m.text_end == std::string::npos || text.find(kOpen, m.text_begin) < m.text_end)
      fail(m.line, "a number marker is not closed by <!-- /n -->");
    m.text = text.substr(m.text_begin, m.text_end - m.text_begin);
    pos = m.text_end + kClose.size();
    out.push_back(std::move(m));
  }
  return out;
}

RunLibrary::RunLibrary(std::filesystem::path reference_dir, std::string default_run)
    : dir_(std::move(reference_dir)), default_run_(std::move(default_run)) {}

const RunFile& RunLibrary::get(const std::string& name) {
  for (const auto& [n, run] : loaded_)
    if (n == name) return run;
  try {
    loaded_.emplace_back(name, load_run(dir_ / name));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("run '{}' cannot be loaded: {}", name, e.what()));
  }
  return loaded_.back().second;
}

namespace {

double unformatted_value(const NumberMarker& m, RunLibrary& runs) {
  const std::string name = m.run.empty() ? runs.default_run() : m.run;
  const RunFile& run = runs.get(name);
  if (m.experiment == "calibration") {
    const auto v = calibration_field(run.calibration, m.field);
    if (!v || *v == 0)
      throw std::runtime_error(fmt::format("{} has no calibrated {}", name, m.field));
    return *v;
  }
  const Record& r = one_record(run, m.experiment, m.select, name);
  if (!r.valid)
    throw std::runtime_error(
        fmt::format("{}: {{{}}} is invalid: {}", name, describe(r.params), r.validation));
  bool lower = false;
  const auto v = record_field(r, m.field, lower);
  if (!v)
    throw std::runtime_error(
        fmt::format("{}: {{{}}} has no field '{}'", name, describe(r.params), m.field));
  if (m.versus.empty()) return *v;
  const Record& q = peer_record(run, r, m.versus, name);
  bool peer_lower = false;
  const auto pv = record_field(q, m.field, peer_lower);
  if (!pv || *pv == 0 || *v == 0)
    throw std::runtime_error(
        fmt::format("{}: {{{}}} has no usable '{}'", name, describe(q.params), m.field));
  return lower ? *pv / *v : *v / *pv;
}

}  // namespace

double marker_value(const NumberMarker& m, RunLibrary& runs) {
  const double v = unformatted_value(m, runs);
  if (!m.invert) return v;
  if (v == 0) throw std::runtime_error("inv of a zero value");
  return 1.0 / v;
}

std::string format_number(double v, const std::string& format, const std::string& unit) {
  if (!std::isfinite(v)) throw std::runtime_error("the value is not a finite number");
  const char kind = format.at(0);
  const int digits = format.at(1) - '0';
  switch (kind) {
    case 'x':
      return with_unit(fmt::format("{:.{}f}×", v, digits), unit);
    case 'f':
      return with_unit(fmt::format("{:.{}f}", v, digits), unit);
    case 'g':
      return with_unit(significant(v, digits), unit);
    case 'p':
      return fmt::format("{:.{}f}%", 100.0 * v, digits);
    case 's': {
      static constexpr std::array<const char*, 5> kPrefix = {"", "K", "M", "G", "T"};
      std::size_t i = 0;
      double scaled = v;
      while (std::abs(scaled) >= 999.5 && i + 1 < kPrefix.size()) {
        scaled /= 1000.0;
        ++i;
      }
      if (std::abs(significant_value(scaled, digits)) >= 1000 && i + 1 < kPrefix.size()) {
        scaled /= 1000.0;  // 999.7K at 3 digits is 1.00M
        ++i;
      }
      const std::string num = significant(scaled, digits);
      return unit.empty() ? num + kPrefix[i] : num + " " + kPrefix[i] + unit;
    }
    case 't': {
      static constexpr std::array<std::pair<double, const char*>, 4> kScale = {
          {{1.0, "s"}, {1e-3, "ms"}, {1e-6, "µs"}, {1e-9, "ns"}}};
      for (const auto& [scale, name] : kScale)
        if (std::abs(v) >= scale * 0.9995 || scale == 1e-9)
          return significant(v / scale, digits) + " " + name;
      break;
    }
    default:
      break;
  }
  throw std::runtime_error(fmt::format("unknown format '{}'", format));
}

std::string regenerate_numbers(const std::string& text, RunLibrary& runs) {
  std::string out;
  std::size_t copied = 0;
  for (const NumberMarker& m : parse_number_markers(text)) {
    out += text.substr(copied, m.text_begin - copied);
    out += format_number(marker_value(m, runs), m.format, m.unit);
    copied = m.text_end;
  }
  return out + text.substr(copied);
}

std::vector<std::string> check_numbers(const std::filesystem::path& lesson, RunLibrary& runs,
                                       std::size_t& count) {
  count = 0;
  std::ifstream in(lesson);
  if (!in) return {lesson.string() + ": cannot be read"};
  std::stringstream buf;
  buf << in.rdbuf();
  std::vector<NumberMarker> markers;
  try {
    markers = parse_number_markers(buf.str());
  } catch (const std::exception& e) {
    return {fmt::format("{}: {}", lesson.string(), e.what())};
  }
  count = markers.size();
  std::vector<std::string> problems;
  for (const NumberMarker& m : markers) {
    try {
      const std::string want = format_number(marker_value(m, runs), m.format, m.unit);
      if (m.text != want)
        problems.push_back(fmt::format("{}:{}: the lesson says '{}', the run says '{}'",
                                       lesson.string(), m.line, m.text, want));
    } catch (const std::exception& e) {
      problems.push_back(fmt::format("{}:{}: {}", lesson.string(), m.line, e.what()));
    }
  }
  return problems;
}

}  // namespace concurdl
