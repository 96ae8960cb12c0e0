// Parameter parsing with errors that name the parameter and the value.
#include "concurdl/core/params.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "concurdl/core/errors.hpp"

namespace concurdl {

bool params_match(const Params& p, const Params& select) {
  for (const auto& [k, v] : select) {
    const auto it = p.find(k);
    if (it == p.end() || it->second != v) return false;
  }
  return true;
}

namespace {

[[noreturn]] void bad(std::string_view name, std::string_view text, std::string_view why) {
  throw UsageError(fmt::format("parameter '{}': '{}' {}", name, text, why));
}

// The binary suffixes of a size, in either case: 1 << 10, 20 or 30; 1 when `c` is none of them.
std::int64_t suffix_scale(char c) {
  switch (c) {
    case 'K':
    case 'k':
      return std::int64_t{1} << 10;
    case 'M':
    case 'm':
      return std::int64_t{1} << 20;
    case 'G':
    case 'g':
      return std::int64_t{1} << 30;
    default:
      return 1;
  }
}

std::int64_t parse_i64(std::string_view name, std::string_view digits, std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range) bad(name, text, "does not fit in 64 bits");
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty())
    bad(name, text, "is not an integer");
  return v;
}

}  // namespace

std::int64_t parse_integer(std::string_view name, std::string_view text) {
  return parse_i64(name, text, text);
}

std::int64_t parse_size(std::string_view name, std::string_view text) {
  std::string_view digits = text;
  const std::int64_t scale = digits.empty() ? 1 : suffix_scale(digits.back());
  if (scale != 1) digits.remove_suffix(1);
  if (!digits.empty() && digits.front() == '-') bad(name, text, "must be at least 1");
  const std::int64_t v = parse_i64(name, digits, text);
  if (v < 1) bad(name, text, "must be at least 1");
  if (v > std::numeric_limits<std::int64_t>::max() / scale)
    bad(name, text, "does not fit in 64 bits");
  return v * scale;
}

double parse_real(std::string_view name, std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || !std::isfinite(v))
    bad(name, text, "is not a finite number");
  return v;
}

void check_value(std::string_view name, AxisKind kind, std::string_view text) {
  switch (kind) {
    case AxisKind::text:
      if (text.empty()) bad(name, text, "is empty");
      break;
    case AxisKind::count: {
      if (!text.empty() && text.find_first_not_of("0123456789-+") == std::string_view::npos) {
        if (parse_integer(name, text) < 1) bad(name, text, "must be at least 1");
      } else {
        bad(name, text, "is not a count (an integer >= 1)");
      }
      break;
    }
    case AxisKind::size:
      parse_size(name, text);
      break;
    case AxisKind::integer:
      parse_integer(name, text);
      break;
    case AxisKind::real:
      parse_real(name, text);
      break;
  }
}

std::optional<double> number_value(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (const std::int64_t scale = suffix_scale(text.back()); scale != 1) {
    // As parse_size: digits, at least 1, and the scaled value within 64 bits.
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(first, last - 1, v);
    if (ec != std::errc() || end != last - 1 || v < 1 ||
        v > std::numeric_limits<std::int64_t>::max() / scale)
      return std::nullopt;
    return static_cast<double>(v) * static_cast<double>(scale);
  }
  // As parse_integer and parse_real: every integer is also a real, so one parse serves both.
  double v = 0;
  auto [end, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || end != last || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool has_param(const Params& p, std::string_view name) {
  return p.find(std::string(name)) != p.end();
}

const std::string& param_str(const Params& p, std::string_view name) {
  auto it = p.find(std::string(name));
  if (it == p.end()) throw UsageError(fmt::format("parameter '{}' is missing", name));
  return it->second;
}

std::int64_t param_int(const Params& p, std::string_view name) {
  const std::string& v = param_str(p, name);
  if (!v.empty() && suffix_scale(v.back()) != 1) return parse_size(name, v);
  return parse_integer(name, v);
}

double param_real(const Params& p, std::string_view name) {
  return parse_real(name, param_str(p, name));
}

std::string describe(const Params& p) {
  std::string out;
  for (const auto& [k, v] : p) {
    if (!out.empty()) out += ", ";
    out += k + "=" + v;
  }
  return out;
}

std::vector<std::string> split_list(std::string_view text, std::string_view what) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    if (item.empty()) throw UsageError(fmt::format("{}: '{}' has an empty item", what, text));
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace concurdl
