// A trace's spans drawn as a gnuplot Gantt chart beside the other figures: one row per track,
// one box per span. Trace files are written by trace_files.hpp; this reads and draws them.
//
//   trace::render_gantt(events, figures_dir, "pipeline_gantt", "GPipe, p = 2, m = 4", warning);
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "concurdl/core/trace.hpp"

namespace concurdl::trace {

// A Gantt chart of the spans: one row per track, one box per outermost span, coloured by
// category; STEM.dat and STEM.gp always, STEM.svg and STEM.png when gnuplot runs (warning says
// why not otherwise). Spans deeper than `max_depth` are left out of the picture.
void render_gantt(const std::vector<Event>& events, const std::filesystem::path& dir,
                  const std::string& stem, const std::string& title, std::string& warning,
                  int max_depth = 0);

// `concurdl run --trace`: a Gantt chart beside each trace file under `dir` (DIR/EXPERIMENT/
// CONFIG.json), of the first step after the first and its outermost two levels, titled by the
// file's "title" metadata. A file that cannot be read adds a warning and is passed over. Returns
// how many were drawn; 0 when `dir` does not exist.
int render_trace_dir(const std::filesystem::path& dir, std::vector<std::string>& warnings);

}  // namespace concurdl::trace
