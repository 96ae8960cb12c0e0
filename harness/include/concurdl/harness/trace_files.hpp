// A trace's spans (core/trace.hpp) written down: as Chrome trace JSON (opens in
// https://ui.perfetto.dev or chrome://tracing) and as a gnuplot Gantt chart beside the other
// figures. The recorder on the hot path knows nothing of files or charts; this does.
//
//   auto events = trace::Recorder::global().stop();
//   trace::write_chrome_trace("t.json", events, {{"experiment", "ch06/pipeline"}});
//   trace::render_gantt(events, figures_dir, "pipeline_gantt", "GPipe, p = 2, m = 4", warning);
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "concurdl/core/trace.hpp"

namespace concurdl::trace {

// Chrome trace JSON (the "traceEvents" form): one complete event ("ph":"X") per span, a thread
// name per track, and `metadata` under "otherData" (with the dropped count). Atomic write.
void write_chrome_trace(const std::filesystem::path& path, const std::vector<Event>& events,
                        const std::map<std::string, std::string>& metadata,
                        std::size_t dropped = 0);

// Reads back what write_chrome_trace wrote (for tests and `concurdl report`): the complete
// events, with their track names. std::runtime_error naming the file on anything else.
std::vector<Event> read_chrome_trace(const std::filesystem::path& path);

// A Gantt chart of the spans: one row per track, one box per outermost span, coloured by
// category; STEM.dat and STEM.gp always, STEM.svg and STEM.png when gnuplot runs (warning says
// why not otherwise). Spans deeper than `max_depth` are left out of the picture.
void render_gantt(const std::vector<Event>& events, const std::filesystem::path& dir,
                  const std::string& stem, const std::string& title, std::string& warning,
                  int max_depth = 0);

}  // namespace concurdl::trace
