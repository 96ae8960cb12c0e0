// A warp on the CPU: 32 threads, one a lane, that meet at a barrier in every shuffle, so that a
// function written for a warp (warp_shuffle_sum, exercise 4.2's student_warp_sum) runs as the 32
// lanes run it on a GPU, in lockstep at every exchange of registers. Lanes that make different
// numbers of shuffles (on a GPU: undefined behaviour) are reported as such: a lane that is done
// leaves the barrier, so the others do not wait for it forever.
#pragma once

#include <array>
#include <barrier>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/gpu/index.hpp"

namespace concurdl::gpu::sim {

using WarpValues = std::array<float, kWarpSize>;

class CpuWarp {
 public:
  CpuWarp(unsigned lane, WarpValues& slots, std::barrier<>& sync)
      : lane_(lane), slots_(slots), sync_(sync) {}
  unsigned lane() const { return lane_; }
  int shuffles() const { return shuffles_; }
  // The v that lane + offset passed to this same call; this lane's own v past the last lane.
  float shfl_down(float v, unsigned offset) {
    ++shuffles_;
    slots_[lane_] = v;
    sync_.arrive_and_wait();  // every lane's v written
    const float got = lane_ + offset < kWarpSize ? slots_[lane_ + offset] : v;
    sync_.arrive_and_wait();  // every lane's read done before the next shuffle writes
    return got;
  }

 private:
  unsigned lane_;
  WarpValues& slots_;
  std::barrier<>& sync_;
  int shuffles_ = 0;
};

// f(warp, values[lane]) on each of the 32 lanes at once; what each lane returned. Throws
// std::runtime_error when the lanes made different numbers of shuffles, and again on the
// caller's thread what a lane threw (NotImplemented from a stub stays NotImplemented).
template <class F>
WarpValues run_warp(const WarpValues& values, F f) {
  WarpValues slots{}, out{};
  std::array<int, kWarpSize> shuffles{};
  std::array<std::string, kWarpSize> todo, error;
  std::barrier<> sync(kWarpSize);
  {
    std::vector<std::jthread> lanes;
    for (unsigned lane = 0; lane < kWarpSize; ++lane)
      lanes.emplace_back([&, lane] {
        CpuWarp warp(lane, slots, sync);
        try {
          out[lane] = f(warp, values[lane]);
        } catch (const NotImplemented& e) {
          todo[lane] = e.exercise();
        } catch (const std::exception& e) {
          error[lane] = e.what();
        }
        shuffles[lane] = warp.shuffles();
        sync.arrive_and_drop();  // done: the lanes still shuffling no longer wait for this one
      });
  }  // joined
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    if (!todo[lane].empty()) throw NotImplemented(todo[lane]);
    if (!error[lane].empty())
      throw std::runtime_error("lane " + std::to_string(lane) + ": " + error[lane]);
  }
  for (unsigned lane = 1; lane < kWarpSize; ++lane)
    if (shuffles[lane] != shuffles[0])
      throw std::runtime_error(
          "lane " + std::to_string(lane) + " made " + std::to_string(shuffles[lane]) +
          " shuffles and lane 0 " + std::to_string(shuffles[0]) +
          ": every lane must take part in every shuffle (a GPU leaves this undefined)");
  return out;
}

}  // namespace concurdl::gpu::sim
