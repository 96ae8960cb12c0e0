// Timelines: spans of work recorded per thread (or rank), off unless asked for, so that what a
// schedule does — the pipeline's bubble, an all-reduce overlapping backward, a loader's prefetch
// — is seen, not only computed. The harness writes them down (harness/trace_files.hpp: Chrome
// trace JSON and a Gantt chart); the recorder here is what the training hot path links.
//
//   trace::Recorder::global().start();         // `--trace`: recording on from here
//   { trace::Span s("F3", "forward"); ... }     // a span on this thread's track
//   trace::set_track("stage 1");                // name this thread's track (its row)
//   auto events = trace::Recorder::global().stop();   // every span since start()
//
// Cost: when recording is off, a Span is one atomic load (acquire: a plain load on x86). When on,
// it reads the clock twice and appends to a buffer of its thread's own (no lock on the way; the
// buffers are gathered by stop(), which must run when no span is open on another thread, e.g. after
// the workers are joined). At most kMaxEvents spans are kept per start(); the rest are counted in
// dropped() and the trace says so.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace concurdl::trace {

inline constexpr std::size_t kMaxEvents = 200'000;

struct Event {
  std::string name;      // "F3"
  std::string category;  // "forward"
  std::string track;     // the thread's track name ("stage 1"), or "thread N"
  int track_id = 0;      // the order in which tracks first recorded (the chart's rows)
  int depth = 0;         // spans open on the track when it began (0: outermost)
  double begin_us = 0;   // microseconds since start()
  double dur_us = 0;
};

class Recorder {
 public:
  static Recorder& global();
  // Recording on, from an empty trace; the clock's zero is now.
  void start();
  // Recording off; every span recorded since start(), ordered by track then begin.
  std::vector<Event> stop();
  bool on() const { return on_.load(std::memory_order_acquire); }  // pairs with start()
  std::size_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  // Used by Span and set_track.
  struct Buffer;
  Buffer& buffer();  // this thread's
  void record(Buffer& b, std::string_view name, std::string_view category,
              std::chrono::steady_clock::time_point begin,
              std::chrono::steady_clock::time_point end, int depth);

 private:
  std::atomic<bool> on_{false};
  std::atomic<std::size_t> events_{0}, dropped_{0};
  std::chrono::steady_clock::time_point zero_{};
  std::mutex mu_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

// Names the calling thread's track ("stage 0", "rank 1", "loader"); spans recorded after it
// carry the name. Cheap: call it at a worker's start whether or not a trace is recording.
void set_track(std::string name);

// Whether the global recorder is on (to skip building a span's name when it is not).
inline bool recording() { return Recorder::global().on(); }

// A span of work on this thread: recorded when it ends, if recording was on when it began (its
// name and category are copied then, so any string will do).
class Span {
 public:
  Span(std::string_view name, std::string_view category);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Recorder::Buffer* buffer_ = nullptr;  // null: not recording
  std::string name_, category_;
  std::chrono::steady_clock::time_point begin_;
  int depth_ = 0;
};

// A window of the timeline a Gantt chart can show: from the start of the first track's
// (skip + 1)-th outermost span (depth 0: a step) to the end of the (skip + count)-th, with every
// span that overlaps it, cut to it. `skip` leaves out warm-up steps (thread start).
std::vector<Event> first_spans(const std::vector<Event>& events, std::size_t count,
                               std::size_t skip = 0);

// Per track: the summed duration of its spans at `depth` whose category is one of `categories`
// (empty: all), in seconds. For "the busy time of each stage".
std::map<std::string, double> busy_seconds(const std::vector<Event>& events, int depth,
                                           const std::vector<std::string>& categories = {});

}  // namespace concurdl::trace
