// Timelines written down (trace_files.hpp): Chrome trace JSON, and read back.
#include "concurdl/harness/trace_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "concurdl/harness/records.hpp"

namespace concurdl::trace {

namespace {
using nlohmann::json;
}  // namespace

void write_chrome_trace(const std::filesystem::path& path, const std::vector<Event>& events,
                        const std::map<std::string, std::string>& metadata, std::size_t dropped) {
  json trace_events = json::array();
  std::map<int, std::string> tracks;
  for (const Event& e : events) tracks[e.track_id] = e.track;
  for (const auto& [id, name] : tracks) {
    trace_events.push_back({{"ph", "M"},
                            {"name", "thread_name"},
                            {"pid", 1},
                            {"tid", id},
                            {"args", {{"name", name}}}});
    trace_events.push_back({{"ph", "M"},
                            {"name", "thread_sort_index"},
                            {"pid", 1},
                            {"tid", id},
                            {"args", {{"sort_index", id}}}});
  }
  for (const Event& e : events)
    trace_events.push_back({{"ph", "X"},
                            {"name", e.name},
                            {"cat", e.category},
                            {"pid", 1},
                            {"tid", e.track_id},
                            {"ts", e.begin_us},
                            {"dur", e.dur_us}});
  json other = json::object();
  for (const auto& [k, v] : metadata) other[k] = v;
  other["dropped_spans"] = dropped;
  const json doc = {{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  write_file_atomic(path, doc.dump(1) + "\n");
}

std::vector<Event> read_chrome_trace(const std::filesystem::path& path,
                                     std::map<std::string, std::string>* metadata) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.string()));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not JSON ({})", path.string(), e.what()));
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw std::runtime_error(fmt::format("{}: no traceEvents array", path.string()));
  std::map<int, std::string> names;
  std::vector<Event> out;
  try {
    for (const json& e : doc["traceEvents"]) {
      const std::string ph = e.at("ph").get<std::string>();
      if (ph == "M" && e.at("name") == "thread_name")
        names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
      if (ph != "X") continue;
      Event ev;
      ev.name = e.at("name").get<std::string>();
      ev.category = e.value("cat", "");
      ev.track_id = e.at("tid").get<int>();
      ev.begin_us = e.at("ts").get<double>();
      ev.dur_us = e.at("dur").get<double>();
      out.push_back(std::move(ev));
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("{}: a malformed event ({})", path.string(), e.what()));
  }
  if (metadata && doc.contains("otherData") && doc["otherData"].is_object())
    for (const auto& [k, v] : doc["otherData"].items())
      if (v.is_string()) (*metadata)[k] = v.get<std::string>();
  for (Event& e : out) {
    const auto it = names.find(e.track_id);
    e.track = it == names.end() ? fmt::format("thread {}", e.track_id) : it->second;
  }
  return out;
}

}  // namespace concurdl::trace
