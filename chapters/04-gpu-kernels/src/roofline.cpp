// roofline.hpp: occupancy and peaks, in plain C++.
#include "concurdl/gpu/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace concurdl::gpu {

namespace {

int round_up(int v, int unit) { return unit > 0 ? (v + unit - 1) / unit * unit : v; }

std::string rate(double v, const char* unit) {
  return v >= 1e12 ? fmt::format("{:.3g} T{}", v / 1e12, unit)
                   : fmt::format("{:.3g} G{}", v / 1e9, unit);
}

}  // namespace

SmLimits sm_limits(int major, int minor) {
  // threads, blocks, shared memory per SM (the largest carveout), reserved per block.
  struct Row {
    int major, minor, threads, blocks, shared, reserved;
  };
  static const Row rows[] = {
      {7, 0, 2048, 32, 98304, 0},      {7, 5, 1024, 16, 65536, 0},
      {8, 0, 2048, 32, 167936, 1024},  {8, 6, 1536, 16, 102400, 1024},
      {8, 9, 1536, 24, 102400, 1024},  {9, 0, 2048, 32, 233472, 1024},
      {10, 0, 2048, 32, 233472, 1024}, {12, 0, 1536, 32, 102400, 1024},
  };
  for (const Row& r : rows)
    if (r.major == major && r.minor == minor) {
      SmLimits sm;
      sm.max_threads = r.threads;
      sm.max_blocks = r.blocks;
      sm.shared_bytes = r.shared;
      sm.reserved_shared_per_block = r.reserved;
      sm.shared_unit = major >= 8 ? 128 : 256;
      return sm;
    }
  throw std::invalid_argument(
      fmt::format("compute capability {}.{}: no SM limits on record (7.0, 7.5, 8.0, 8.6, 8.9, "
                  "9.0, 10.0 and 12.0 are)",
                  major, minor));
}

Occupancy occupancy(const SmLimits& sm, const KernelResources& k) {
  if (k.threads <= 0 || k.threads > sm.max_threads)
    throw std::invalid_argument(
        fmt::format("a block of {} threads: an SM holds 1 to {}", k.threads, sm.max_threads));
  const int warps_per_block = (k.threads + sm.warp_size - 1) / sm.warp_size;
  const int max_warps = sm.max_threads / sm.warp_size;
  // Each limit as a number of blocks; the smallest wins (the first named on a tie).
  std::vector<std::pair<int, const char*>> limits;
  limits.emplace_back(max_warps / warps_per_block, "threads");
  limits.emplace_back(sm.max_blocks, "blocks");
  if (k.registers > 0) {
    // Registers go to whole warps, rounded up to the allocation unit.
    const int per_warp = round_up(k.registers * sm.warp_size, sm.register_unit);
    const int warps = sm.registers / per_warp;
    if (warps < warps_per_block)
      throw std::invalid_argument(
          fmt::format("a block of {} threads at {} registers each needs {} registers: an SM has {}",
                      k.threads, k.registers, per_warp * warps_per_block, sm.registers));
    limits.emplace_back(warps / warps_per_block, "registers");
  }
  if (k.shared_bytes > 0) {
    const int per_block = round_up(k.shared_bytes + sm.reserved_shared_per_block, sm.shared_unit);
    if (per_block > sm.shared_bytes)
      throw std::invalid_argument(
          fmt::format("a block using {} bytes of shared memory: an SM has {}", k.shared_bytes,
                      sm.shared_bytes));
    limits.emplace_back(sm.shared_bytes / per_block, "shared memory");
  }
  const auto least = std::min_element(
      limits.begin(), limits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Occupancy o;
  o.blocks = least->first;
  o.warps = o.blocks * warps_per_block;
  o.fraction = static_cast<double>(o.warps) / max_warps;
  o.limited_by = least->second;
  o.max_warps = max_warps;
  o.threads = k.threads;
  return o;
}

std::string Occupancy::describe() const {
  return fmt::format("{:.0f}% ({} block{} of {} threads: {} of {} warps; limited by {})",
                     fraction * 100, blocks, blocks == 1 ? "" : "s", threads, warps, max_warps,
                     limited_by);
}

int fp32_lanes_per_sm(int major, int minor) {
  if (major == 7 || (major == 8 && minor == 0)) return 64;
  if (major == 8 || major == 9 || major == 10 || major == 12) return 128;
  return 0;
}

int tensor_flops_per_clock_per_sm(int major, int minor) {
  if (major == 7 && minor == 0) return 1024;
  if (major == 8 && minor == 0) return 2048;
  if (major == 9 && minor == 0) return 4096;
  return 0;
}

GpuRoofline make_roofline(std::string name, int major, int minor, int sms, double clock_hz,
                          double l2_bytes, double theoretical_bytes_per_s,
                          double copy_bytes_per_s) {
  GpuRoofline r;
  r.name = std::move(name);
  r.major = major;
  r.minor = minor;
  r.sms = sms;
  r.clock_hz = clock_hz;
  r.l2_bytes = l2_bytes;
  r.theoretical_bytes_per_s = theoretical_bytes_per_s;
  r.copy_bytes_per_s = copy_bytes_per_s;
  r.fp32_flops_per_s = sms * 2.0 * fp32_lanes_per_sm(major, minor) * clock_hz;
  r.tensor_flops_per_s =
      sms * static_cast<double>(tensor_flops_per_clock_per_sm(major, minor)) * clock_hz;
  return r;
}

std::string GpuRoofline::describe() const {
  std::string s = fmt::format("{} (sm_{}{}, {} SMs at {:.3g} GHz): copy {} measured", name, major,
                              minor, sms, clock_hz / 1e9, rate(copy_bytes_per_s, "B/s"));
  if (theoretical_bytes_per_s > 0)
    s += fmt::format(" (theoretical {})", rate(theoretical_bytes_per_s, "B/s"));
  s += fp32_flops_per_s > 0 ? fmt::format(", FP32 {}", rate(fp32_flops_per_s, "FLOP/s"))
                            : std::string(", FP32 peak unknown for this architecture");
  if (tensor_flops_per_s > 0)
    s += fmt::format(", FP16 tensor {}", rate(tensor_flops_per_s, "FLOP/s"));
  return s;
}

}  // namespace concurdl::gpu
