// Chapter 05's all-to-all trials, as nccl-tests' alltoall_perf measures them: per algorithm,
// rank count and size (the bytes each rank sends in all, its own block included), the time of
// one all-to-all (the slowest rank's), algbw = bytes / time and busbw = algbw · (n − 1)/n, the
// bytes the communicator saw leave each rank (hand-written rows), and a check of every element
// every rank received. The threads backend with PyTorch's all_to_all_single over gloo as a
// peer, and the mpi backend with MPI_Alltoallv and Gloo's alltoall as peers
// (all_to_all_trials.hpp).
#include "all_to_all_trials.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "collectives.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/dp/rank_team.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/nn/torch_peer.hpp"

#if CONCURDL_HAVE_MPI
#include "concurdl/dp/mpi_backend.hpp"
#endif
#if CONCURDL_HAVE_MPI && CONCURDL_HAVE_GLOO
#include <gloo/alltoall.h>
#include <gloo/rendezvous/context.h>
#endif

namespace concurdl::dp::collectives {

namespace {

using Clock = std::chrono::steady_clock;

// The i-th float rank `from` sends rank `to`: a small integer naming both and the place.
float a2a_value(int from, int to, std::size_t i) {
  return static_cast<float>(
      (static_cast<std::size_t>(from) * 131 + static_cast<std::size_t>(to) * 17 + i * 7) % 8191);
}

void fill_send(std::span<float> send, int rank, int ranks) {
  const std::size_t block = send.size() / static_cast<std::size_t>(ranks);
  for (int j = 0; j < ranks; ++j)
    for (std::size_t i = 0; i < block; ++i)
      send[static_cast<std::size_t>(j) * block + i] = a2a_value(rank, j, i);
}

std::size_t count_wrong(std::span<const float> recv, int rank, int ranks) {
  const std::size_t block = recv.size() / static_cast<std::size_t>(ranks);
  std::size_t wrong = 0;
  for (int j = 0; j < ranks; ++j)
    for (std::size_t i = 0; i < block; ++i)
      wrong += recv[static_cast<std::size_t>(j) * block + i] != a2a_value(j, rank, i);
  return wrong;
}

constexpr float kPoison = -1e30f;

// Each rank's block: the configuration's floats split into `ranks` equal blocks (UsageError when
// they do not split).
std::size_t block_of_config(const Params& p, int ranks) {
  const std::size_t count = floats_of(p);
  if (count % static_cast<std::size_t>(ranks) != 0 || count == 0)
    throw UsageError(fmt::format("parameter 'bytes': {} floats do not split into {} equal blocks",
                                 count, ranks));
  return count / static_cast<std::size_t>(ranks);
}

double bus_factor_a2a(int ranks) { return ranks > 1 ? static_cast<double>(ranks - 1) / ranks : 0; }

std::string wrong_text(double wrong) {
  return wrong == 0
             ? std::string()
             : fmt::format("{} received elements are not the ones sent (over all ranks)", wrong);
}

// One rank's share of a sample: `iters` all-to-alls, each started together and timed here; the
// send buffer is rewritten before each (untimed) and the receive buffer poisoned. Returns the
// mean time and the bytes the communicator saw leave this rank in one of them.
template <class Barrier, class Op>
std::pair<double, double> time_rank(int iters, std::span<float> send, std::span<float> recv,
                                    int rank, int ranks, const Communicator* counted,
                                    Barrier&& barrier, Op&& op) {
  double total = 0, sent = 0;
  for (int it = 0; it < iters; ++it) {
    fill_send(send, rank, ranks);
    std::fill(recv.begin(), recv.end(), kPoison);
    barrier();
    const std::uint64_t before = counted ? counted->bytes_sent() : 0;
    const auto t0 = Clock::now();
    op();
    total += std::chrono::duration<double>(Clock::now() - t0).count();
    if (counted) sent = static_cast<double>(counted->bytes_sent() - before);
  }
  return {total / iters, sent};
}

Trial finish(Trial trial, int ranks, std::size_t floats, int iters) {
  trial.work.bytes = static_cast<double>(floats * sizeof(float)) * bus_factor_a2a(ranks);
  if (static_cast<unsigned>(ranks) > hardware_threads())
    trial.notes["oversubscribed"] =
        fmt::format("{} ranks on {} CPUs: ranks take turns on a core", ranks, hardware_threads());
  if (iters > 1)
    trial.notes["iterations"] = fmt::format("{} all-to-alls per sample, mean time", iters);
  return trial;
}

struct RankBuffers {
  std::vector<std::vector<float>> send, recv;
};

// Samples asked of one run of the PyTorch peer: the harness's warm-up and the quick profile's
// five (starting one costs seconds); a profile that takes more runs it again.
constexpr int kTorchSamples = 6;

// What the peer's runs returned: its samples not yet handed to the harness (time, wrong
// elements), the wrong elements of its untimed calls before timing, and the torch it ran.
struct TorchA2aState {
  std::vector<std::pair<double, double>> pending;
  double wrong_before = 0, last_wrong = 0;
  std::string version;
};

}  // namespace

void derive_all_to_all(const Params& p, const Work&, Record& r) {
  const double bytes = static_cast<double>(param_int(p, "bytes"));
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  if (r.stats.median > 0) {
    r.derived["algbw"] = bytes / r.stats.median;
    r.derived["busbw"] = bytes / r.stats.median * bus_factor_a2a(ranks);
  }
  // The bytes the communicator counted against the row's traffic model.
  const auto sent = r.metrics.find("sent_bytes");
  if (sent == r.metrics.end()) return;
  const std::string& algorithm = param_str(p, "algorithm");
  const double floats = bytes / sizeof(float);
  const AllToAllTraffic model =
      algorithm == "bruck" ? bruck_traffic(ranks, floats) : pairwise_traffic(ranks, floats);
  if (model.floats > 0)
    r.derived["sent_over_model"] = sent->second.stats.median / (model.floats * sizeof(float));
}

const std::string& torch_all_to_all_why_not() {
  static const std::string why = [] {
    if (!nn::torch_why_not().empty()) return nn::torch_why_not();
    if (!std::filesystem::exists(nn::torch_all_to_all_script()))
      return "no " + nn::torch_all_to_all_script().string();
    return std::string();
  }();
  return why;
}

Trial torch_all_to_all_trial(const Params& p) {
  if (const std::string& why = torch_all_to_all_why_not(); !why.empty())
    throw UsageError(
        fmt::format("parameter 'algorithm': '{}' needs PyTorch: {}", kTorchAllToAllRow, why));
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const std::size_t block = block_of_config(p, ranks);
  const std::size_t floats = block * static_cast<std::size_t>(ranks);
  const int iters = iterations(floats * sizeof(float));
  const nn::TorchPython& py = nn::torch_pythons().front();
  const std::string flags = fmt::format("--ranks {} --bytes {} --iters {} --repeat {}", ranks,
                                        floats * sizeof(float), iters, kTorchSamples);
  auto st = std::make_shared<TorchA2aState>();
  Trial trial;
  // Its samples are timed inside one run of the script, so they are not interleaved with the
  // other rows'; one sample per call.
  trial.measure = [st, flags, python = py.python]() -> Sample {
    if (st->pending.empty()) {
      const nlohmann::json j = nn::run_torch_script(nn::torch_all_to_all_script(), flags, python);
      const nlohmann::json& seconds = j.at("seconds");
      const nlohmann::json& wrong = j.at("wrong");
      if (seconds.empty() || seconds.size() != wrong.size())
        throw std::runtime_error("PyTorch peer: " + j.dump() +
                                 ": not one time and one wrong count per sample");
      for (std::size_t i = 0; i < seconds.size(); ++i)
        st->pending.emplace_back(seconds[i].get<double>(), wrong[i].get<double>());
      st->wrong_before += j.at("wrong_before").get<double>();
      st->version = j.value("torch", "");
    }
    const auto [seconds, wrong] = st->pending.front();
    st->pending.erase(st->pending.begin());
    st->last_wrong = wrong;
    // The bytes sent are PyTorch's to count: sent_bytes is left out.
    return Sample(seconds, {{"wrong", wrong}});
  };
  trial.check = [st, version = py.version]() -> std::string {
    if (st->wrong_before != 0)
      return fmt::format(
          "{} elements received in the peer's untimed call before its timing are not the ones "
          "sent (over all ranks)",
          st->wrong_before);
    if (!st->version.empty() && st->version != version)
      return fmt::format("the peer ran PyTorch {}, not the {} its package records", st->version,
                         version);
    return wrong_text(st->last_wrong);
  };
  const char* iface = std::getenv("CONCURDL_GLOO_IFACE");
  trial.notes[kTorchAllToAllRow] = fmt::format(
      "PyTorch {} ({}): torch.distributed.all_to_all_single, equal splits, float32, over gloo "
      "(TCP on {}) in {} processes of kernels/nn/scripts/torch_all_to_all.py, 1 thread each; its "
      "samples are timed in one run of the script, not interleaved with the other rows",
      py.version, py.python, iface != nullptr && *iface != '\0' ? iface : "loopback", ranks);
  return finish(std::move(trial), ranks, floats, iters);
}

Trial threads_all_to_all_trial(const Params& p, GroupCache& cache) {
  if (param_str(p, "algorithm") == kTorchAllToAllRow) return torch_all_to_all_trial(p);
  const AllToAllVariant& row = kAllToAllVariants.find(p);
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const std::size_t block = block_of_config(p, ranks);
  const std::size_t floats = block * static_cast<std::size_t>(ranks);
  const int iters = iterations(floats * sizeof(float));
  auto& team = cache.get<std::shared_ptr<RankTeam>>(
      "team", [&] { return std::make_shared<RankTeam>(ranks); });
  auto& buffers = cache.get<std::shared_ptr<RankBuffers>>("buffers", [&] {
    auto b = std::make_shared<RankBuffers>();
    b->send.resize(static_cast<std::size_t>(ranks));
    b->recv.resize(static_cast<std::size_t>(ranks));
    team->run([&](Communicator& comm) {  // first touched by the rank's own thread
      const auto r = static_cast<std::size_t>(comm.rank());
      b->send[r].assign(floats, 0.0f);
      b->recv[r].assign(floats, kPoison);
    });
    return b;
  });
  std::shared_ptr<RankTeam> t = team;
  std::shared_ptr<RankBuffers> b = buffers;
  auto last_wrong = std::make_shared<double>(0);
  Trial trial;
  trial.measure = [t, b, fn = row.run, counted = row.hand_written, iters, ranks, last_wrong] {
    std::vector<double> seconds(static_cast<std::size_t>(ranks)), sent(seconds.size());
    std::vector<std::size_t> wrong(seconds.size());
    t->run([&](Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      std::tie(seconds[r], sent[r]) = time_rank(
          iters, b->send[r], b->recv[r], comm.rank(), ranks, counted ? &comm : nullptr,
          [&] { comm.barrier(); }, [&] { fn(comm, b->send[r], b->recv[r], {}); });
      wrong[r] = count_wrong(b->recv[r], comm.rank(), ranks);
    });
    double total_wrong = 0;
    for (std::size_t w : wrong) total_wrong += static_cast<double>(w);
    *last_wrong = total_wrong;
    std::map<std::string, double> metrics = {{"wrong", total_wrong}};
    if (counted) metrics["sent_bytes"] = *std::max_element(sent.begin(), sent.end());
    return Sample(*std::max_element(seconds.begin(), seconds.end()), metrics);
  };
  trial.check = [last_wrong] { return wrong_text(*last_wrong); };
  if (row.name == "native" && !torch_all_to_all_why_not().empty())
    trial.notes[kTorchAllToAllRow] = "not measured: " + torch_all_to_all_why_not();
  return finish(std::move(trial), ranks, floats, iters);
}

#if CONCURDL_HAVE_MPI

namespace {

struct MpiA2aState {
  std::shared_ptr<MpiCommunicator> comm;
#if CONCURDL_HAVE_GLOO
  std::shared_ptr<gloo::Context> gloo;
#endif
  std::vector<float> send, recv;
};

}  // namespace

Trial mpi_all_to_all_trial(const Params& p, GroupCache& cache) {
  const MpiAllToAllRow& row = mpi_all_to_all_variants().find(p);
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const std::size_t block = block_of_config(p, ranks);
  const std::size_t floats = block * static_cast<std::size_t>(ranks);
  const int iters = iterations(floats * sizeof(float));
  auto& state = cache.get<std::shared_ptr<MpiA2aState>>("state", [&] {
    auto s = std::make_shared<MpiA2aState>();
    s->comm = std::make_shared<MpiCommunicator>(ranks::comm());
    s->send.assign(floats, 0.0f);
    s->recv.assign(floats, kPoison);
    return s;
  });
  std::shared_ptr<MpiA2aState> s = state;
  std::function<void()> op;
  Trial trial;
  if (!row.gloo) {
    op = [s, fn = row.run] { fn(*s->comm, s->send, s->recv, {}); };
  } else {
#if CONCURDL_HAVE_GLOO
    if (!s->gloo) s->gloo = gloo_context(s->comm->comm());
    // The buffers are registered with Gloo once, as a caller that keeps them would.
    auto opts = std::make_shared<gloo::AlltoallOptions>(s->gloo);
    opts->setInput(s->send.data(), s->send.size());
    opts->setOutput(s->recv.data(), s->recv.size());
    op = [s, opts] { gloo::alltoall(*opts); };
    const char* iface = std::getenv("CONCURDL_GLOO_IFACE");
    trial.notes["transport"] =
        fmt::format("Gloo TCP on {}, rendezvous through a FileStore",
                    iface != nullptr && *iface != '\0' ? iface : std::string("loopback"));
#endif
  }
  auto last_wrong = std::make_shared<double>(0);
  const bool counted = !row.gloo && row.hand_written;
  trial.measure = [s, op, iters, ranks, counted, last_wrong] {
    const int r = s->comm->rank();
    const auto [seconds, sent] = time_rank(
        iters, s->send, s->recv, r, ranks, counted ? s->comm.get() : nullptr,
        [&] { CDL_MPI_CHECK(MPI_Barrier(s->comm->comm())); }, op);
    const auto mine = static_cast<long long>(count_wrong(s->recv, r, ranks));
    long long total = 0;
    CDL_MPI_CHECK(MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, s->comm->comm()));
    double most_sent = sent;
    CDL_MPI_CHECK(MPI_Allreduce(&sent, &most_sent, 1, MPI_DOUBLE, MPI_MAX, s->comm->comm()));
    *last_wrong = static_cast<double>(total);
    std::map<std::string, double> metrics = {{"wrong", static_cast<double>(total)}};
    if (counted) metrics["sent_bytes"] = most_sent;
    return Sample(seconds, metrics);
  };
  trial.check = [last_wrong] { return wrong_text(*last_wrong); };
  return finish(std::move(trial), ranks, floats, iters);
}

constexpr MpiAllToAllRow kMpiA2aRows[] = {
    {{"pairwise", "the chapter's pairwise exchange over MPI_Sendrecv"}, &all_to_all_pairwise},
    {{"bruck", "Bruck's log2(n) exchanges over MPI_Sendrecv"}, &all_to_all_bruck},
    {{"native",
      "MPI_Alltoallv: Open MPI's own choice of algorithm; the peer the hand-written ones are "
      "measured against"},
     &all_to_all_native,
     false},
#if CONCURDL_HAVE_GLOO
    {{"gloo",
      "Gloo's alltoall (PyTorch's gloo backend's library) over its TCP transport on loopback"},
     nullptr,
     false,
     true},
#endif
};
constexpr VariantTable kMpiAllToAllVariants{kMpiA2aRows, "algorithm"};

const VariantTable<MpiAllToAllRow>& mpi_all_to_all_variants() { return kMpiAllToAllVariants; }

#endif  // CONCURDL_HAVE_MPI

}  // namespace concurdl::dp::collectives
