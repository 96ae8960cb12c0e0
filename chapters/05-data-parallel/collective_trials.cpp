// Chapter 05's all-reduce trials, as nccl-tests measures them: the data and its check, the
// threads backend's team of rank threads, and the mpi backend with MPI_Allreduce and Gloo's
// rings as peers (collectives.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/dp/rank_team.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

#if CONCURDL_HAVE_MPI
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/dp/mpi_backend.hpp"
#endif

#if CONCURDL_HAVE_GLOO
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#endif

#include "collectives.hpp"

namespace concurdl::dp::collectives {

using Clock = std::chrono::steady_clock;

// --- data and the check ------------------------------------------------------------------------

// Rank r's element i: a small integer, so every sum is exact in float whatever the order of the
// additions, and the expected sum has a closed form. Position and rank both matter, so a block
// in the wrong place or a rank counted twice (or not at all) shows.
float value(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7) % 1021) - 510 + rank);
}
float expected_sum(int ranks, std::size_t i) {
  return static_cast<float>(ranks * (static_cast<int>((i * 7) % 1021) - 510) +
                            ranks * (ranks - 1) / 2);
}
void fill_input(std::span<float> v, int rank) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(rank, i);
}
constexpr float kPoison = -1e30f;

// nccl-tests' #wrong on one rank: elements of the result that differ from the exact sum, plus,
// out of place, elements of the input that changed.
std::size_t count_wrong(std::span<const float> in, std::span<const float> out, int ranks, int rank,
                        bool in_place) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < out.size(); ++i) wrong += out[i] != expected_sum(ranks, i);
  if (!in_place)
    for (std::size_t i = 0; i < in.size(); ++i) wrong += in[i] != value(rank, i);
  return wrong;
}

// --- the axes and the bandwidth model ----------------------------------------------------------

// Rank counts for the full profile: 2, 4, 8, ... up to twice this machine's CPUs (the ones past
// the CPUs oversubscribe), at most 64; the quick profile has 2 and 4.
std::vector<std::string> rank_counts() {
  std::vector<std::string> out;
  const unsigned top = std::clamp(2 * hardware_threads(), 4u, 64u);
  for (unsigned r = 2; r <= top; r *= 2) out.push_back(std::to_string(r));
  return out;
}

// All-reduces per sample: enough that a sample of a small size lasts well over the clock's
// resolution, one for the largest sizes.
int iterations(std::size_t bytes) {
  return static_cast<int>(
      std::clamp<std::size_t>((std::size_t{64} << 20) / (bytes + 16384), 1, 200));
}

// nccl-tests' bandwidths: algbw = bytes / time, busbw = algbw · 2(n−1)/n (what each rank's link
// carries in a bandwidth-optimal all-reduce, so comparable with the link's own bandwidth at any
// n). The declared work is the bus bytes, so the harness's bytes_per_s is busbw (with its
// interval); algbw is derived beside it.
double bus_factor(int ranks) { return ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0; }

void derive_bandwidths(const Params& p, const Work&, Record& r) {
  const double bytes = static_cast<double>(param_int(p, "bytes"));
  if (r.stats.median <= 0) return;
  const double algbw = bytes / r.stats.median;
  r.derived["algbw"] = algbw;
  r.derived["busbw"] = algbw * bus_factor(static_cast<int>(param_int(p, "ranks")));
}

std::string wrong_text(double wrong) {
  return wrong == 0 ? std::string()
                    : fmt::format("{} elements differ from the exact sum (over all ranks)", wrong);
}

// The axes both experiments share, after the algorithm.
std::vector<Axis> shared_axes(Axis algorithm, Axis ranks) {
  return {std::move(algorithm),
          std::move(ranks),
          {"bytes", kBytesFull, kBytesQuick, AxisKind::size, kMaxBytes},
          {"in_place", {"no", "yes"}}};
}

bool in_place_param(const Params& p) {
  const std::string& v = param_str(p, "in_place");
  if (v != "yes" && v != "no")
    throw UsageError(fmt::format("parameter 'in_place': '{}' is not yes or no", v));
  return v == "yes";
}

std::size_t floats_of(const Params& p) {
  const auto bytes = static_cast<std::size_t>(param_int(p, "bytes"));
  if (bytes % sizeof(float) != 0)
    throw UsageError(fmt::format("parameter 'bytes': {} is not a whole number of floats", bytes));
  return bytes / sizeof(float);
}

// One rank's share of a sample: `iters` all-reduces, each started together (barrier) and timed
// on this rank. The input is rewritten before each (untimed), in place (where the last result
// overwrote it) and out of place alike (same values), so both start from the same cache state:
// rewriting it only in place left in place's input in cache and out of place's not, and at
// sizes that fit in cache the two rows compared that, not the algorithms. Returns the mean time.
template <class Barrier, class Op>
double time_rank(int iters, std::span<float> in, int rank, Barrier&& barrier, Op&& op) {
  double total = 0;
  for (int it = 0; it < iters; ++it) {
    fill_input(in, rank);
    barrier();
    const auto t0 = Clock::now();
    op();
    total += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return total / iters;
}

// --- ch05/allreduce: the threads backend -------------------------------------------------------

// Every rank's input and output, allocated and first touched by the rank's own thread.
struct RankBuffers {
  std::vector<std::vector<float>> in, out;
};

struct Team {
  std::shared_ptr<RankTeam> team;
  std::shared_ptr<RankBuffers> buffers;
};

Team team_for(GroupCache& cache, int ranks, std::size_t count) {
  auto& team = cache.get<std::shared_ptr<RankTeam>>(
      "team", [&] { return std::make_shared<RankTeam>(ranks); });
  auto& buffers = cache.get<std::shared_ptr<RankBuffers>>("buffers", [&] {
    auto b = std::make_shared<RankBuffers>();
    b->in.resize(static_cast<std::size_t>(ranks));
    b->out.resize(static_cast<std::size_t>(ranks));
    team->run([&](Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      b->in[r].resize(count);
      b->out[r].assign(count, kPoison);
      fill_input(b->in[r], comm.rank());
    });
    return b;
  });
  return {team, buffers};
}

// One configuration on the threads backend: a sample is the slowest rank's mean time over
// iterations(bytes) all-reduces, with the wrong elements of the last one over all ranks.
Trial threads_trial(AllReduceFn fn, const Params& p, GroupCache& cache) {
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const std::size_t count = floats_of(p);
  const bool in_place = in_place_param(p);
  const int iters = iterations(count * sizeof(float));
  const Team t = team_for(cache, ranks, count);
  auto last_wrong = std::make_shared<double>(0);
  Trial trial;
  trial.measure = [=] {
    std::vector<double> seconds(static_cast<std::size_t>(ranks), 0);
    std::vector<std::size_t> wrong(static_cast<std::size_t>(ranks), 0);
    t.team->run([&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<float>& in = t.buffers->in[static_cast<std::size_t>(r)];
      std::vector<float>& out = t.buffers->out[static_cast<std::size_t>(r)];
      if (!in_place) std::fill(out.begin(), out.end(), kPoison);
      std::span<float> dst = in_place ? std::span<float>(in) : std::span<float>(out);
      seconds[static_cast<std::size_t>(r)] = time_rank(
          iters, in, r, [&] { comm.barrier(); }, [&] { fn(comm, in, dst, {}); });
      wrong[static_cast<std::size_t>(r)] = count_wrong(in, dst, ranks, r, in_place);
      if (in_place) fill_input(in, r);  // the next configuration's input, out of place
    });
    double total_wrong = 0;
    for (std::size_t w : wrong) total_wrong += static_cast<double>(w);
    *last_wrong = total_wrong;
    return Sample(*std::max_element(seconds.begin(), seconds.end()), {{"wrong", total_wrong}});
  };
  trial.check = [last_wrong] { return wrong_text(*last_wrong); };
  trial.work.bytes = static_cast<double>(count * sizeof(float)) * bus_factor(ranks);
  if (static_cast<unsigned>(ranks) > hardware_threads())
    trial.notes["oversubscribed"] = fmt::format(
        "{} ranks on {} CPUs: ranks take turns on a core, and a rank that waits for "
        "a descheduled neighbour waits for the scheduler",
        ranks, hardware_threads());
  if (iters > 1)
    trial.notes["iterations"] = fmt::format("{} all-reduces per sample, mean time", iters);
  return trial;
}

// --- ch05/allreduce_mpi: the mpi backend, with MPI_Allreduce and Gloo as peers -----------------

#if CONCURDL_HAVE_MPI

constexpr MpiAllReduceRow kMpiRows[] = {
    {{"v1_naive", "kAllReduceVariants' v1 over MPI_Send/MPI_Recv: all traffic through rank 0"},
     &allreduce_naive},
    {{"v2_tree", "binomial reduce then broadcast over MPI point to point"}, &allreduce_tree},
    {{"v3_halving_doubling", "Rabenseifner's halving-doubling over MPI point to point"},
     &allreduce_halving_doubling},
    {{"v4_ring",
      "the chapter's pipelined ring over MPI_Isend/MPI_Irecv (receives into scratch, "
      "then adds: the communicator's default irecv_reduce)"},
     &allreduce_ring},
    {{"native",
      "MPI_Allreduce: Open MPI's own choice of algorithm (its tuned component picks "
      "by size and rank count); the peer the ring is measured against"},
     &allreduce_native},
#if CONCURDL_HAVE_GLOO
    {{"gloo_ring",
      "Gloo's AllreduceRing (PyTorch's gloo backend's library) over its TCP "
      "transport on loopback: the whole vector goes round the ring (n-1 steps)"},
     nullptr,
     Peer::gloo_ring},
    {{"gloo_ring_chunked",
      "Gloo's AllreduceRingChunked: reduce-scatter + all-gather in chunks, "
      "the bandwidth-optimal ring, over TCP on loopback"},
     nullptr,
     Peer::gloo_ring_chunked},
#endif
};
constexpr VariantTable kMpiAllReduceVariants{kMpiRows, "algorithm"};

const VariantTable<MpiAllReduceRow>& mpi_allreduce_variants() { return kMpiAllReduceVariants; }

#if CONCURDL_HAVE_GLOO
// A Gloo context over the ranks of the current configuration: a FileStore in a fresh temporary
// directory (rank 0 makes it and broadcasts its path over MPI), then a full mesh of TCP pairs.
// The interface is loopback ("lo") unless CONCURDL_GLOO_IFACE names another (several hosts).
std::shared_ptr<gloo::Context> gloo_context(MPI_Comm comm) {
  int rank = 0, size = 1;
  CDL_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  CDL_MPI_CHECK(MPI_Comm_size(comm, &size));
  char path[4096] = {};
  if (rank == 0) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "concurdl-gloo-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("gloo: cannot make a temporary directory for its rendezvous");
    tmpl.copy(path, sizeof(path) - 1);
  }
  CDL_MPI_CHECK(MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, comm));
  gloo::transport::tcp::attr attr;
  const char* iface = std::getenv("CONCURDL_GLOO_IFACE");
  attr.iface = iface != nullptr && *iface != '\0' ? iface : "lo";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  gloo::rendezvous::FileStore store(path);
  context->connectFullMesh(store, device);
  CDL_MPI_CHECK(MPI_Barrier(comm));
  if (rank == 0) std::filesystem::remove_all(path);
  return context;
}
#endif

struct MpiState {
  std::shared_ptr<MpiCommunicator> comm;
  std::shared_ptr<HostGroups> hosts;  // the hierarchical row's, made on its first use
#if CONCURDL_HAVE_GLOO
  std::shared_ptr<gloo::Context> gloo;
#endif
  std::vector<float> in, out;
};

Trial mpi_trial(const Params& p, GroupCache& cache) {
  return mpi_row_trial(kMpiAllReduceVariants.find(p), p, cache);
}

Trial mpi_row_trial(const MpiAllReduceRow& row, const Params& p, GroupCache& cache) {
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const std::size_t count = floats_of(p);
  const bool in_place = in_place_param(p);
  const int iters = iterations(count * sizeof(float));
  auto& state = cache.get<std::shared_ptr<MpiState>>("state", [&] {
    auto s = std::make_shared<MpiState>();
    s->comm = std::make_shared<MpiCommunicator>(ranks::comm());
    s->in.resize(count);
    s->out.assign(count, kPoison);
    fill_input(s->in, s->comm->rank());
    return s;
  });
  std::shared_ptr<MpiState> s = state;
  std::function<void()> op;
  Trial trial;
  if (row.peer == Peer::none) {
    op = [s, fn = row.run, in_place] {
      fn(*s->comm, s->in, in_place ? std::span<float>(s->in) : std::span<float>(s->out), {});
    };
  } else if (row.peer == Peer::hierarchical) {
    if (!s->hosts) {
      try {
        s->hosts = std::make_shared<HostGroups>(host_groups(
            *s->comm, ranks::hosts_of(s->comm->comm())[static_cast<std::size_t>(s->comm->rank())]));
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("{}: {}", row.name, e.what()));
      }
    }
    op = [s, fn = row.run, in_place] {
      allreduce_hierarchical(*s->hosts, s->in,
                             in_place ? std::span<float>(s->in) : std::span<float>(s->out), fn);
    };
  } else {
#if CONCURDL_HAVE_GLOO
    if (!s->gloo) s->gloo = gloo_context(s->comm->comm());
    if (count > static_cast<std::size_t>(INT32_MAX)) throw UsageError("gloo: count too large");
    // Gloo works in place on the pointers it is given: out of place, the input is copied to
    // the output first (timed: it is part of that all-reduce, as for the other rows).
    float* target = in_place ? s->in.data() : s->out.data();
    std::shared_ptr<gloo::Algorithm> algo;
    if (row.peer == Peer::gloo_ring)
      algo = std::make_shared<gloo::AllreduceRing<float>>(s->gloo, std::vector<float*>{target},
                                                          static_cast<int>(count));
    else
      algo = std::make_shared<gloo::AllreduceRingChunked<float>>(
          s->gloo, std::vector<float*>{target}, static_cast<int>(count));
    op = [s, algo, in_place, count] {
      if (!in_place && count > 0) std::copy(s->in.begin(), s->in.end(), s->out.begin());
      algo->run();
    };
    const char* iface = std::getenv("CONCURDL_GLOO_IFACE");
    trial.notes["transport"] =
        fmt::format("Gloo TCP on {}, rendezvous through a FileStore",
                    iface != nullptr && *iface != '\0' ? iface : std::string("loopback"));
#endif
  }
  auto last_wrong = std::make_shared<double>(0);
  trial.measure = [s, op, iters, in_place, ranks, last_wrong] {
    const int r = s->comm->rank();
    if (!in_place) std::fill(s->out.begin(), s->out.end(), kPoison);
    std::span<float> dst = in_place ? std::span<float>(s->in) : std::span<float>(s->out);
    const double seconds = time_rank(
        iters, s->in, r, [&] { CDL_MPI_CHECK(MPI_Barrier(s->comm->comm())); }, op);
    const auto mine = static_cast<long long>(count_wrong(s->in, dst, ranks, r, in_place));
    long long total = 0;
    CDL_MPI_CHECK(MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, s->comm->comm()));
    if (in_place) fill_input(s->in, r);
    *last_wrong = static_cast<double>(total);
    return Sample(seconds, {{"wrong", static_cast<double>(total)}});
  };
  trial.check = [last_wrong] { return wrong_text(*last_wrong); };
  trial.work.bytes = static_cast<double>(count * sizeof(float)) * bus_factor(ranks);
  if (static_cast<unsigned>(ranks) > hardware_threads())
    trial.notes["oversubscribed"] = fmt::format(
        "{} ranks on {} CPUs: processes take turns on a core", ranks, hardware_threads());
  if (iters > 1)
    trial.notes["iterations"] = fmt::format("{} all-reduces per sample, mean time", iters);
  return trial;
}

#endif  // CONCURDL_HAVE_MPI

}  // namespace concurdl::dp::collectives
