// The MLP: its spec, the one-buffer parameter layout, the seeded initialisation, and its
// gradients against central finite differences of a double-precision re-implementation of the
// forward pass (so the check's own rounding error is far below the float gradients' error).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/trace.hpp"
#include "concurdl/kernels/ops.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/sgd.hpp"
#include "concurdl/nn/step_phases.hpp"
#include "test_util.hpp"

namespace concurdl::nn {
namespace {

using nn_test::same_bits;
using nn_test::values;

TEST(MlpSpec, ParseAndDescribe) {
  const MlpSpec s = MlpSpec::parse("784-256-128-10");
  EXPECT_EQ(s.widths, (std::vector<std::size_t>{784, 256, 128, 10}));
  EXPECT_EQ(s.describe(), "784-256-128-10");
  EXPECT_EQ(MlpSpec{}.describe(), "784-256-128-10");
  EXPECT_EQ(MlpSpec::parse("7-3").widths, (std::vector<std::size_t>{7, 3}));
  for (const char* bad : {"", "784", "784--10", "784-0-10", "abc-10", "784-10-", "-784-10",
                          "784-1x-10", "784 - 10"}) {
    try {
      MlpSpec::parse(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Mlp, ParametersAndGradientsAreOneBufferWithExactLayerViews) {
  Mlp m(MlpSpec{}, 1);
  const std::size_t total = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
  ASSERT_EQ(m.parameters().size(), total);
  ASSERT_EQ(m.gradients().size(), total);
  ASSERT_EQ(m.layers(), 3u);
  const auto& off = m.layer_offsets();
  ASSERT_EQ(off.size(), 4u);
  EXPECT_EQ(off.front(), 0u);
  EXPECT_EQ(off.back(), total);
  for (std::size_t l = 0; l < m.layers(); ++l) {
    const std::size_t in = m.spec().widths[l], out = m.spec().widths[l + 1];
    for (const bool grad : {false, true}) {
      const LayerView v = grad ? m.layer_gradient(l) : m.layer(l);
      float* base = grad ? m.gradients().data() : m.parameters().data();
      EXPECT_EQ(v.w.data, base + off[l]) << "layer " << l;
      EXPECT_EQ(v.w.rows, out);
      EXPECT_EQ(v.w.cols, in);
      EXPECT_EQ(v.w.ld, in);
      EXPECT_EQ(v.b.data(), v.w.data + out * in) << "b follows W";
      EXPECT_EQ(v.b.size(), out);
      EXPECT_EQ(v.b.data() + v.b.size(), base + off[l + 1])
          << "layer " << l << " ends where l+1 starts";
    }
  }
  EXPECT_THROW(m.layer(3), std::out_of_range);
}

TEST(Mlp, InitialisationIsSeededHeUniform) {
  const MlpSpec spec = MlpSpec::parse("100-50-10");
  Mlp a(spec, 7), b(spec, 7), c(spec, 8);
  EXPECT_TRUE(same_bits(a.parameters(), b.parameters()));
  EXPECT_FALSE(same_bits(a.parameters(), c.parameters()));
  for (std::size_t l = 0; l < a.layers(); ++l) {
    const LayerView v = a.layer(l);
    const double bound = std::sqrt(6.0 / static_cast<double>(v.w.cols));
    double sum = 0, sq = 0;
    const std::size_t n = v.w.rows * v.w.cols;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_LE(std::fabs(v.w.data[i]), bound);
      sum += v.w.data[i];
      sq += double{v.w.data[i]} * v.w.data[i];
    }
    // U(-B, B): mean 0, variance B^2 / 3 (so 2 / fan_in: He).
    EXPECT_NEAR(sum / static_cast<double>(n), 0.0, 0.1 * bound);
    EXPECT_NEAR(sq / static_cast<double>(n), bound * bound / 3, 0.1 * bound * bound / 3);
    for (const float bias : v.b) EXPECT_EQ(bias, 0.0f);
  }
}

// The MLP's forward pass and mean cross-entropy in double, over the same flat layout.
struct Reference {
  MlpSpec spec;
  std::vector<double> logits;  // of the last call

  double loss(const std::vector<double>& p, const std::vector<double>& x,
              const std::vector<std::uint8_t>& y, std::size_t batch) {
    std::vector<double> a = x;
    std::size_t off = 0;
    for (std::size_t l = 0; l + 1 < spec.widths.size(); ++l) {
      const std::size_t in = spec.widths[l], out = spec.widths[l + 1];
      const bool last = l + 2 == spec.widths.size();
      std::vector<double> z(batch * out);
      for (std::size_t r = 0; r < batch; ++r)
        for (std::size_t o = 0; o < out; ++o) {
          double s = p[off + out * in + o];
          for (std::size_t i = 0; i < in; ++i) s += a[r * in + i] * p[off + o * in + i];
          z[r * out + o] = last ? s : std::max(s, 0.0);
        }
      off += out * in + out;
      a = std::move(z);
    }
    logits = a;
    const std::size_t classes = spec.widths.back();
    double total = 0;
    for (std::size_t r = 0; r < batch; ++r) {
      double m = a[r * classes];
      for (std::size_t k = 1; k < classes; ++k) m = std::max(m, a[r * classes + k]);
      double s = 0;
      for (std::size_t k = 0; k < classes; ++k) s += std::exp(a[r * classes + k] - m);
      total += std::log(s) - (a[r * classes + y[r]] - m);
    }
    return total / static_cast<double>(batch);
  }
};

// |analytic - numeric| within an absolute floor plus a relative part: float gradients carry
// ~1e-6 relative error; the double central difference with h = 1e-5 far less.
void expect_close(float analytic, double numeric, const char* what, std::size_t i) {
  EXPECT_NEAR(analytic, numeric, 2e-5 + 2e-3 * std::fabs(numeric)) << what << " " << i;
}

void check_gradients(kernels::GemmVersion gemm, const MlpSpec& spec, std::size_t batch) {
  Mlp m(spec, 42, gemm);
  // Non-zero biases, so their gradient path is exercised from a generic point.
  for (std::size_t l = 0; l < m.layers(); ++l) {
    const auto b = m.layer(l).b;
    const auto v = values(b.size(), 100 + static_cast<std::uint32_t>(l));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * v[i];
  }
  const std::size_t in = spec.widths.front(), classes = spec.widths.back();
  const auto xf = values(batch * in, 3);
  std::vector<std::uint8_t> y(batch);
  for (std::size_t r = 0; r < batch; ++r) y[r] = static_cast<std::uint8_t>((r * 2 + 1) % classes);
  std::vector<float> dx(batch * in);
  const float loss = m.forward_backward(xf.data(), y.data(), batch, nullptr, dx.data());

  Reference ref{spec, {}};
  std::vector<double> p(m.parameters().begin(), m.parameters().end()), x(xf.begin(), xf.end());
  const double loss_ref = ref.loss(p, x, y, batch);
  EXPECT_NEAR(loss, loss_ref, 1e-5 * std::max(1.0, loss_ref));
  std::vector<float> logits(batch * classes);
  m.forward(xf.data(), batch, logits.data());
  const std::vector<double> logits_ref = ref.logits;
  for (std::size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(logits[i], logits_ref[i], 1e-5) << i;

  const double h = 1e-5;
  auto numeric = [&](std::vector<double>& v, std::size_t i) {
    const double saved = v[i];
    v[i] = saved + h;
    const double up = ref.loss(p, x, y, batch);
    v[i] = saved - h;
    const double down = ref.loss(p, x, y, batch);
    v[i] = saved;
    return (up - down) / (2 * h);
  };
  const auto g = m.gradients();
  for (std::size_t l = 0; l < m.layers(); ++l) {
    const std::size_t begin = m.layer_offsets()[l], end = m.layer_offsets()[l + 1];
    const std::size_t b_begin = begin + m.layer(l).w.rows * m.layer(l).w.cols;
    for (std::size_t i = begin; i < end; ++i)
      expect_close(g[i], numeric(p, i), i < b_begin ? "W" : "b", i);
  }
  for (std::size_t i = 0; i < x.size(); ++i) expect_close(dx[i], numeric(x, i), "input", i);
}

TEST(Mlp, GradientsMatchFiniteDifferences) {
  check_gradients(kernels::GemmVersion::openblas, MlpSpec::parse("7-5-4-3"), 3);
  check_gradients(kernels::GemmVersion::openblas, MlpSpec::parse("6-3"), 2);  // one layer
}

// The same check with each GEMM of the suite under the MLP (the transposed cases of all three
// products: forward no/yes, dW yes/no, dX no/no).
TEST(Mlp, GradientsMatchWithEveryGemmVersion) {
  for (const auto v : kernels::gemm_versions()) {
    SCOPED_TRACE(std::string(kernels::gemm_version_name(v)));
    check_gradients(v, MlpSpec::parse("11-9-8-5"), 7);
  }
}

TEST(Mlp, SoftmaxXentGradientMatchesFiniteDifferences) {
  const std::size_t rows = 4, classes = 5;
  auto z = values(rows * classes, 21);
  for (auto& v : z) v *= 3.0f;
  const std::vector<std::uint8_t> y = {0, 4, 2, 2};
  std::vector<float> p(rows * classes), d(rows * classes);
  kernels::softmax_xent_forward(z.data(), y.data(), rows, classes, p.data());
  kernels::softmax_xent_backward(p.data(), y.data(), rows, classes, d.data());
  auto loss = [&](const std::vector<double>& zz) {  // in double
    double total = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      double s = 0;
      for (std::size_t k = 0; k < classes; ++k) s += std::exp(zz[r * classes + k]);
      total += std::log(s) - zz[r * classes + y[r]];
    }
    return total / rows;
  };
  std::vector<double> zd(z.begin(), z.end());
  for (std::size_t i = 0; i < zd.size(); ++i) {
    const double h = 1e-5, saved = zd[i];
    zd[i] = saved + h;
    const double up = loss(zd);
    zd[i] = saved - h;
    const double down = loss(zd);
    zd[i] = saved;
    expect_close(d[i], (up - down) / (2 * h), "dlogit", i);
  }
}

TEST(Mlp, EvaluateAgreesWithForwardBackward) {
  const MlpSpec spec = MlpSpec::parse("20-16-4");
  Mlp m(spec, 3);
  const std::size_t n = 37;
  const auto x = values(n * 20, 5);
  std::vector<std::uint8_t> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<std::uint8_t>(i % 4);
  std::size_t correct = 0;
  const float loss = m.forward_backward(x.data(), y.data(), n, &correct);
  for (const std::size_t batch : {std::size_t{1}, std::size_t{10}, n, std::size_t{1000}}) {
    const EvalResult e = m.evaluate(x.data(), y.data(), n, batch);
    EXPECT_EQ(e.samples, n);
    EXPECT_NEAR(e.loss, loss, 1e-5) << "batch " << batch;
    EXPECT_DOUBLE_EQ(e.accuracy, static_cast<double>(correct) / n) << "batch " << batch;
  }
  EXPECT_EQ(m.evaluate(x.data(), y.data(), 0).samples, 0u);
  EXPECT_THROW(m.forward_backward(x.data(), y.data(), 0), std::invalid_argument);
  y[3] = 4;  // not a class of a 4-class model
  EXPECT_THROW(m.forward_backward(x.data(), y.data(), n), std::invalid_argument);
}

TEST(Sgd, MomentumAndWeightDecayFollowTheFormula) {
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  Sgd opt(3, o);
  std::vector<float> p = {1.0f, -2.0f, 0.5f};
  const std::vector<float> g = {0.5f, 0.25f, -1.0f};
  std::vector<double> pd(p.begin(), p.end()), v(3, 0.0);
  for (int step = 0; step < 3; ++step) {
    opt.step(p, g);
    for (std::size_t i = 0; i < 3; ++i) {
      v[i] = 0.9 * v[i] + (g[i] + 0.01 * pd[i]);
      pd[i] -= 0.1 * v[i];
      EXPECT_NEAR(p[i], pd[i], 1e-6) << "step " << step << " element " << i;
      EXPECT_NEAR(opt.velocity()[i], v[i], 1e-6);
    }
  }
  opt.set_lr(0.5f);
  EXPECT_EQ(opt.options().lr, 0.5f);
  std::vector<float> wrong(2);
  EXPECT_THROW(opt.step(wrong, g), std::invalid_argument);
}

// The update from 16-bit gradients: the same bits as widening them, dividing by the loss scale
// and step(), for both formats, a scale of 1 and of 2^10, on either side of the size from which
// the update runs on the compute threads.
TEST(Sgd, Step16bitIsWidenUnscaleAndStep) {
  for (const Precision p : {Precision::bf16, Precision::fp16})
    for (const float scale : {1.0f, 1024.0f})
      for (const std::size_t n : {std::size_t{7}, std::size_t{1000}, std::size_t{1} << 17}) {
        std::vector<float> g = values(n, 3), p16(n), p32(n);
        for (float& x : g) x *= scale;
        std::vector<std::uint16_t> h(n);
        to_16bit(p, g, h);
        const std::vector<float> start = values(n, 5);
        p16 = start;
        p32 = start;
        Sgd a(n, SgdOptions{}), b(n, SgdOptions{});
        for (int step = 0; step < 2; ++step) {
          a.step_16bit(p16, h, p, scale);
          std::vector<float> w(n);
          from_16bit(p, h, w);
          if (scale != 1.0f)
            for (float& x : w) x /= scale;
          b.step(p32, w);
        }
        EXPECT_TRUE(same_bits(p16, p32)) << describe(p) << " scale " << scale << " n " << n;
        EXPECT_TRUE(same_bits(a.velocity(), b.velocity()));
      }
  Sgd opt(3, SgdOptions{});
  std::vector<float> three(3);
  std::vector<std::uint16_t> two(2);
  EXPECT_THROW(opt.step_16bit(three, two, Precision::bf16, 1.0f), std::invalid_argument);
}

}  // namespace
}  // namespace concurdl::nn

// The step's phases as trace spans (kernels/train_breakdown): every GEMM, element-wise phase and
// the loss of a forward and backward, once each, nested in nothing; none while phase spans are
// off, even with a trace recording (chapters 05, 06 and 08's timelines stay as they were).
TEST(Mlp, StepPhaseSpansNameEveryPhaseOnlyWhenAskedFor) {
  using namespace concurdl;
  nn::Mlp model(nn::MlpSpec{{12, 8, 6, 4}}, 1, kernels::GemmVersion::v4_register);
  std::vector<float> x(5 * 12);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const std::vector<std::uint8_t> labels = {0, 1, 2, 3, 1};
  const auto phases = [&] {
    trace::Recorder& rec = trace::Recorder::global();
    rec.start();
    model.forward_backward(x.data(), labels.data(), 5);
    std::vector<std::string> names;
    for (const trace::Event& e : rec.stop())
      if (e.category == "step") names.push_back(e.name);
    return names;
  };
  EXPECT_TRUE(phases().empty());
  const nn::StepPhaseSpans on;
  // Bias + ReLU and ReLU' run inside the GEMMs (their epilogues): no spans of their own.
  const std::vector<std::string> want = {"l0_fwd_gemm", "l1_fwd_gemm", "l2_fwd_gemm", "loss",
                                         "l2_dw_gemm",  "l2_db",       "l2_da_gemm",  "l1_dw_gemm",
                                         "l1_db",       "l1_da_gemm",  "l0_dw_gemm",  "l0_db"};
  std::vector<std::string> got = phases();
  EXPECT_EQ(got, want);
}
