// A trace's spans (core/trace.hpp) written down as Chrome trace JSON (opens in
// https://ui.perfetto.dev or chrome://tracing), and read back. The recorder on the hot path knows
// nothing of files; this does. Drawing them is gantt.hpp's, a layer above.
//
//   auto events = trace::Recorder::global().stop();
//   trace::write_chrome_trace("t.json", events, {{"experiment", "ch06/pipeline"}});
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

// Reads back what write_chrome_trace wrote (for tests and the Gantt charts): the complete
// events, with their track names, and the string entries of its metadata into `metadata` when
// given. std::runtime_error naming the file on anything else.
std::vector<Event> read_chrome_trace(const std::filesystem::path& path,
                                     std::map<std::string, std::string>* metadata = nullptr);

}  // namespace concurdl::trace
