// Expert parallelism (expert_parallel.hpp): nn::MoeLayer's experts spread over 1, 2, 3, 4 and 8
// thread ranks, each rank holding an uneven shard of the batch (one rank an empty one), against
// nn::MoeLayer on the concatenated batch, for k = 1 and 2, capacity factor 1 (with drops) and
// dropless, aux loss on and off, both token exchanges: every route (expert, gate, kept, slot)
// and the statistics are identical; outputs, input gradients, every expert's gradient on its
// rank and the router gradient summed over the ranks agree to kTol. A batch built so that lower
// ranks' tokens fill the experts shows the slots are handed out in the whole batch's order (not
// per rank, not rank by rank). The initial parameters are MoeLayer's; the bytes counted are the
// rows' (pairwise) or none (native); E < R is refused.
//   ch06_tests --gtest_filter='ExpertParallel*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/expert_parallel.hpp"
#include "concurdl/nn/moe.hpp"

namespace {

using namespace concurdl::mp;
using concurdl::kernels::GemmVersion;
using concurdl::testing::within_seconds;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;

constexpr int kDeadline = 120;
// |got - want| <= tol (1 + |want|). The router gradient is summed over each rank's tokens and
// then over the ranks, not over all tokens in one pass: a few float roundings (1.5e-7 at most
// here), so kTol. Outputs, input gradients and expert gradients are the same code on the same
// rows in the same order, and with the GEMM whose rows do not depend on each other (v2_ikj)
// they must be equal to the last bit; with OpenBLAS, which may pick its kernel by the number
// of rows, within kTol.
constexpr float kTol = 1e-6f;

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;  // [-1, 1)
  }
  return v;
}

float worst(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size()) return 1e9f;
  float w = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    w = std::max(w, std::fabs(got[i] - want[i]) / (1.0f + std::fabs(want[i])));
  return w;
}

// A batch split over ranks: where rank r's rows start, r = 0 .. R.
std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& shards) {
  std::vector<std::size_t> at{0};
  for (const std::size_t n : shards) at.push_back(at.back() + n);
  return at;
}

// Uneven shards of 2 to 6 rows; at 8 ranks, rank 5 holds none; one rank holds 12.
std::vector<std::size_t> uneven_shards(int ranks) {
  if (ranks == 1) return {12};
  std::vector<std::size_t> s;
  for (int r = 0; r < ranks; ++r) s.push_back(ranks == 8 && r == 5 ? 0 : 2 + (3 * r + 1) % 5);
  return s;
}

// Skewed router (so capacity bites) and non-zero expert biases, as kernels/nn's MoE tests do.
void perturb(nn::MoeLayer& m) {
  const nn::LayerView router = m.router();
  for (std::size_t i = 0; i < router.w.rows * router.w.cols; ++i) router.w.data[i] *= 4.0f;
  const auto rb = values(router.b.size(), 71);
  for (std::size_t i = 0; i < rb.size(); ++i) router.b[i] = 0.3f * rb[i];
  for (std::size_t e = 0; e < m.experts(); ++e) {
    const std::span<float> p = m.expert_parameters(e);
    const nn::ExpertView v = m.expert(e);
    const auto b = values(p.size(), 80 + static_cast<std::uint32_t>(e));
    for (std::size_t i = 0; i < v.up.b.size(); ++i) v.up.b[i] = 0.1f * b[i];
    for (std::size_t i = 0; i < v.down.b.size(); ++i) v.down.b[i] = 0.1f * b[v.up.b.size() + i];
  }
}

struct Case {
  nn::MoeSpec spec;
  std::vector<std::size_t> shards;
  GemmVersion gemm = GemmVersion::v2_ikj;
  TokenExchange exchange = TokenExchange::native;
  std::string name() const {
    return "R=" + std::to_string(shards.size()) + " E=" + std::to_string(spec.experts) +
           " k=" + std::to_string(spec.top_k) + (spec.dropless ? " dropless" : " cf=1") +
           " aux=" + std::to_string(spec.aux_alpha) +
           (exchange == TokenExchange::native ? " native" : " pairwise") +
           (gemm == GemmVersion::openblas ? " openblas" : "");
  }
};

// What one rank computed.
struct RankResult {
  std::vector<nn::MoeRoute> routes;
  std::vector<float> y, dx, router_grad;
  std::vector<std::vector<float>> expert_grads;  // its experts, first_expert() on
  std::size_t first = 0, offset = 0;
  ExpertParallelStats stats;
  bool init_matches = false;
};

// Runs the case on thread ranks from x and dy (the whole batch's) with `whole`'s parameters.
std::vector<RankResult> run_sharded(const Case& c, nn::MoeLayer& whole, const std::vector<float>& x,
                                    const std::vector<float>& dy, std::uint64_t seed) {
  const int ranks = static_cast<int>(c.shards.size());
  const std::size_t d = c.spec.width;
  const std::vector<std::size_t> at = offsets_of(c.shards);
  nn::MoeLayer fresh(c.spec, seed);
  std::vector<RankResult> out(static_cast<std::size_t>(ranks));
  within_seconds(kDeadline, [&] {
    dp::run_threads(ranks, [&](dp::Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      RankResult& res = out[r];
      ExpertParallelMoe ep(comm, c.spec, seed, {.gemm = c.gemm, .exchange = c.exchange});
      res.first = ep.first_expert();
      res.init_matches = std::ranges::equal(ep.router_parameters(), fresh.router_parameters());
      for (std::size_t e = ep.first_expert(); e < ep.first_expert() + ep.local_experts(); ++e) {
        res.init_matches = res.init_matches &&
                           std::ranges::equal(ep.expert_parameters(e), fresh.expert_parameters(e));
        std::ranges::copy(whole.expert_parameters(e), ep.expert_parameters(e).begin());
      }
      std::ranges::copy(whole.router_parameters(), ep.router_parameters().begin());
      const std::size_t n = c.shards[r];
      res.y.assign(n * d, 0.0f);
      res.dx.assign(n * d, 0.0f);
      ep.forward(x.data() + at[r] * d, n, res.y.data());
      ep.backward(dy.data() + at[r] * d, res.dx.data());
      res.stats = ep.stats();
      ep.all_reduce_router_gradients();
      res.routes.assign(ep.routes().begin(), ep.routes().end());
      res.offset = ep.token_offset();
      res.router_grad.assign(ep.router_gradients().begin(), ep.router_gradients().end());
      for (std::size_t e = ep.first_expert(); e < ep.first_expert() + ep.local_experts(); ++e)
        res.expert_grads.emplace_back(ep.expert_gradients(e).begin(), ep.expert_gradients(e).end());
    });
  });
  return out;
}

void check_case(const Case& c) {
  SCOPED_TRACE(c.name());
  constexpr std::uint64_t kSeed = 7;
  const std::size_t d = c.spec.width, k = c.spec.top_k, E = c.spec.experts;
  const int ranks = static_cast<int>(c.shards.size());
  const std::vector<std::size_t> at = offsets_of(c.shards);
  const std::size_t T = at.back();
  const std::vector<float> x = values(T * d, 11), dy = values(T * d, 12);
  nn::MoeLayer whole(c.spec, kSeed, c.gemm);
  perturb(whole);
  std::vector<float> y(T * d), dx(T * d);
  const nn::MoeStats& want = whole.forward(x.data(), T, y.data());
  whole.backward(dy.data(), dx.data());
  if (!c.spec.dropless) {
    EXPECT_GT(want.dropped, 0u) << "the case must drop choices";
  }
  const std::vector<RankResult> got = run_sharded(c, whole, x, dy, kSeed);

  for (int r = 0; r < ranks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankResult& g = got[static_cast<std::size_t>(r)];
    const std::size_t lo = at[static_cast<std::size_t>(r)],
                      n = c.shards[static_cast<std::size_t>(r)];
    EXPECT_TRUE(g.init_matches) << "initial parameters differ from MoeLayer(spec, seed)";
    EXPECT_EQ(g.offset, lo);
    EXPECT_EQ(g.first, first_expert_of(r, E, ranks));
    // Routes: bit for bit.
    ASSERT_EQ(g.routes.size(), n * k);
    for (std::size_t i = 0; i < n * k; ++i) {
      const nn::MoeRoute& a = g.routes[i];
      const nn::MoeRoute& b = whole.routes()[lo * k + i];
      ASSERT_EQ(a.expert, b.expert) << "route " << i;
      ASSERT_EQ(a.kept, b.kept) << "route " << i;
      if (b.kept) {
        ASSERT_EQ(a.slot, b.slot) << "route " << i;
      }
      if (c.gemm == GemmVersion::v2_ikj)
        ASSERT_EQ(a.gate, b.gate) << "route " << i;
      else
        ASSERT_NEAR(a.gate, b.gate, 1e-6f) << "route " << i;
    }
    // Statistics: the whole batch's.
    const nn::MoeStats& s = g.stats.global;
    EXPECT_EQ(s.tokens, want.tokens);
    EXPECT_EQ(s.capacity, want.capacity);
    EXPECT_EQ(s.routed, want.routed);
    EXPECT_EQ(s.kept, want.kept);
    EXPECT_EQ(s.top1, want.top1);
    EXPECT_EQ(s.dropped, want.dropped);
    EXPECT_EQ(s.tokens_passed, want.tokens_passed);
    EXPECT_EQ(s.imbalance, want.imbalance);
    EXPECT_EQ(s.dropped_fraction, want.dropped_fraction);
    EXPECT_NEAR(s.aux_loss, want.aux_loss, 1e-12 * (1 + want.aux_loss));
    for (std::size_t e = 0; e < E; ++e)
      EXPECT_NEAR(s.router_share[e], want.router_share[e], 1e-12) << "expert " << e;
    EXPECT_EQ(g.stats.shard_tokens, c.shards);
    // Load per rank, and the rows this rank sent and received, from the reference's routes.
    std::size_t rows_sent = 0, rows_received = 0;
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t q = 0; q < k; ++q) {
        const nn::MoeRoute& route = whole.routes()[t * k + q];
        if (!route.kept) continue;
        const int owner = expert_owner(route.expert, E, ranks);
        const bool mine = t >= lo && t < lo + n;
        rows_sent += mine && owner != r;
        rows_received += !mine && owner == r;
      }
    EXPECT_EQ(g.stats.rows_sent, rows_sent);
    EXPECT_EQ(g.stats.rows_received, rows_received);
    EXPECT_EQ(g.stats.payload_bytes, 4 * d * (rows_sent + rows_received));
    std::size_t load = 0;
    for (std::size_t e = first_expert_of(r, E, ranks); e < first_expert_of(r + 1, E, ranks); ++e)
      load += want.kept[e];
    EXPECT_EQ(g.stats.rank_rows[static_cast<std::size_t>(r)], load);
    const std::vector<std::size_t>& per_rank = g.stats.rank_rows;
    const std::size_t sum = T * k - want.dropped;
    EXPECT_EQ(g.stats.rank_imbalance,
              static_cast<double>(*std::max_element(per_rank.begin(), per_rank.end())) * ranks /
                  static_cast<double>(sum));
    // Bytes: the pairwise exchange's are counted, the native one's move inside the backend.
    const std::uint64_t counted = c.exchange == TokenExchange::pairwise ? g.stats.payload_bytes : 0;
    EXPECT_EQ(g.stats.bytes_sent_forward, counted);
    EXPECT_EQ(g.stats.bytes_sent_backward, counted);
    // Outputs and gradients.
    const auto rows = [&](const std::vector<float>& v) {
      return std::span<const float>(v).subspan(lo * d, n * d);
    };
    const float tol = c.gemm == GemmVersion::v2_ikj ? 0.0f : kTol;
    EXPECT_LE(worst(g.y, rows(y)), tol) << "y";
    EXPECT_LE(worst(g.dx, rows(dx)), tol) << "dx";
    for (std::size_t i = 0; i < g.expert_grads.size(); ++i)
      EXPECT_LE(worst(g.expert_grads[i], whole.expert_gradients(g.first + i)), tol)
          << "expert " << g.first + i;
    EXPECT_LE(worst(g.router_grad, whole.router_gradients()), kTol) << "router gradient";
  }
}

class ExpertParallel : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { concurdl::kernels::set_compute_threads(1); }
};

TEST_P(ExpertParallel, EqualsTheSingleProcessLayer) {
  const int ranks = GetParam();
  std::vector<std::size_t> expert_counts{8};
  if (ranks == 3 || ranks == 4) expert_counts.push_back(5);  // blocks of unequal size
  for (const std::size_t E : expert_counts)
    for (const std::size_t k : {1, 2})
      for (const bool dropless : {false, true})
        for (const float aux : {0.0f, 0.01f})
          for (const TokenExchangeVariant& ex : kTokenExchangeVariants) {
            Case c;
            c.spec = {.width = 6,
                      .hidden = 5,
                      .experts = E,
                      .top_k = k,
                      .capacity_factor = 1.0,
                      .dropless = dropless,
                      .aux_alpha = aux};
            c.shards = uneven_shards(ranks);
            c.exchange = ex.exchange;
            check_case(c);
          }
}

TEST_P(ExpertParallel, OpenBlasAndNoResidual) {
  Case c;
  c.spec = {.width = 6,
            .hidden = 5,
            .experts = 8,
            .top_k = 2,
            .capacity_factor = 1.0,
            .aux_alpha = 0.01f,
            .residual = false};
  c.shards = uneven_shards(GetParam());
  c.gemm = GemmVersion::openblas;
  check_case(c);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ExpertParallel, ::testing::Values(1, 2, 3, 4, 8));

// Which choices would be kept under a wrong slot order: each rank on its own (with the global
// capacity, or with its own), or every rank's first and second choices before the next rank's.
enum class WrongOrder { per_rank, per_rank_capacity, rank_by_rank };

std::vector<bool> kept_if(WrongOrder order, std::span<const nn::MoeRoute> routes,
                          const nn::MoeSpec& spec, const std::vector<std::size_t>& shards,
                          std::size_t capacity) {
  const std::size_t k = spec.top_k;
  const std::vector<std::size_t> at = offsets_of(shards);
  std::vector<bool> kept(routes.size());
  std::vector<std::size_t> used(spec.experts, 0);
  for (std::size_t r = 0; r < shards.size(); ++r) {
    std::size_t cap = capacity;
    if (order != WrongOrder::rank_by_rank) std::fill(used.begin(), used.end(), 0);
    if (order == WrongOrder::per_rank_capacity)
      cap = nn::moe_capacity(shards[r], spec.experts, k, spec.capacity_factor);
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t t = at[r]; t < at[r + 1]; ++t) {
        const std::size_t i = t * k + c;
        kept[i] = used[routes[i].expert] < cap;
        if (kept[i]) ++used[routes[i].expert];
      }
  }
  return kept;
}

// Three kinds of token: A (first choice expert 0, second 1), B (first 1, second 2); the rest of
// the experts are never chosen. 16 A, then 8 A, then 8 B: 24 first choices of expert 0 for 8
// slots, so the later A tokens (on higher ranks) are dropped for the earlier ones; expert 1
// takes the B tokens' first choices before any A's second choice.
void check_slot_order(int ranks) {
  SCOPED_TRACE("R=" + std::to_string(ranks));
  const std::size_t d = 4, T = 32, k = 2;
  Case c;
  c.spec = {.width = d,
            .hidden = 5,
            .experts = 8,
            .top_k = k,
            .capacity_factor = 1.0,
            .aux_alpha = 0.01f};
  for (int r = 0; r < ranks; ++r)
    c.shards.push_back((static_cast<std::size_t>(r) + 1) * T / static_cast<std::size_t>(ranks) -
                       static_cast<std::size_t>(r) * T / static_cast<std::size_t>(ranks));
  nn::MoeLayer whole(c.spec, 3, c.gemm);
  perturb(whole);
  const nn::LayerView router = whole.router();
  std::fill_n(router.w.data, router.w.rows * router.w.cols, 0.0f);
  std::fill(router.b.begin(), router.b.end(), -10.0f);
  router.w.data[0 * d + 0] = 3, router.w.data[1 * d + 0] = 2;  // A = e0: logits 3, 2, 0
  router.w.data[1 * d + 1] = 3, router.w.data[2 * d + 1] = 2;  // B = e1: logits 0, 3, 2
  std::fill_n(router.b.begin(), 3, 0.0f);
  std::vector<float> x = values(T * d, 5);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t j = 0; j < d; ++j) x[t * d + j] *= 0.1f;
    x[t * d + (t < 24 ? 0 : 1)] += 1.0f;
  }
  const std::vector<float> dy = values(T * d, 6);
  std::vector<float> y(T * d), dx(T * d);
  whole.forward(x.data(), T, y.data());
  whole.backward(dy.data(), dx.data());
  std::vector<bool> truth;
  for (const nn::MoeRoute& r : whole.routes()) truth.push_back(r.kept);
  for (const WrongOrder order :
       {WrongOrder::per_rank, WrongOrder::per_rank_capacity, WrongOrder::rank_by_rank})
    EXPECT_NE(kept_if(order, whole.routes(), c.spec, c.shards, whole.stats().capacity), truth)
        << "the batch cannot tell order " << static_cast<int>(order) << " from the right one";
  const std::vector<RankResult> got = run_sharded(c, whole, x, dy, 3);
  const std::vector<std::size_t> at = offsets_of(c.shards);
  for (std::size_t r = 0; r < got.size(); ++r)
    for (std::size_t i = 0; i < got[r].routes.size(); ++i) {
      EXPECT_EQ(got[r].routes[i].kept, truth[at[r] * k + i]) << "rank " << r << " route " << i;
      if (truth[at[r] * k + i]) {
        EXPECT_EQ(got[r].routes[i].slot, whole.routes()[at[r] * k + i].slot);
      }
    }
  for (std::size_t r = 0; r < got.size(); ++r) {
    const auto lo = static_cast<std::ptrdiff_t>(at[r] * d);
    const std::vector<float> want(y.begin() + lo,
                                  y.begin() + lo + static_cast<std::ptrdiff_t>(c.shards[r] * d));
    EXPECT_LE(worst(got[r].y, want), kTol) << "rank " << r;
  }
}

TEST(ExpertParallelSlots, FollowTheWholeBatchsOrder) {
  concurdl::kernels::set_compute_threads(1);
  for (const int ranks : {2, 3, 4, 8}) check_slot_order(ranks);
}

TEST(ExpertParallelSetup, RefusesFewerExpertsThanRanksAndBadSpecs) {
  concurdl::kernels::set_compute_threads(1);
  within_seconds(kDeadline, [] {
    EXPECT_THROW(dp::run_threads(4,
                                 [](dp::Communicator& comm) {
                                   ExpertParallelMoe ep(comm,
                                                        {.width = 4, .hidden = 4, .experts = 3}, 1);
                                 }),
                 std::invalid_argument);
    EXPECT_THROW(dp::run_threads(2,
                                 [](dp::Communicator& comm) {
                                   ExpertParallelMoe ep(
                                       comm, {.width = 4, .hidden = 4, .experts = 4, .top_k = 3},
                                       1);
                                 }),
                 std::invalid_argument);
    dp::run_threads(2, [](dp::Communicator& comm) {
      ExpertParallelMoe ep(comm, {.width = 4, .hidden = 4, .experts = 5}, 1);
      EXPECT_EQ(ep.local_experts(), comm.rank() == 0 ? 2u : 3u);
      EXPECT_THROW(ep.expert_parameters(comm.rank() == 0 ? 4 : 0), std::out_of_range);
      float y = 0;
      EXPECT_THROW(ep.forward(nullptr, 0, &y), std::invalid_argument);  // empty on every rank
    });
  });
  EXPECT_EQ(expert_owner(1, 8, 3), 0);
  EXPECT_EQ(expert_owner(2, 8, 3), 1);
  EXPECT_EQ(expert_owner(5, 8, 3), 2);
}

}  // namespace
