// ch04/streams: copy in, kernel, copy out, from pageable or pinned host memory, one stream or
// chunks on several (GPU; left out with its reason where no device is). Timed on the host:
// the round trip is what is measured; the result is checked on the host after it.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/gpu/device.hpp"
#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/kernel_tables.hpp"
#include "concurdl/gpu/reference.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "gpu_trials.hpp"

#if CONCURDL_HAVE_CUDA
#include "concurdl/harness/cuda_timer.hpp"
#endif

namespace concurdl::gpu {

namespace {

#if CONCURDL_HAVE_CUDA

Trial streams_trial(const Params& p, GroupCache& cache) {
  const TransferSchedule& schedule = transfers().find(p);
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  const int chunks = schedule.chunked ? static_cast<int>(param_int(p, "chunks")) : 1;
  struct Buffers {
    std::vector<float> host_in, want;
    PinnedBuffer pin_in, pin_out;
    DeviceBuffer<float> d_in, d_out;
    explicit Buffers(std::size_t m)
        : host_in(test_values(m, 7)), want(m), pin_in(m), pin_out(m), d_in(m), d_out(m) {
      for (std::size_t i = 0; i < m; ++i) want[i] = 2.0f * host_in[i] + 1.0f;
      std::copy(host_in.begin(), host_in.end(), pin_in.get());
    }
  };
  auto& buffers =
      cache.get<std::shared_ptr<Buffers>>("buffers", [&] { return std::make_shared<Buffers>(n); });
  auto b = buffers;
  auto out = std::make_shared<std::vector<float>>(n);  // the pageable output, this config's own
  const bool pinned = schedule.pinned;
  Trial t;  // host timer: the round trip, copies included, is what is measured
  t.reset = [b, out, pinned] {
    if (pinned)
      std::fill(b->pin_out.get(), b->pin_out.get() + b->pin_out.size(), -1.0f);
    else
      std::fill(out->begin(), out->end(), -1.0f);
  };
  t.run = [round_trip = schedule.round_trip, b, out, n, chunks, pinned] {
    round_trip(pinned ? b->pin_in.get() : b->host_in.data(),
               pinned ? b->pin_out.get() : out->data(), b->d_in.get(), b->d_out.get(), n, chunks);
  };
  t.check = [b, out, pinned]() -> std::string {
    const float* got = pinned ? b->pin_out.get() : out->data();
    for (std::size_t i = 0; i < b->want.size(); ++i)
      if (got[i] != b->want[i])
        return fmt::format("element {} is {}, 2 x + 1 is {}", i, got[i], b->want[i]);
    return "";
  };
  t.work.items = static_cast<double>(n);
  t.work.bytes = 2.0 * static_cast<double>(n) * sizeof(float);  // across the bus, both ways
  return t;
}

#else

Trial streams_trial(const Params&, GroupCache&) { throw UsageError(gpu_unavailable()); }

#endif

// The schedules without chunks: one copy each way, so the `chunks` axis means nothing to them.
bool whole(const TransferSchedule& s) { return !s.chunked; }

const bool registered_streams = register_experiment({
    .id = "ch04/streams",
    .chapter = "04-gpu-kernels",
    .title = "Copy in, kernel, copy out: pageable vs pinned host memory, one stream vs chunks on "
             "several streams",
    .axes =
        {transfers().axis("ch04/streams"),
         {.name = "chunks", .values = {"4"}, .kind = AxisKind::count, .max = 1024, .smoke = {"2"}},
         {.name = "n",
          .values = {"256M"},
          .quick = {"64M"},
          .kind = AxisKind::size,
          .max = kMaxElements,
          .smoke = {"1M"}}},
    .baseline = {{"variant", "pageable_sync"}},
    .inapplicable = transfers().inapplicable(whole, {"chunks"}),
    .interleave = {"variant", "chunks"},
    .repetitions = 11,
    .warmup = 2,
    .prepare = streams_trial,
    .figures = {{.id = "bandwidth",
                 .title = "Bytes across the bus per second, round trip with the kernel",
                 .kind = FigureKind::bars,
                 .x = "n",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .y_label = "bytes/s (in + out / round-trip time)"}},
    .claims = {{.id = "pinned_streams_beat_pageable",
                // A magnitude: one H200 run; the host's pageable copy path is the machine's.
                .statement = "The round trip's bytes/s with pinned memory and one chunk's copies "
                             "overlapping another's kernel over pageable, synchronous copies",
                .select = {{"variant", "pinned_streams"}},
                .field = "bytes_per_s",
                .versus = {{"variant", "pageable_sync"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::memory_bandwidth},
                .unit = "x",
                .needs_gpu = true}},
    .unavailable = gpu_unavailable,
});

}  // namespace

}  // namespace concurdl::gpu
