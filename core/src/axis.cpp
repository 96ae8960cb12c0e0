// Parameter axes (axis.hpp): a value checked against its axis.
#include "concurdl/core/axis.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "concurdl/core/errors.hpp"

namespace concurdl {

void check_axis_value(const Axis& a, std::string_view text) {
  check_value(a.name, a.kind, text);
  if (a.kind == AxisKind::text) {
    if (a.check) return a.check(text);
    for (const auto* list : {&a.values, &a.quick, &a.smoke})
      if (std::find(list->begin(), list->end(), text) != list->end()) return;
    throw UsageError(fmt::format("parameter '{}': unknown value '{}' (known: {})", a.name, text,
                                 fmt::join(a.values, ", ")));
  }
  if (a.max == 0 && !a.min) return;
  bool above = false, below = false;
  if (a.kind == AxisKind::real) {
    const double v = parse_real(a.name, text);
    above = a.max != 0 && v > static_cast<double>(a.max);
    below = a.min && v < static_cast<double>(*a.min);
  } else {
    const std::int64_t v =
        a.kind == AxisKind::integer ? parse_integer(a.name, text) : parse_size(a.name, text);
    above = a.max != 0 && v > a.max;
    below = a.min && v < *a.min;
  }
  if (above)
    throw UsageError(
        fmt::format("parameter '{}': '{}' is more than {}, the most this experiment "
                    "takes",
                    a.name, text, a.max));
  if (below)
    throw UsageError(
        fmt::format("parameter '{}': '{}' is less than {}, the least this "
                    "experiment takes",
                    a.name, text, *a.min));
}

}  // namespace concurdl
