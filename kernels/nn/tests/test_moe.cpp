// The mixture-of-experts layer (moe.hpp): its gradients against central finite differences of a
// double-precision re-implementation (router, every expert, the input; k = 1 and 2; with and
// without drops; the aux loss alone), the capacity arithmetic on hand-built routers, the slot
// order (first choices before second), the aux loss at uniform and skewed routing, the same
// drops for the same input, the statistics adding up, and the parameter layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/nn/moe.hpp"
#include "moe_reference.hpp"
#include "test_util.hpp"

namespace concurdl::nn {
namespace {

using nn_test::same_bits;
using nn_test::values;

using moe_test::Reference;

// The float gradients of these small sizes carry errors near 1e-8 (about 1/40 of this bound
// when written); the double central difference with h = 1e-6, far less.
void expect_close(float analytic, double numeric, const char* what, std::size_t i) {
  EXPECT_NEAR(analytic, numeric, 2e-6 + 2e-4 * std::fabs(numeric)) << what << " " << i;
}

// Non-zero biases everywhere (the router's skewed, so capacity bites), from a test stream.
void perturb_biases(MoeLayer& m, float router_bias) {
  const auto rb = m.router().b;
  const auto v = values(rb.size(), 71);
  for (std::size_t i = 0; i < rb.size(); ++i) rb[i] = router_bias * v[i];
  for (std::size_t e = 0; e < m.experts(); ++e) {
    const ExpertView ev = m.expert(e);
    const auto a = values(ev.up.b.size() + ev.down.b.size(), 80 + static_cast<std::uint32_t>(e));
    for (std::size_t i = 0; i < ev.up.b.size(); ++i) ev.up.b[i] = 0.1f * a[i];
    for (std::size_t i = 0; i < ev.down.b.size(); ++i) ev.down.b[i] = 0.1f * a[ev.up.b.size() + i];
  }
}

struct GradCase {
  const char* name;
  MoeSpec spec;
  bool drops;
  bool aux_only = false;  // c = 0: the aux loss is the whole objective
  kernels::GemmVersion gemm = kernels::GemmVersion::openblas;
};

void check_gradients(const GradCase& gc) {
  SCOPED_TRACE(gc.name);
  const std::size_t T = 16, d = gc.spec.width;
  MoeLayer m(gc.spec, 5, gc.gemm);
  perturb_biases(m, 0.2f);
  for (std::size_t i = 0; i < m.router().w.rows * d; ++i) m.router().w.data[i] *= 4.0f;
  const auto xf = values(T * d, 11);
  auto cf = values(T * d, 12);
  if (gc.aux_only) std::fill(cf.begin(), cf.end(), 0.0f);
  std::vector<float> y(T * d), dx(T * d);
  const MoeStats& st = m.forward(xf.data(), T, y.data());
  m.backward(cf.data(), dx.data());
  EXPECT_EQ(st.dropped > 0, gc.drops);
  for (const std::size_t n : st.kept) EXPECT_GT(n, 0u) << "every expert's gradient is exercised";

  Reference ref{gc.spec};
  std::vector<double> p(m.parameters().begin(), m.parameters().end());
  std::vector<double> x(xf.begin(), xf.end()), c(cf.begin(), cf.end());
  ref.loss(p, x, c, T);
  // Finite differences must not move a routing decision or a ReLU across its kink.
  ASSERT_GT(ref.margin, 1e-3);
  ASSERT_GT(ref.kink, 1e-4);
  for (std::size_t i = 0; i < ref.routes.size(); ++i) {
    EXPECT_EQ(m.routes()[i].expert, ref.routes[i].expert) << i;
    EXPECT_EQ(m.routes()[i].kept, ref.routes[i].kept) << i;
    EXPECT_EQ(m.routes()[i].slot, ref.routes[i].slot) << i;
    EXPECT_NEAR(m.routes()[i].gate, ref.routes[i].gate, 1e-6) << i;
  }
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref.y[i], 1e-5) << i;
  EXPECT_NEAR(st.aux_loss, ref.aux, 1e-6 * std::max(1.0, ref.aux));

  const double h = 1e-6;
  auto numeric = [&](std::vector<double>& v, std::size_t i) {
    const double saved = v[i];
    v[i] = saved + h;
    const double up = ref.loss(p, x, c, T);
    v[i] = saved - h;
    const double down = ref.loss(p, x, c, T);
    v[i] = saved;
    return (up - down) / (2 * h);
  };
  const auto g = m.gradients();
  const auto& off = m.parameter_offsets();
  double router_norm = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const bool router = i < off[1];
    if (router) router_norm += std::fabs(g[i]);
    expect_close(g[i], numeric(p, i), router ? "router" : "expert", i);
  }
  EXPECT_GT(router_norm, 1e-3);  // the router's gradient is exercised, not all zero
  for (std::size_t i = 0; i < x.size(); ++i) expect_close(dx[i], numeric(x, i), "input", i);
}

MoeSpec spec_of(std::size_t k, double capacity_factor, bool dropless, bool residual = true) {
  MoeSpec s{.width = 6, .hidden = 5, .experts = 4, .top_k = k, .dropless = dropless};
  s.capacity_factor = capacity_factor;
  s.aux_alpha = 0.5f;  // large, so the aux gradient is well above the tolerance
  s.residual = residual;
  return s;
}

TEST(MoeGradients, Top1MatchFiniteDifferences) {
  check_gradients({"k=1 dropless", spec_of(1, 1.0, true), false});
  check_gradients({"k=1 drops", spec_of(1, 0.5, false), true});
  check_gradients({"k=1 drops, no residual", spec_of(1, 0.75, false, false), true});
}

TEST(MoeGradients, Top2MatchFiniteDifferences) {
  check_gradients({"k=2 dropless", spec_of(2, 1.0, true), false});
  check_gradients({"k=2 drops", spec_of(2, 0.5, false), true});
  check_gradients({"k=2 aux only", spec_of(2, 0.5, false), true, true});
}

// The transposed cases of every GEMM of the suite under the layer.
TEST(MoeGradients, MatchWithEveryGemmVersion) {
  for (const auto v : kernels::gemm_versions())
    check_gradients(
        {kernels::gemm_version_name(v).data(), spec_of(2, 0.75, false), true, false, v});
}

TEST(MoeCapacity, IsTheCeilingOfFactorTimesKTimesTokensOverExperts) {
  EXPECT_EQ(moe_capacity(10, 4, 1, 1.0), 3u);   // 2.5
  EXPECT_EQ(moe_capacity(10, 4, 2, 1.0), 5u);   // 5
  EXPECT_EQ(moe_capacity(8, 4, 1, 1.25), 3u);   // 2.5
  EXPECT_EQ(moe_capacity(8, 4, 1, 1.0), 2u);    // 2
  EXPECT_EQ(moe_capacity(64, 8, 2, 1.5), 24u);  // 24
  EXPECT_EQ(moe_capacity(3, 4, 1, 0.1), 1u);    // 0.075
  EXPECT_EQ(moe_capacity(3, 2, 2, 1e300), 3u);  // no more than the tokens
}

// Wr = 0 and a bias that prefers expert 2: every token's first choice is expert 2.
MoeLayer all_to_expert_two(std::size_t k, double capacity_factor, bool dropless) {
  MoeLayer m({.width = 3,
              .hidden = 4,
              .experts = 4,
              .top_k = k,
              .capacity_factor = capacity_factor,
              .dropless = dropless},
             9);
  const LayerView r = m.router();
  std::fill_n(r.w.data, 4 * 3, 0.0f);
  r.b[0] = 0.0f, r.b[1] = 1.0f, r.b[2] = 4.0f, r.b[3] = 0.0f;
  return m;
}

TEST(MoeCapacity, OneExpertKeepsExactlyCapacityAndTheRestPassThrough) {
  const std::size_t T = 10, d = 3;
  const auto x = values(T * d, 4);
  std::vector<float> y(T * d);
  MoeLayer m = all_to_expert_two(1, 1.0, false);
  const MoeStats& s = m.forward(x.data(), T, y.data());
  EXPECT_EQ(s.capacity, 3u);
  EXPECT_EQ(s.routed, (std::vector<std::size_t>{0, 0, 10, 0}));
  EXPECT_EQ(s.kept, (std::vector<std::size_t>{0, 0, 3, 0}));
  EXPECT_EQ(s.dropped, 7u);
  EXPECT_EQ(s.tokens_passed, 7u);
  EXPECT_DOUBLE_EQ(s.dropped_fraction, 0.7);
  for (std::size_t t = 0; t < T; ++t) {
    EXPECT_EQ(m.routes()[t].kept, t < 3) << "the first tokens in batch order are kept";
    if (t < 3) {
      EXPECT_EQ(m.routes()[t].slot, t);
    }
    const bool same = same_bits({y.data() + t * d, d}, {x.data() + t * d, d});
    EXPECT_EQ(same, t >= 3) << "token " << t << ": dropped is y = x, kept is not";
  }
  MoeLayer more = all_to_expert_two(1, 2.0, false);  // C = 5
  EXPECT_EQ(more.forward(x.data(), T, y.data()).kept[2], 5u);
  MoeLayer all = all_to_expert_two(1, 1.0, true);
  const MoeStats& a = all.forward(x.data(), T, y.data());
  EXPECT_EQ(a.kept[2], T);
  EXPECT_EQ(a.dropped, 0u);
  EXPECT_EQ(a.tokens_passed, 0u);
  // k = 2: C = 5 for both expert 2 (first choices) and expert 1 (second choices).
  MoeLayer two = all_to_expert_two(2, 1.0, false);
  const MoeStats& b = two.forward(x.data(), T, y.data());
  EXPECT_EQ(b.capacity, 5u);
  EXPECT_EQ(b.routed, (std::vector<std::size_t>{0, 10, 10, 0}));
  EXPECT_EQ(b.kept, (std::vector<std::size_t>{0, 5, 5, 0}));
  EXPECT_EQ(b.tokens_passed, 5u);
  for (std::size_t t = 0; t < T; ++t) {
    const MoeRoute* r = two.routes().data() + 2 * t;
    EXPECT_FLOAT_EQ(r[0].gate + r[1].gate, 1.0f) << "GShard's gates sum to 1";
    EXPECT_EQ(r[1].expert, 1u);
  }
}

// Two experts, even tokens prefer 0 and odd ones 1; with C = 2 every slot goes to a first
// choice and every second choice is dropped (handed out token by token, token 0's second choice
// would take a slot and token 3's first choice would be dropped).
TEST(MoeCapacity, FirstChoicesTakeSlotsBeforeSecondChoices) {
  for (const double cf : {0.5, 1.0}) {
    MoeLayer m({.width = 2, .hidden = 3, .experts = 2, .top_k = 2, .capacity_factor = cf}, 1);
    const LayerView r = m.router();
    r.w(0, 0) = 3, r.w(0, 1) = 0, r.w(1, 0) = 0, r.w(1, 1) = 3, r.b[0] = r.b[1] = 0;
    const std::vector<float> x = {1, 0, 0, 1, 1, 0, 0, 1};
    std::vector<float> y(8);
    const MoeStats& s = m.forward(x.data(), 4, y.data());
    SCOPED_TRACE("capacity " + std::to_string(s.capacity));
    for (std::size_t t = 0; t < 4; ++t) {
      const MoeRoute* rt = m.routes().data() + 2 * t;
      EXPECT_EQ(rt[0].expert, t % 2);
      EXPECT_TRUE(rt[0].kept);
      EXPECT_EQ(rt[0].slot, t / 2);
      EXPECT_EQ(rt[1].kept, cf == 1.0) << "token " << t;
      if (cf == 1.0) {
        EXPECT_EQ(rt[1].slot, 2 + t / 2) << "second choices after the first";
      }
    }
  }
}

// d = E = 4, Wr = 3 I, token t the unit vector t mod 4: each expert is the first choice of a
// quarter of the tokens and, by symmetry, P_i = 1/4, so aux = alpha. A bias above 3 on expert 0
// makes it every token's first choice, and aux grows with P_0.
TEST(MoeAuxLoss, IsAlphaWhenRoutingIsUniformAndLargerWhenSkewed) {
  const float alpha = 0.01f;
  MoeLayer m({.width = 4, .hidden = 3, .experts = 4, .top_k = 1, .dropless = true}, 2);
  const LayerView r = m.router();
  std::fill_n(r.w.data, 16, 0.0f);
  for (std::size_t i = 0; i < 4; ++i) r.w(i, i) = 3.0f;
  std::vector<float> x(8 * 4, 0.0f), y(8 * 4);
  for (std::size_t t = 0; t < 8; ++t) x[t * 4 + t % 4] = 1.0f;
  const MoeStats& s = m.forward(x.data(), 8, y.data());
  EXPECT_NEAR(s.aux_loss, alpha, 1e-6 * alpha);
  EXPECT_DOUBLE_EQ(s.imbalance, 1.0);
  for (const double share : s.router_share) EXPECT_NEAR(share, 0.25, 1e-6);
  double last = s.aux_loss;
  for (const float skew : {3.5f, 6.0f}) {
    r.b[0] = skew;
    const MoeStats& k = m.forward(x.data(), 8, y.data());
    EXPECT_GT(k.aux_loss, last + 1e-4 * alpha) << "bias " << skew;
    EXPECT_GT(k.imbalance, 1.0);
    last = k.aux_loss;
  }
  EXPECT_DOUBLE_EQ(m.stats().imbalance, 4.0);  // every token's first choice is expert 0
  EXPECT_NEAR(m.stats().aux_loss, alpha * 4 * m.stats().router_share[0], 1e-9);
  EXPECT_GT(m.stats().aux_loss, 3 * alpha);
}

TEST(MoeAuxLoss, EqualsAlphaETimesSumOfTop1FractionTimesMeanProbability) {
  MoeLayer m(
      {.width = 5, .hidden = 4, .experts = 3, .top_k = 2, .dropless = true, .aux_alpha = 0.3f}, 8);
  perturb_biases(m, 1.0f);
  const std::size_t T = 20;
  const auto x = values(T * 5, 6);
  std::vector<float> y(T * 5);
  m.forward(x.data(), T, y.data());
  const auto p = m.router_probabilities();
  std::vector<double> f(3, 0), P(3, 0);
  for (std::size_t t = 0; t < T; ++t) {
    f[std::max_element(p.begin() + t * 3, p.begin() + t * 3 + 3) - (p.begin() + t * 3)] += 1;
    for (std::size_t i = 0; i < 3; ++i) P[i] += p[t * 3 + i];
  }
  double want = 0;
  for (std::size_t i = 0; i < 3; ++i) want += f[i] / T * P[i] / T;
  EXPECT_NEAR(m.stats().aux_loss, 0.3 * 3 * want, 1e-7);
}

// Equal probabilities go to the lower index, first and second choice alike.
TEST(MoeRouting, TiesGoToTheLowerIndex) {
  MoeLayer m({.width = 2, .hidden = 2, .experts = 4, .top_k = 2, .dropless = true}, 1);
  const LayerView r = m.router();
  std::fill_n(r.w.data, 8, 0.0f);
  const std::vector<float> x = {0.5f, -0.25f};
  std::vector<float> y(2);
  for (const float b : {0.0f, 1.0f}) {
    r.b[0] = 0, r.b[1] = b, r.b[2] = b, r.b[3] = 0;
    m.forward(x.data(), 1, y.data());
    EXPECT_EQ(m.routes()[0].expert, b == 0 ? 0u : 1u);
    EXPECT_EQ(m.routes()[1].expert, b == 0 ? 1u : 2u);
    EXPECT_TRUE(m.routes()[0].gate == 0.5f && m.routes()[1].gate == 0.5f);
  }
}

TEST(MoeRouting, SameInputGivesTheSameDrops) {
  const MoeSpec spec{.width = 6, .hidden = 5, .experts = 4, .top_k = 2, .capacity_factor = 0.5};
  const std::size_t T = 32;
  const auto x = values(T * 6, 21);
  std::vector<float> y1(T * 6), y2(T * 6), y3(T * 6);
  MoeLayer a(spec, 3), b(spec, 3);
  perturb_biases(a, 1.0f);
  perturb_biases(b, 1.0f);
  a.forward(x.data(), T, y1.data());
  const std::vector<MoeRoute> first(a.routes().begin(), a.routes().end());
  ASSERT_GT(a.stats().dropped, 0u);
  a.forward(x.data(), T, y2.data());
  b.forward(x.data(), T, y3.data());
  for (const MoeLayer* m : {&a, &b})
    for (std::size_t i = 0; i < first.size(); ++i) {
      const MoeRoute &u = first[i], &v = m->routes()[i];
      EXPECT_TRUE(u.expert == v.expert && u.kept == v.kept && u.slot == v.slot && u.gate == v.gate)
          << "route " << i;
    }
  EXPECT_TRUE(same_bits(y1, y2) && same_bits(y1, y3));
}

TEST(MoeStats, AddUp) {
  const std::size_t T = 37, E = 5;
  const auto x = values(T * 6, 31);
  std::vector<float> y(T * 6);
  for (const std::size_t k : {1u, 2u})
    for (const double cf : {0.3, 1.0, 2.0}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " cf=" + std::to_string(cf));
      MoeLayer m({.width = 6, .hidden = 4, .experts = E, .top_k = k, .capacity_factor = cf}, 4);
      perturb_biases(m, 1.5f);
      const MoeStats& s = m.forward(x.data(), T, y.data());
      EXPECT_EQ(s.capacity, moe_capacity(T, E, k, cf));
      std::vector<std::size_t> routed(E, 0), kept(E, 0), top1(E, 0);
      std::size_t dropped = 0, passed = 0;
      for (std::size_t t = 0; t < T; ++t) {
        bool any = false;
        for (std::size_t c = 0; c < k; ++c) {
          const MoeRoute& r = m.routes()[t * k + c];
          ++routed[r.expert];
          if (c == 0) ++top1[r.expert];
          (r.kept ? kept[r.expert] : dropped) += 1;
          any = any || r.kept;
        }
        if (!any) ++passed;
      }
      EXPECT_EQ(s.routed, routed);
      EXPECT_EQ(s.kept, kept);
      EXPECT_EQ(s.top1, top1);
      EXPECT_EQ(s.dropped, dropped);
      EXPECT_EQ(s.tokens_passed, passed);
      std::size_t kept_sum = 0, routed_sum = 0, top1_sum = 0, max_routed = 0;
      double share = 0;
      for (std::size_t i = 0; i < E; ++i) {
        EXPECT_LE(s.kept[i], s.capacity);
        EXPECT_LE(s.kept[i], s.routed[i]);
        if (k == 1) {
          EXPECT_EQ(s.kept[i], std::min(s.routed[i], s.capacity));
        }
        kept_sum += s.kept[i];
        routed_sum += s.routed[i];
        top1_sum += s.top1[i];
        max_routed = std::max(max_routed, s.routed[i]);
        share += s.router_share[i];
      }
      EXPECT_EQ(kept_sum + s.dropped, k * T);
      EXPECT_EQ(routed_sum, k * T);
      EXPECT_EQ(top1_sum, T);
      EXPECT_NEAR(share, 1.0, 1e-6);
      EXPECT_DOUBLE_EQ(s.dropped_fraction, static_cast<double>(s.dropped) / (k * T));
      EXPECT_DOUBLE_EQ(s.imbalance, static_cast<double>(max_routed) * E / (k * T));
      if (cf == 0.3) {
        EXPECT_GT(s.dropped, 0u);
      }
    }
}

TEST(MoeLayout, RouterThenEachExpertInOneBuffer) {
  const MoeSpec spec{.width = 6, .hidden = 5, .experts = 3, .top_k = 1};
  MoeLayer m(spec, 1);
  const std::size_t router = 3 * 6 + 3, expert = 5 * 6 + 5 + 6 * 5 + 6;
  EXPECT_EQ(m.parameters().size(), router + 3 * expert);
  EXPECT_EQ(m.gradients().size(), m.parameters().size());
  EXPECT_EQ(m.parameter_offsets(),
            (std::vector<std::size_t>{0, router, router + expert, router + 2 * expert,
                                      router + 3 * expert}));
  EXPECT_EQ(m.router_parameters().data(), m.parameters().data());
  EXPECT_EQ(m.router_parameters().size(), router);
  EXPECT_EQ(m.router_gradients().data(), m.gradients().data());
  EXPECT_EQ(m.router().b.data(), m.parameters().data() + 18);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto p = m.expert_parameters(i), g = m.expert_gradients(i);
    EXPECT_EQ(p.data(), m.parameters().data() + router + i * expert);
    EXPECT_EQ(g.data(), m.gradients().data() + router + i * expert);
    EXPECT_EQ(p.size(), expert);
    const ExpertView v = m.expert(i);
    EXPECT_EQ(v.up.w.data, p.data());
    EXPECT_EQ(v.up.w.rows, 5u);
    EXPECT_EQ(v.up.b.data(), p.data() + 30);
    EXPECT_EQ(v.down.w.data, p.data() + 35);
    EXPECT_EQ(v.down.w.cols, 5u);
    EXPECT_EQ(v.down.b.data() + v.down.b.size(), p.data() + p.size());
    EXPECT_EQ(m.expert_gradient(i).down.w.data, g.data() + 35);
    for (const float b : v.up.b) EXPECT_EQ(b, 0.0f);
  }
  EXPECT_THROW(m.expert_parameters(3), std::out_of_range);
  MoeLayer again(spec, 1), other(spec, 2);
  EXPECT_TRUE(same_bits(m.parameters(), again.parameters()));
  EXPECT_FALSE(same_bits(m.parameters(), other.parameters()));
}

TEST(MoeLayout, RefusesBadSpecsAndBackwardBeforeForward) {
  const auto refused = [](MoeSpec s) {
    EXPECT_THROW(MoeLayer(s, 1), std::invalid_argument) << s.top_k << " " << s.capacity_factor;
  };
  refused({.width = 0, .hidden = 2, .experts = 2});
  refused({.width = 2, .hidden = 2, .experts = 2, .top_k = 3});
  refused({.width = 2, .hidden = 2, .experts = 1, .top_k = 2});
  refused({.width = 2, .hidden = 2, .experts = 2, .capacity_factor = 0});
  EXPECT_NO_THROW(
      MoeLayer({.width = 2, .hidden = 2, .experts = 2, .capacity_factor = 0, .dropless = true}, 1));
  MoeLayer m({.width = 2, .hidden = 2, .experts = 2}, 1);
  std::vector<float> d(4);
  EXPECT_THROW(m.backward(d.data(), d.data()), std::logic_error);
  EXPECT_THROW(m.forward(d.data(), 2, d.data()), std::invalid_argument);  // y over x
}

}  // namespace
}  // namespace concurdl::nn
