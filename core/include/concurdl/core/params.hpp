// Parameters of one configuration: axis name -> value, kept as text (what the user typed or the
// axis declared) and parsed on use with errors that name the parameter.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace concurdl {

using Params = std::map<std::string, std::string>;

// Whether `p` has every key of `select` with the same value (a record's parameters against a
// claim's select, a rule's `when`, a figure's `where`).
bool params_match(const Params& p, const Params& select);

// What values an axis accepts. Checked when the sweep is expanded, before anything runs, so a
// bad --set or --threads is a usage error (exit 2) and never a half-finished run.
enum class AxisKind {
  text,     // any non-empty string (variant names, backends)
  count,    // integer >= 1 (threads, ranks, repetitions of work)
  size,     // integer >= 1 with an optional binary suffix K, M, G (elements or bytes)
  integer,  // any 64-bit signed integer
  real,     // a finite floating-point number
};

// Parse a value as its kind; throws UsageError "parameter 'n': '99999999999999999999' does not
// fit in 64 bits" and the like.
std::int64_t parse_size(std::string_view name, std::string_view text);  // size and count
std::int64_t parse_integer(std::string_view name, std::string_view text);
double parse_real(std::string_view name, std::string_view text);
void check_value(std::string_view name, AxisKind kind, std::string_view text);

// A parameter value as a number, for charts and reports: exactly the numbers some axis kind
// accepts, so a value the sweep took is never drawn as a category. An integer ("8", "-3"), a
// finite real ("0.5", "1e-3") or a size with its binary suffix ("16M", "16m", "1k" = 1024);
// nullopt for anything else ("v1_naive", "1.5K", "12x", "inf", "").
std::optional<double> number_value(std::string_view text);

// Typed access; throws UsageError naming the parameter when it is missing or malformed.
std::int64_t param_int(const Params& p, std::string_view name);  // accepts size suffixes
double param_real(const Params& p, std::string_view name);
const std::string& param_str(const Params& p, std::string_view name);
bool has_param(const Params& p, std::string_view name);

// "variant=v1, threads=2" in axis order of `p` (sorted by name).
std::string describe(const Params& p);

// Split "1,2,4" into {"1","2","4"}; empty items are an error naming `what`.
std::vector<std::string> split_list(std::string_view text, std::string_view what);

}  // namespace concurdl
