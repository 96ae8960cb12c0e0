// All-to-all measured as nccl-tests' alltoall_perf measures it (all_to_all_trials.cpp): per
// algorithm, rank count and size, the time, algbw and busbw = algbw · (n − 1)/n, #wrong, and
// the bytes the communicator saw leave a rank against the traffic model (all_to_all.hpp).
//   ch05/all_to_all      the threads backend: ranks are threads of this process, with PyTorch's
//                        all_to_all_single over gloo (N processes) as a peer where the peer's
//                        Python has torch (torch_peer.hpp); its version in the row's notes
//   ch05/all_to_all_mpi  the mpi backend, with MPI_Alltoallv and Gloo's alltoall as peers
//   concurdl run ch05/all_to_all
//   concurdl run --ranks 2,4 ch05/all_to_all_mpi
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "all_to_all_trials.hpp"
#include "collectives.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/dp/all_to_all.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::dp;
using namespace concurdl::dp::collectives;

// 4 KiB to 256 MiB a rank by 4x (full); the quick profile's four. Every size splits into 2, 4,
// 8, ... 64 equal blocks of whole floats from 4 KiB up.
const std::vector<std::string> kA2aBytes = {"4K", "16K", "64K", "256K", "1M",
                                            "4M", "16M", "64M", "256M"};
const std::vector<std::string> kA2aQuick = {"4K", "256K", "4M", "64M"};

const std::vector<Metric> kA2aMetrics = {
    kWrongMetric[0],
    {.name = "sent_bytes",
     .unit = "B",
     .what = "bytes the communicator saw this rank hand to send in one all-to-all (the most over "
             "the ranks), counted where they leave: hand-written rows only",
     .optional = true}};

// The full profile's rank counts: chapter 05's (2, 4, ... twice the CPUs), and 8 at least, where
// Bruck's three steps stand against the pairwise exchange's seven (oversubscribed on a small
// machine, and noted so).
std::vector<std::string> a2a_rank_counts() {
  std::vector<std::string> r = rank_counts();
  if (std::find(r.begin(), r.end(), "8") == r.end()) r.push_back("8");
  return r;
}

std::vector<Axis> a2a_axes(Axis algorithm, Axis ranks) {
  return {std::move(algorithm),
          std::move(ranks),
          {"bytes", kA2aBytes, kA2aQuick, AxisKind::size, kMaxBytes}};
}

// The α–β model's busbw of `algorithm` at n ranks and B bytes a rank, from the α and β that
// calibrate/rank_pingpong measured between two ranks in the same run (not fitted to these
// records): pairwise (n − 1)α + (n − 1)/n · Bβ, Bruck ⌈log2 n⌉α + its bytes · β; busbw =
// (n − 1)/n · B over that time. Its packing copies are not in it.
Model alpha_beta_model(const std::string& algorithm, int n) {
  return {.label = algorithm + ", alpha-beta from calibrate/rank_pingpong",
          .series = algorithm,
          .y = [algorithm, n](const ModelPoint& m) -> std::optional<double> {
            if (!m.calibration || m.calibration->rank_alpha_s <= 0 ||
                m.calibration->rank_beta_s_per_byte <= 0 || m.x <= 0)
              return std::nullopt;
            const double floats = m.x / sizeof(float);
            const AllToAllTraffic t =
                algorithm == "bruck" ? bruck_traffic(n, floats) : pairwise_traffic(n, floats);
            const double seconds = t.messages * m.calibration->rank_alpha_s +
                                   t.floats * sizeof(float) * m.calibration->rank_beta_s_per_byte;
            return (n - 1.0) / n * m.x / seconds;
          }};
}

Figure busbw_figure(const std::string& backend, int ranks, bool mpi) {
  Figure f{.id = ranks == 2 ? "busbw" : "busbw_" + std::to_string(ranks),
           .title = "All-to-all (" + backend + "): bus bandwidth vs size, " +
                    std::to_string(ranks) + " ranks" +
                    (mpi ? " (dashed: the alpha-beta model)" : ""),
           .kind = FigureKind::lines,
           .x = "bytes",
           .y = "bytes_per_s",
           .series = "algorithm",
           .where = {{"ranks", std::to_string(ranks)}},
           .log_x = true,
           .log_y = true,
           .y_label = "busbw = algbw x (n-1)/n (bytes/s, log)",
           .x_label = "bytes each rank sends (log)"};
  if (mpi) f.models = {alpha_beta_model("pairwise", ranks), alpha_beta_model("bruck", ranks)};
  return f;
}

std::vector<Figure> a2a_figures(const std::string& backend, bool mpi) {
  return {busbw_figure(backend, 2, mpi),
          busbw_figure(backend, 4, mpi),
          {.id = "time_4",
           .title = "All-to-all (" + backend + "): time vs size, 4 ranks",
           .kind = FigureKind::lines,
           .x = "bytes",
           .y = "median",
           .series = "algorithm",
           .where = {{"ranks", "4"}},
           .log_x = true,
           .log_y = true,
           .y_label = "time per all-to-all, slowest rank (s, log)",
           .x_label = "bytes each rank sends (log)"}};
}

// The laws every backend's experiment makes: no wrong element, and the bytes counted leaving a
// rank equal to the traffic model's (pairwise (n - 1)/n of the data; Bruck the blocks whose
// rotated index has each bit set: at 4 ranks N, 4/3 of pairwise's 3/4 N).
std::vector<Claim> a2a_laws() {
  return {{.id = "no_wrong_elements",
           // At 4 ranks: at 2, Bruck's algorithm is one exchange, the pairwise exchange's.
           .statement = "On 4 ranks every all-to-all, hand-written or native, at every size "
                        "delivers every element to its rank and place (#wrong is 0)",
           .select = {{"ranks", "4"}},
           .field = "wrong",
           .compare = Claim::Compare::at_most,
           .bound = 0,
           .timing = false},
          {.id = "pairwise_sends_its_share",
           // Model: each rank keeps its own block and sends the other n - 1 once.
           .statement = "The pairwise exchange hands to send exactly (n - 1)/n of each rank's "
                        "bytes: every float leaves once, its own block never",
           .select = {{"algorithm", "pairwise"}},
           .field = "sent_over_model",
           .compare = Claim::Compare::within,
           .bound = 1,
           .tolerance = 1e-9,
           .timing = false},
          {.id = "bruck_sends_log_n_halves",
           // Model: ⌈log2 4⌉ = 2 steps of half the blocks each = N, over pairwise's 3/4 N.
           .statement = "At 4 ranks Bruck's algorithm sends 4/3 of the pairwise exchange's bytes "
                        "(log2(n)/2 of the data against (n - 1)/n): fewer messages, more bytes",
           .select = {{"algorithm", "bruck"}, {"ranks", "4"}},
           .field = "sent_bytes",
           .versus = {{"algorithm", "pairwise"}},
           .compare = Claim::Compare::within,
           .bound = 4.0 / 3.0,
           .tolerance = 1e-9,
           .timing = false}};
}

// The threads experiment's algorithms: the table's rows, and PyTorch's all_to_all_single over
// gloo where the peer's Python has torch; where it has none, naming the row says why.
Axis threads_algorithms() {
  Axis a = kAllToAllVariants.axis("ch05/all_to_all");
  const bool torch = torch_all_to_all_why_not().empty();
  if (torch) {
    a.values.emplace_back(kTorchAllToAllRow);
    if (!a.quick.empty()) a.quick.emplace_back(kTorchAllToAllRow);
  }
  a.check = [table = a.check, torch](std::string_view name) {
    if (name != kTorchAllToAllRow)
      table(name);
    else if (!torch)
      throw UsageError(fmt::format("parameter 'algorithm': '{}' needs PyTorch: {}",
                                   kTorchAllToAllRow, torch_all_to_all_why_not()));
  };
  return a;
}

Experiment threads_experiment() {
  std::vector<Claim> claims = a2a_laws();
  claims.push_back({.id = "bruck_vs_pairwise_small",
                    .statement = "At 4 KiB a rank on 4 thread ranks, Bruck's bus bandwidth over "
                                 "the pairwise exchange's: 2 messages against 3, for 4/3 the bytes",
                    .select = {{"algorithm", "bruck"}, {"ranks", "4"}, {"bytes", "4K"}},
                    .field = "busbw",
                    .versus = {{"algorithm", "pairwise"}},
                    .kind = Claim::Kind::magnitude,
                    .causes = {ClaimCause::cores_and_smt},
                    .unit = "×"});
  return {.id = "ch05/all_to_all",
          .chapter = "05-data-parallel",
          .title =
              "All-to-all on the threads backend (ranks are threads): time, algbw, busbw, "
              "bytes sent against the model, #wrong; PyTorch's (gloo) as a peer",
          .axes = a2a_axes(threads_algorithms(),
                           {"ranks", a2a_rank_counts(), {"2", "4"}, AxisKind::count, 64}),
          .metrics = kA2aMetrics,
          .derive = derive_all_to_all,
          .scaling_axis = "ranks",
          .interleave = {"algorithm"},
          .prepare = threads_all_to_all_trial,
          .figures = a2a_figures("threads", false),
          .derived = {"algbw", "busbw", "sent_over_model"},
          .claims = claims};
}

#if CONCURDL_HAVE_MPI
Experiment mpi_experiment() {
  std::vector<Claim> claims = a2a_laws();
  claims.push_back({.id = "pairwise_vs_mpi_alltoall",
                    // Magnitude: against the MPI library's own algorithm choice.
                    .statement = "How fast the pairwise exchange over MPI point to point is "
                                 "against MPI_Alltoallv at 64 MiB a rank and 2 ranks",
                    .select = {{"algorithm", "pairwise"}, {"ranks", "2"}, {"bytes", "64M"}},
                    .field = "busbw",
                    .versus = {{"algorithm", "native"}},
                    .kind = Claim::Kind::magnitude,
                    .causes = {ClaimCause::peer_kernels},
                    .unit = "×",
                    .min_cpus = 2});
  return {.id = "ch05/all_to_all_mpi",
          .chapter = "05-data-parallel",
          .title =
              "All-to-all across MPI ranks (processes): the chapter's algorithms, "
              "MPI_Alltoallv and Gloo",
          .axes = a2a_axes(mpi_all_to_all_variants().axis("ch05/all_to_all_mpi"),
                           {"ranks", {"2", "4", "8"}, {"2", "4"}, AxisKind::count, kMaxThreads}),
          .metrics = kA2aMetrics,
          .derive = derive_all_to_all,
          .scaling_axis = "ranks",
          .mpi = true,
          .interleave = {"algorithm"},
          .prepare = mpi_all_to_all_trial,
          .figures = a2a_figures("MPI", true),
          .derived = {"algbw", "busbw", "sent_over_model"},
          .claims = claims};
}
#endif

const bool registered = [] {
  register_experiment(threads_experiment());
#if CONCURDL_HAVE_MPI
  register_experiment(mpi_experiment());
#endif
  return true;
}();

}  // namespace
