// Lesson numbers filled in from committed runs. A measured number in a lesson is written
// between two markers that name the record and the figure it comes from:
//
//   v3 is <!-- n ch01/false_sharing variant=v3_padded_partials,threads=2,n=2M speedup x2
//   -->1.29×<!-- /n --> as fast as v2; the memory bus gives <!-- n calibration -
//   mem_bandwidth_bytes_per_s s3 unit:B/s -->49.2 GB/s<!-- /n -->
//
// and a tool rewrites the text between them from the run (CONCURDL_UPDATE_README=1
// chapter_variants_tests --gtest_filter='*LessonNumbers*'); the test of the same name fails
// when a marker names no record, several records, or a number the text no longer shows.
//
// Inside a marker, separated by spaces:
//   EXPERIMENT   an experiment id, or `calibration` (the run's calibrated ceilings)
//   SELECT       k=v,k=v: the parameters that pick exactly one record (`-` for calibration)
//   FIELD        median | min | max | ci95_lo | ci95_hi (the record's own metric, usually
//                seconds), a named metric (its median; NAME.min, NAME.max for its extreme
//                repetitions), or a derived value (speedup,
//                items_per_s, fraction_of_ceiling, ...); for calibration, one of its figures
//   FORMAT       x1 x2 (a ratio: "1.29×"), f0..f4 (fixed decimals), g2..g4 (significant
//                digits), p0 p1 (a fraction as a percentage: "87%"), s2 s3 (significant
//                digits with K/M/G/T: "144K", with a unit "49.2 GB/s"), t2..t4 (seconds as
//                "15.2 ms", "870 ns", "4.6 s")
// then, optionally:
//   vs:SELECT    divide by the record that SELECT's values give when substituted into the
//                first record's parameters: how many times better (for a lower-is-better
//                field, the peer's over this one's), as a claim's `versus`
//   run:NAME     results/reference/NAME (default: the manifest's lessons run); a folder of
//                several runs takes NAME/RUN
//   unit:TEXT    appended after a space ("B/s" after an SI prefix: "49.2 GB/s")
//   inv          one over the value: items_per_s inv t3 is the time per item ("441 ns")
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "concurdl/core/params.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

struct NumberMarker {
  std::size_t line = 0;  // 1-based, of the opening marker
  std::string experiment;
  Params select, versus;
  std::string field, format, run, unit;
  bool invert = false;
  std::string text;  // what the lesson shows between the markers now
  std::size_t text_begin = 0, text_end = 0;
};

// Every marker of a lesson, in order. Throws std::runtime_error naming the line of a marker
// that is malformed (unknown token, no closing marker, a format this does not know).
std::vector<NumberMarker> parse_number_markers(const std::string& text);

// The runs markers name, loaded once each: results/reference/NAME under `reference_dir`.
class RunLibrary {
 public:
  explicit RunLibrary(std::filesystem::path reference_dir, std::string default_run);
  // Throws std::runtime_error when the run cannot be loaded.
  const RunFile& get(const std::string& name);
  const std::string& default_run() const { return default_run_; }

 private:
  std::filesystem::path dir_;
  std::string default_run_;
  std::vector<std::pair<std::string, RunFile>> loaded_;
};

// The value a marker names and its text; throws std::runtime_error saying what is missing.
double marker_value(const NumberMarker& m, RunLibrary& runs);
std::string format_number(double value, const std::string& format, const std::string& unit);

// `text` with every marker's number rewritten from its run.
std::string regenerate_numbers(const std::string& text, RunLibrary& runs);
// One line per marker that does not resolve or whose text is not its number ("README.md:12:
// ..."); `count` receives the number of markers.
std::vector<std::string> check_numbers(const std::filesystem::path& lesson, RunLibrary& runs,
                                       std::size_t& count);

}  // namespace concurdl
