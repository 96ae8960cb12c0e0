// calibrate/rank_pingpong (MPI builds): α and β between two ranks, for the collectives'
// α–β models. The launch and the communicators it runs on are core/ranks.hpp's.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl::ranks {

namespace {

// calibrate/rank_pingpong: rank 0 sends n bytes to rank 1, which sends them back, `round_trips`
// times per run. One way takes about alpha + beta * n: alpha from the smallest messages, beta
// from the slope over the sizes (calibration_from_records). The echo is checked byte for byte.
Trial pingpong_trial(const Params& p, GroupCache&) {
  const auto bytes = static_cast<std::size_t>(param_int(p, "bytes"));
  // Enough round trips that a run lasts about a millisecond or more, at most 1000.
  const int round_trips =
      static_cast<int>(std::clamp<std::size_t>((std::size_t{4} << 20) / (bytes + 1024), 4, 1000));
  auto send = std::make_shared<std::vector<unsigned char>>(bytes);
  auto recv = std::make_shared<std::vector<unsigned char>>(bytes);
  for (std::size_t i = 0; i < bytes; ++i) (*send)[i] = static_cast<unsigned char>(i * 131 + 7);
  Trial t;
  t.reset = [recv] { std::fill(recv->begin(), recv->end(), 0); };
  t.run = [=] {
    MPI_Comm c = comm();
    const int me = comm_rank();
    const int n = static_cast<int>(bytes);
    for (int i = 0; i < round_trips; ++i) {
      if (me == 0) {
        CDL_MPI_CHECK(MPI_Send(send->data(), n, MPI_BYTE, 1, 0, c));
        CDL_MPI_CHECK(MPI_Recv(recv->data(), n, MPI_BYTE, 1, 0, c, MPI_STATUS_IGNORE));
      } else if (me == 1) {
        CDL_MPI_CHECK(MPI_Recv(recv->data(), n, MPI_BYTE, 0, 0, c, MPI_STATUS_IGNORE));
        CDL_MPI_CHECK(MPI_Send(recv->data(), n, MPI_BYTE, 0, 0, c));
      }
    }
  };
  t.check = [=]() -> std::string {
    if (comm_rank() > 1) return "";
    for (std::size_t i = 0; i < bytes; ++i)
      if ((*recv)[i] != (*send)[i])
        return fmt::format("byte {} of {} came back as {}, sent {}", i, bytes, (*recv)[i],
                           (*send)[i]);
    return "";
  };
  t.work.items = 2.0 * round_trips;  // messages, one way each
  t.work.bytes = 2.0 * round_trips * static_cast<double>(bytes);
  return t;
}

const bool registered = register_experiment({
    .id = "calibrate/rank_pingpong",
    .chapter = kCalibrationChapter,
    .title = "Ping-pong between two MPI ranks: one-way time vs message size (alpha and beta)",
    // Ranks 0 and 1 ping-pong (any others wait); a message's size is an MPI int.
    .axes = {{"ranks", {"2"}, {}, AxisKind::count, kMaxThreads},
             {"bytes",
              {"8", "1K", "16K", "256K", "1M", "4M", "16M"},
              {"8", "16K", "1M", "4M"},
              AxisKind::size,
              std::int64_t{1} << 30}},
    .derive =
        [](const Params&, const Work& w, Record& r) {
          const double one_way = r.stats.median / w.items;
          r.derived["one_way_s"] = one_way;
          r.derived["one_way_bytes_per_s"] = w.bytes / w.items / one_way;
        },
    .scaling_axis = "ranks",
    .mpi = true,
    .interleave = {},
    .prepare = pingpong_trial,
    .figures = {{.id = "one_way",
                 .title = "One-way message time between two ranks, with the alpha-beta model",
                 .kind = FigureKind::lines,
                 .x = "bytes",
                 .y = "one_way_s",
                 .series = "ranks",
                 .log_x = true,
                 .log_y = true,
                 .y_label = "one-way time (s, log)",
                 .x_label = "message size (bytes, log)",
                 .models = {{.label = "alpha + beta * bytes",
                             .series = "",
                             .y = [](const ModelPoint& m) -> std::optional<double> {
                               if (!m.calibration || m.calibration->rank_alpha_s <= 0)
                                 return std::nullopt;
                               return m.calibration->rank_alpha_s +
                                      m.calibration->rank_beta_s_per_byte * m.x;
                             }}}}},
    .derived = {"one_way_s", "one_way_bytes_per_s"},
});

}  // namespace

}  // namespace concurdl::ranks
