// ch05/allreduce_hosts (MPI builds): all-reduce across hosts, flat against hierarchical, with the
// two kinds of link measured apart. Run it across hosts, simulated (scripts/cluster) or real:
//   scripts/cluster up 2 --link-gbit 1 && eval "$(scripts/cluster env)"
//   concurdl run --ranks 4 --hostfile /tmp/concurdl-cluster/hostfile ch05/allreduce_hosts
// Rows: p2p_local and p2p_cross, an exchange between rank 0 and the next rank of its host, and
// between rank 0 and the first rank of the next host: both send n bytes to each other at once,
// as each step of a ring does, so both directions of the link are busy. α and β of each link
// class are the line through those times (an exchange, not a ping-pong: a link whose two
// directions together carry less than twice one direction's rate shows it here). Then the
// all-reduces over every rank: the flat ring and tree, MPI_Allreduce and Gloo's chunked ring (the
// peers), and the hierarchical one (host_groups + allreduce_hierarchical: a ring inside each host,
// a ring across hosts). Figures: busbw against size, with the hierarchical and the flat ring's α–β
// models drawn from the two fitted links; the time of one exchange per link class, with its line.
#if CONCURDL_HAVE_MPI

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/cost_model.hpp"
#include "concurdl/dp/mpi_backend.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl::dp::collectives {
namespace {

constexpr MpiAllReduceRow kHostRows[] = {
    {{"p2p_local",
      "rank 0 and the next rank of its host send each other n bytes at once (MPI_Sendrecv, as "
      "a ring step does): the link inside a host"},
     nullptr,
     Peer::exchange_local},
    {{"p2p_cross",
      "the same exchange between rank 0 and the first rank of the next host: the link between "
      "hosts"},
     nullptr,
     Peer::exchange_cross},
    {{"v2_tree", "binomial reduce then broadcast over all ranks, blind to the hosts"},
     &allreduce_tree},
    {{"v4_ring",
      "the flat ring over all ranks in rank order: it crosses between hosts wherever two "
      "neighbours are on different hosts, and every step waits for the slowest link"},
     &allreduce_ring},
    {{"hierarchical",
      "reduce-scatter inside each host (ring), all-reduce of each rank's block across the "
      "hosts (ring), all-gather inside each host: a rank sends only its 1/k block between hosts"},
     &allreduce_ring,
     Peer::hierarchical},
    {{"native", "MPI_Allreduce: Open MPI's own choice of algorithm; the peer"}, &allreduce_native},
#if CONCURDL_HAVE_GLOO
    {{"gloo_ring_chunked",
      "Gloo's AllreduceRingChunked over its TCP transport (CONCURDL_GLOO_IFACE names the "
      "interface): the peer PyTorch's gloo backend uses"},
     nullptr,
     Peer::gloo_ring_chunked},
#endif
};
constexpr VariantTable kHostVariants{kHostRows, "algorithm"};

bool is_p2p(const std::string& algorithm) { return algorithm.rfind("p2p_", 0) == 0; }

// Rank 0's partner: the next rank of its host (local), or the first rank of host 1 (cross).
int partner_of(const std::vector<int>& hosts, bool cross) {
  for (std::size_t r = 1; r < hosts.size(); ++r)
    if (hosts[r] == (cross ? 1 : hosts[0])) return static_cast<int>(r);
  throw Unavailable(cross ? "p2p_cross: every rank is on one host (run across hosts: "
                            "scripts/cluster up 2, then --hostfile)"
                          : "p2p_local: rank 0 is alone on its host (run two or more ranks a "
                            "host: --slots 2)");
}

struct Exchange {
  MPI_Comm comm = MPI_COMM_NULL;
  int partner = 0;
  std::vector<unsigned char> send, recv;
};

// rank 0 and its partner send each other `bytes` at once (MPI_Sendrecv), `trips` times: one
// exchange's time is the total over `trips`. What each received is checked byte for byte.
Trial p2p_trial(bool cross, const Params& p, GroupCache& cache) {
  const auto bytes = static_cast<std::size_t>(param_int(p, "bytes"));
  const int trips =
      static_cast<int>(std::clamp<std::size_t>((std::size_t{4} << 20) / (bytes + 1024), 1, 200));
  auto& state = cache.get<std::shared_ptr<Exchange>>(cross ? "p2p_cross" : "p2p_local", [&] {
    auto s = std::make_shared<Exchange>();
    s->comm = ranks::comm();
    s->partner = partner_of(ranks::hosts_of(s->comm), cross);
    return s;
  });
  std::shared_ptr<Exchange> s = state;
  s->send.resize(bytes);
  s->recv.assign(bytes, 0);
  for (std::size_t i = 0; i < bytes; ++i) s->send[i] = static_cast<unsigned char>(i * 131 + 7);
  auto last_wrong = std::make_shared<double>(0);
  Trial t;
  t.measure = [s, bytes, trips, last_wrong] {
    int me = 0;
    CDL_MPI_CHECK(MPI_Comm_rank(s->comm, &me));
    const int n = static_cast<int>(bytes);
    std::fill(s->recv.begin(), s->recv.end(), 0);
    CDL_MPI_CHECK(MPI_Barrier(s->comm));
    const auto t0 = std::chrono::steady_clock::now();
    const bool pair = me == 0 || me == s->partner;
    const int other = me == 0 ? s->partner : 0;
    for (int i = 0; i < trips && pair; ++i)
      CDL_MPI_CHECK(MPI_Sendrecv(s->send.data(), n, MPI_BYTE, other, 0, s->recv.data(), n, MPI_BYTE,
                                 other, 0, s->comm, MPI_STATUS_IGNORE));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / trips;
    long long mine = 0;
    if (pair)
      for (std::size_t i = 0; i < s->recv.size(); ++i) mine += s->recv[i] != s->send[i];
    long long total = 0;
    CDL_MPI_CHECK(MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, s->comm));
    *last_wrong = static_cast<double>(total);
    // Only the pair's time: the other ranks waited at the barrier and did nothing.
    return Sample(pair ? seconds : 0.0, {{"wrong", static_cast<double>(total)}});
  };
  t.check = [last_wrong] {
    return *last_wrong == 0 ? std::string()
                            : fmt::format("{} bytes came back changed", *last_wrong);
  };
  t.work.bytes = static_cast<double>(bytes);  // each way: bytes_per_s is each direction's rate
  t.notes["pair"] = fmt::format("rank 0 and rank {}", s->partner);
  if (trips > 1) t.notes["iterations"] = fmt::format("{} exchanges per sample, mean", trips);
  return t;
}

void derive_hosts(const Params& p, const Work& w, Record& r) {
  if (!is_p2p(param_str(p, "algorithm"))) return derive_bandwidths(p, w, r);
  if (r.stats.median > 0)
    r.derived["algbw"] = r.derived["busbw"] =
        static_cast<double>(param_int(p, "bytes")) / r.stats.median;
}

// The line time = α + β·bytes through one link class's exchange times (nullopt before both
// ends are measured).
std::optional<Link> fitted_link(const ModelPoint& m, const std::string& row) {
  std::vector<double> bytes, seconds;
  for (const Record* r : m.run_records)
    if (param_str(r->params, "algorithm") == row) {
      bytes.push_back(static_cast<double>(param_int(r->params, "bytes")));
      seconds.push_back(r->stats.median);
    }
  const auto fit = fit_time_vs_bytes(bytes, seconds);
  if (!fit || fit->b <= 0) return std::nullopt;
  return Link{row == "p2p_local" ? "inside a host" : "between hosts", std::max(0.0, fit->a),
              fit->b};
}

// The run's ranks and hosts, read from any all-reduce record's ranks and the hierarchical row's
// k = ranks / hosts (the hosts come from p2p_cross's partner: rank 0's host has `partner` ranks).
struct Shape {
  double ranks = 0, per_host = 0;
};
std::optional<Shape> shape_of(const ModelPoint& m) {
  for (const Record* r : m.run_records) {
    if (param_str(r->params, "algorithm") != "p2p_cross") continue;
    const auto it = r->notes.find("pair");
    if (it == r->notes.end()) continue;
    const auto space = it->second.rfind(' ');
    const double partner = std::atof(it->second.c_str() + space + 1);
    const double ranks = static_cast<double>(param_int(r->params, "ranks"));
    if (partner >= 1 && ranks >= 2 * partner) return Shape{ranks, partner};
  }
  return std::nullopt;
}

std::string links_note(const ModelPoint& m) {
  std::string out;
  for (const char* row : {"p2p_local", "p2p_cross"})
    if (const auto l = fitted_link(m, row))
      out += fmt::format("{}{}: alpha = {:.3g} us, 1/beta = {:.3g} GB/s", out.empty() ? "" : "; ",
                         l->name, l->alpha_s * 1e6, 1e-9 / l->beta_s_per_byte);
  return out.empty() ? "" : "fitted from the exchanges: " + out;
}

// busbw the model gives at m.x bytes: the hierarchical one, whose ranks of a host share its one
// link across (as on the simulated hosts: `sharing` = k), or the flat ring, whose every step
// waits for the one edge that crosses out of each host.
std::optional<double> model_busbw(const ModelPoint& m, bool hierarchical) {
  const auto local = fitted_link(m, "p2p_local");
  const auto cross = fitted_link(m, "p2p_cross");
  const auto shape = shape_of(m);
  if (!local || !cross || !shape) return std::nullopt;
  const double hosts = shape->ranks / shape->per_host;
  const double t = hierarchical ? hierarchical_allreduce_time(shape->per_host, hosts, m.x, *local,
                                                              *cross, shape->per_host)
                                : allreduce_time("v4_ring", shape->ranks, m.x, *cross).value_or(0);
  if (t <= 0) return std::nullopt;
  return m.x / t * bus_factor(static_cast<int>(shape->ranks));
}

std::vector<Figure> host_figures() {
  Figure busbw{.id = "busbw",
               .title =
                   "All-reduce across hosts: bus bandwidth vs size (dashed: alpha-beta "
                   "models on the two links fitted here)",
               .kind = FigureKind::lines,
               .x = "bytes",
               .y = "bytes_per_s",
               .series = "algorithm",
               .where = {{"in_place", "no"}},
               .log_x = true,
               .log_y = true,
               .y_label = "busbw = algbw x 2(n-1)/n; p2p: bytes each way / time (bytes/s, log)",
               .x_label = "bytes per rank (log)"};
  busbw.models.push_back({.label = "hierarchical, alpha-beta on the two fitted links",
                          .series = "hierarchical",
                          .y = [](const ModelPoint& m) { return model_busbw(m, true); },
                          .note = links_note});
  busbw.models.push_back({.label = "flat ring, alpha-beta on the link between hosts",
                          .series = "v4_ring",
                          .y = [](const ModelPoint& m) { return model_busbw(m, false); }});
  Figure links{.id = "links",
               .title =
                   "One exchange inside a host and between hosts: time vs size (dashed: "
                   "the alpha-beta line fitted to each)",
               .kind = FigureKind::lines,
               .x = "bytes",
               .y = "median",
               .series = "algorithm",
               .where = {{"in_place", "no"}},
               .log_x = true,
               .log_y = true,
               .y_label = "time of one exchange, n bytes each way (s, log)",
               .x_label = "bytes (log)"};
  for (const char* row : {"p2p_local", "p2p_cross"})
    links.models.push_back(
        {.label = std::string(row) + ": alpha + beta x bytes",
         .series = row,
         .y = [row = std::string(row)](const ModelPoint& m) -> std::optional<double> {
           const auto l = fitted_link(m, row);
           if (!l) return std::nullopt;
           return l->alpha_s + m.x * l->beta_s_per_byte;
         }});
  return {busbw, links};
}

// Open MPI says how many of the world's ranks share this one's host: all of them, and the
// experiment has nothing to measure between hosts.
std::string one_host() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (local == nullptr || world == nullptr || std::string(local) != world) return "";
  return "every rank is on one host: it measures links between hosts (scripts/cluster up 2, "
         "then concurdl run --hostfile; docs/cluster.md)";
}

const bool registered = [] {
  register_experiment({
      .id = "ch05/allreduce_hosts",
      .chapter = "05-data-parallel",
      .title = "All-reduce across hosts: flat ring and tree, hierarchical, MPI_Allreduce and "
               "Gloo, with each link class's alpha and beta",
      .axes = {kHostVariants.axis("ch05/allreduce_hosts"),
               {"ranks", {"4"}, {}, AxisKind::count, 1024},
               {"bytes",
                {"4K", "16K", "64K", "256K", "1M", "4M", "16M", "64M"},
                {"4K", "64K", "1M", "16M"},
                AxisKind::size,
                kMaxBytes},
               {"in_place", {"no"}}},
      .metrics = kWrongMetric,
      .derive = derive_hosts,
      .scaling_axis = "ranks",
      .mpi = true,
      .interleave = {"algorithm"},
      .prepare =
          [](const Params& p, GroupCache& cache) {
            const MpiAllReduceRow& row = kHostVariants.find(p);
            if (row.peer == Peer::exchange_local || row.peer == Peer::exchange_cross)
              return p2p_trial(row.peer == Peer::exchange_cross, p, cache);
            return mpi_row_trial(row, p, cache);
          },
      .figures = host_figures(),
      .derived = {"algbw", "busbw"},
      .unavailable = one_host,
  });
  return true;
}();

}  // namespace
}  // namespace concurdl::dp::collectives

#endif  // CONCURDL_HAVE_MPI
