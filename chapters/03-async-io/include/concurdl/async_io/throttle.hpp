// Simulated slow storage. On a machine whose page cache holds the whole data set every read is
// a memcpy, and no loader design can show what it is for. A Throttle makes each request take
// what a real device would: a fixed latency per request (a disk seek, a network round trip, an
// object-store GET) and a bandwidth shared by all requests in flight (one link):
//
//   request of b bytes issued at t:  transfer starts at max(t + latency, link free),
//                                    lasts b / bandwidth; the request completes at its end.
//
// Requests overlap in their latency (a device with many requests in flight, as NVMe and object
// stores are) but queue on the bandwidth. A blocking reader sleeps until the completion time
// (wait); an asynchronous one asks for the time (admit) and lets io_uring's timer wait for it, so
// one thread can have many throttled requests in flight.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>

namespace concurdl::async_io {

struct StorageModel {
  double latency_s = 0;              // per request
  double bandwidth_bytes_per_s = 0;  // shared by all requests; 0 = unlimited
  bool active() const { return latency_s > 0 || bandwidth_bytes_per_s > 0; }
};

class Throttle {
 public:
  using clock = std::chrono::steady_clock;

  explicit Throttle(StorageModel m = {}) : model_(m) {}
  const StorageModel& model() const { return model_; }

  // When a request of `bytes` issued now completes. Thread-safe; reserves its share of the link.
  clock::time_point admit(std::size_t bytes);
  // admit, then sleep until that time: the blocking client's view.
  void wait(std::size_t bytes);

 private:
  StorageModel model_;
  std::mutex mu_;
  clock::time_point link_free_{};
};

// Sleep until `t` with 1 us of timer slack on this thread (set once per thread): with Linux's
// default 50 us slack, every 50 us simulated request would take about 100.
void sleep_until_precise(Throttle::clock::time_point t);

// Busy-wait for `seconds`: the simulated per-batch compute (a training step). Spinning, not
// sleeping, so that it occupies a core the way real compute does.
void spin_for(double seconds);

}  // namespace concurdl::async_io
