// Timelines (trace.hpp): per-thread span buffers and the selection of spans to draw; the files
// (Chrome trace JSON, the Gantt chart) are the harness's (concurdl/harness/trace_files.hpp).
#include "concurdl/core/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace concurdl::trace {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

// One thread's spans. The thread appends without a lock while recording is on; start() and
// stop() touch it only when no span is open on the thread (their contract), under the mutex.
struct Recorder::Buffer {
  std::string track;
  std::vector<Event> events;
  int depth = 0;  // spans open on this thread now
};

Recorder& Recorder::global() {
  static Recorder r;
  return r;
}

Recorder::Buffer& Recorder::buffer() {
  // The buffer outlives its thread (the recorder holds it too): workers are joined before
  // stop() gathers their spans.
  thread_local std::shared_ptr<Buffer> mine;
  if (!mine) {
    mine = std::make_shared<Buffer>();
    std::lock_guard lock(mu_);
    mine->track = fmt::format("thread {}", buffers_.size());
    buffers_.push_back(mine);
  }
  return *mine;
}

void Recorder::start() {
  std::lock_guard lock(mu_);
  // Buffers of threads that have ended (only the recorder holds them) go.
  std::erase_if(buffers_, [](const std::shared_ptr<Buffer>& b) { return b.use_count() == 1; });
  for (auto& b : buffers_) b->events.clear();
  events_ = 0;
  dropped_ = 0;
  zero_ = Clock::now();
  on_.store(true, std::memory_order_release);
}

std::vector<Event> Recorder::stop() {
  on_.store(false, std::memory_order_release);
  std::lock_guard lock(mu_);
  std::vector<Event> all;
  for (auto& b : buffers_) {
    for (Event& e : b->events) all.push_back(std::move(e));
    b->events.clear();
  }
  // Tracks numbered in their names' natural order ("stage 2" before "stage 10"), so that the
  // chart's rows read top-down as the pipeline runs.
  std::set<std::string> names;
  for (const Event& e : all) names.insert(e.track);
  std::vector<std::string> order(names.begin(), names.end());
  const auto split = [](const std::string& t) {
    std::size_t k = t.size();
    while (k > 0 && std::isdigit(static_cast<unsigned char>(t[k - 1]))) --k;
    const long n = k < t.size() ? std::stol(t.substr(k, 9)) : -1;
    return std::pair{t.substr(0, k), n};
  };
  std::sort(order.begin(), order.end(),
            [&](const std::string& a, const std::string& b) { return split(a) < split(b); });
  std::map<std::string, int> ids;
  for (std::size_t i = 0; i < order.size(); ++i) ids[order[i]] = static_cast<int>(i);
  for (Event& e : all) e.track_id = ids[e.track];
  std::sort(all.begin(), all.end(), [](const Event& a, const Event& b) {
    return std::tie(a.track_id, a.begin_us, a.depth) < std::tie(b.track_id, b.begin_us, b.depth);
  });
  return all;
}

void Recorder::record(Buffer& b, std::string_view name, std::string_view category,
                      Clock::time_point begin, Clock::time_point end, int depth) {
  if (events_.fetch_add(1, std::memory_order_relaxed) >= kMaxEvents) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Event e;
  e.name = name;
  e.category = category;
  e.track = b.track;
  e.depth = depth;
  e.begin_us = std::chrono::duration<double, std::micro>(begin - zero_).count();
  e.dur_us = std::chrono::duration<double, std::micro>(end - begin).count();
  b.events.push_back(std::move(e));
}

void set_track(std::string name) { Recorder::global().buffer().track = std::move(name); }

Span::Span(std::string_view name, std::string_view category) {
  Recorder& r = Recorder::global();
  if (!r.on()) return;
  buffer_ = &r.buffer();
  name_ = name;
  category_ = category;
  depth_ = buffer_->depth++;
  begin_ = Clock::now();
}

Span::~Span() {
  if (buffer_ == nullptr) return;
  const auto end = Clock::now();
  --buffer_->depth;
  Recorder& r = Recorder::global();
  if (r.on()) r.record(*buffer_, name_, category_, begin_, end, depth_);
}

std::vector<Event> first_spans(const std::vector<Event>& events, std::size_t count,
                               std::size_t skip) {
  if (events.empty() || count == 0) return {};
  int first_track = events.front().track_id;
  for (const Event& e : events) first_track = std::min(first_track, e.track_id);
  std::vector<const Event*> outer;
  for (const Event& e : events)
    if (e.track_id == first_track && e.depth == 0) outer.push_back(&e);
  std::sort(outer.begin(), outer.end(),
            [](const Event* a, const Event* b) { return a->begin_us < b->begin_us; });
  if (outer.size() <= skip) skip = 0;  // too few to skip any: from the start
  if (outer.empty()) return events;
  const double from = outer[skip]->begin_us;
  double to = from;
  for (std::size_t i = skip; i < std::min(outer.size(), skip + count); ++i)
    to = std::max(to, outer[i]->begin_us + outer[i]->dur_us);
  // Every span that overlaps [from, to], cut to it.
  std::vector<Event> out;
  for (const Event& e : events) {
    const double b = e.begin_us, end = e.begin_us + e.dur_us;
    if (end <= from || b >= to) continue;
    Event c = e;
    c.begin_us = std::max(b, from);
    c.dur_us = std::min(end, to) - c.begin_us;
    out.push_back(std::move(c));
  }
  return out;
}

std::map<std::string, double> busy_seconds(const std::vector<Event>& events, int depth,
                                           const std::vector<std::string>& categories) {
  std::map<std::string, double> busy;
  for (const Event& e : events) {
    if (e.depth != depth) continue;
    if (!categories.empty() &&
        std::find(categories.begin(), categories.end(), e.category) == categories.end())
      continue;
    busy[e.track] += e.dur_us * 1e-6;
  }
  return busy;
}

}  // namespace concurdl::trace
