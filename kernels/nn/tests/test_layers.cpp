// The MLP by layers (forward_layers / backward_layers / softmax_xent_loss): a model split at any
// layer gives the whole model's bits, micro-batches accumulate to the full batch's gradient,
// on_layer_done reports each layer's final gradient top down, bad ranges are refused, forward on
// one const model from 1, 2, 4 and 8 threads gives the sequential result, two stages'
// backward at once gives the sequential gradients, and the backward split into input and
// weight gradients gives the whole backward's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "concurdl/nn/mlp.hpp"
#include "test_util.hpp"

namespace concurdl::nn {
namespace {

using nn_test::same_bits;
using nn_test::values;

// Four layers, so there are three inner split points; non-zero biases, so their gradients are
// generic.
Mlp make_model(kernels::GemmVersion gemm, const char* arch = "13-11-9-7-5") {
  Mlp m(MlpSpec::parse(arch), 42, gemm);
  for (std::size_t l = 0; l < m.layers(); ++l) {
    const auto b = m.layer(l).b;
    const auto v = values(b.size(), 200 + static_cast<std::uint32_t>(l));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * v[i];
  }
  return m;
}

std::vector<std::uint8_t> labels_for(std::size_t batch, std::size_t classes) {
  std::vector<std::uint8_t> y(batch);
  for (std::size_t r = 0; r < batch; ++r) y[r] = static_cast<std::uint8_t>((r * 3 + 2) % classes);
  return y;
}

void poison(std::span<float> g) { std::fill(g.begin(), g.end(), std::nanf("")); }

std::span<const float> layer_slice(const Mlp& m, std::size_t l) {
  const auto& off = m.layer_offsets();
  return m.gradients().subspan(off[l], off[l + 1] - off[l]);
}

TEST(MlpLayers, SplitAtEveryLayerGivesTheWholeModelsBits) {
  for (const auto gemm : {kernels::GemmVersion::openblas, kernels::GemmVersion::v4_register}) {
    SCOPED_TRACE(std::string(kernels::gemm_version_name(gemm)));
    Mlp whole = make_model(gemm);
    const std::size_t batch = 9, L = whole.layers();
    const std::size_t in = whole.spec().widths.front(), classes = whole.spec().widths.back();
    const auto x = values(batch * in, 7);
    const auto y = labels_for(batch, classes);
    std::vector<float> logits(batch * classes), dx(batch * in);
    std::size_t correct = 0;
    const float loss = whole.forward_backward(x.data(), y.data(), batch, &correct, dx.data());
    whole.forward(x.data(), batch, logits.data());

    for (std::size_t k = 1; k < L; ++k) {
      SCOPED_TRACE("split at layer " + std::to_string(k));
      Mlp m = make_model(gemm);
      poison(m.gradients());
      Activations low, high;  // two pipeline stages: [0, k) and [k, L)
      m.forward_layers(0, k, x.data(), batch, low);
      m.forward_layers(k, L, low.output(), batch, high);
      EXPECT_TRUE(same_bits({high.output(), logits.size()}, logits));
      std::vector<float> dlogits(batch * classes), dmid(batch * m.spec().widths[k]),
          dx2(batch * in);
      const LossResult head =
          softmax_xent_loss(high.output(), y.data(), batch, classes, dlogits.data());
      EXPECT_EQ(static_cast<float>(head.loss), loss);
      EXPECT_EQ(head.correct, correct);
      m.backward_layers(k, L, high, dlogits.data(), dmid.data());
      m.backward_layers(0, k, low, dmid.data(), dx2.data());
      EXPECT_TRUE(same_bits(m.gradients(), whole.gradients()));
      EXPECT_TRUE(same_bits(dx2, dx));
    }
  }
}

// The backward split in two (zero-bubble schedules): B (input gradients, dZ kept) at every split
// point, the W's of both stages afterwards in either order, accumulated over two micro-batches,
// give backward_layers's bits; the output gradients kept are counted while the W waits; a
// second B before the W, and a W without its B, are refused.
TEST(MlpLayers, InputThenWeightGradientsGiveTheWholeBackwardsBits) {
  for (const auto gemm : {kernels::GemmVersion::openblas, kernels::GemmVersion::v4_register}) {
    SCOPED_TRACE(std::string(kernels::gemm_version_name(gemm)));
    const std::size_t batch = 7, classes = 5;
    Mlp ref = make_model(gemm);
    const std::size_t L = ref.layers(), in = ref.spec().widths.front();
    const auto x = values(2 * batch * in, 17);
    const auto y = labels_for(2 * batch, classes);
    for (std::size_t k = 1; k < L; ++k) {
      SCOPED_TRACE("split at layer " + std::to_string(k));
      Mlp m = make_model(gemm);
      ref = make_model(gemm);
      poison(m.gradients());
      std::vector<float> dx_ref(batch * in), dx(batch * in);
      for (std::size_t mb = 0; mb < 2; ++mb) {
        const float* xm = x.data() + mb * batch * in;
        const std::uint8_t* ym = y.data() + mb * batch;
        std::vector<float> dl(batch * classes), dmid(batch * ref.spec().widths[k]);
        Activations lo, hi, lo2, hi2;
        ref.forward_layers(0, k, xm, batch, lo);
        ref.forward_layers(k, L, lo.output(), batch, hi);
        softmax_xent_loss(hi.output(), ym, batch, classes, dl.data(), 2 * batch);
        ref.backward_layers(k, L, hi, dl.data(), dmid.data(), mb > 0);
        ref.backward_layers(0, k, lo, dmid.data(), dx_ref.data(), mb > 0);

        m.forward_layers(0, k, xm, batch, lo2);
        m.forward_layers(k, L, lo2.output(), batch, hi2);
        std::vector<float> dl2(batch * classes), dmid2(batch * m.spec().widths[k]);
        softmax_xent_loss(hi2.output(), ym, batch, classes, dl2.data(), 2 * batch);
        EXPECT_EQ(hi2.pending_gradient_bytes(), 0u);
        m.backward_input_layers(k, L, hi2, dl2.data(), dmid2.data());
        EXPECT_EQ(hi2.pending_gradient_bytes(), hi2.output_bytes());
        EXPECT_THROW(m.backward_input_layers(k, L, hi2, dl2.data(), dmid2.data()),
                     std::logic_error);
        m.backward_input_layers(0, k, lo2, dmid2.data(), dx.data());
        EXPECT_TRUE(same_bits(dmid2, dmid));
        EXPECT_TRUE(same_bits(dx, dx_ref));
        m.backward_weight_layers(0, k, lo2, mb > 0);  // the lower stage's W first
        m.backward_weight_layers(k, L, hi2, mb > 0);
        EXPECT_EQ(hi2.pending_gradient_bytes(), 0u);
        EXPECT_THROW(m.backward_weight_layers(k, L, hi2, true), std::logic_error);
      }
      EXPECT_TRUE(same_bits(m.gradients(), ref.gradients()));
    }
  }
}

// Forward once over the whole model, backward in two ranges of the same Activations (a dataflow
// graph's per-layer backward nodes do this).
TEST(MlpLayers, BackwardInPiecesOfOneForwardGivesTheWholeModelsBits) {
  Mlp whole = make_model(kernels::GemmVersion::openblas), m = whole;
  const std::size_t batch = 6, L = whole.layers(), classes = whole.spec().widths.back();
  const auto x = values(batch * whole.spec().widths.front(), 8);
  const auto y = labels_for(batch, classes);
  whole.forward_backward(x.data(), y.data(), batch);
  poison(m.gradients());
  Activations a;
  m.forward_layers(0, L, x.data(), batch, a);
  std::vector<float> dlogits(batch * classes), dmid(batch * m.spec().widths[2]);
  softmax_xent_loss(a.output(), y.data(), batch, classes, dlogits.data());
  m.backward_layers(2, L, a, dlogits.data(), dmid.data());
  m.backward_layers(0, 2, a, dmid.data(), nullptr);
  EXPECT_TRUE(same_bits(m.gradients(), whole.gradients()));
}

TEST(MlpLayers, MicroBatchesAccumulateToTheFullBatchGradient) {
  const std::size_t batch = 12;
  Mlp whole = make_model(kernels::GemmVersion::openblas);
  const std::size_t in = whole.spec().widths.front(), classes = whole.spec().widths.back();
  const auto x = values(batch * in, 9);
  const auto y = labels_for(batch, classes);
  const float loss = whole.forward_backward(x.data(), y.data(), batch);
  float largest = 0;
  for (const float g : whole.gradients()) largest = std::max(largest, std::fabs(g));

  // Halves, and an uneven split, whose scale rows / batch is not a power of 2.
  for (const std::size_t split : {std::size_t{6}, std::size_t{5}}) {
    SCOPED_TRACE("micro-batches of " + std::to_string(split) + " and " +
                 std::to_string(batch - split));
    Mlp m = make_model(kernels::GemmVersion::openblas);
    poison(m.gradients());  // the first micro-batch must overwrite, not add
    Activations mb[2];      // both alive at once, as in a pipeline
    const std::size_t rows[2] = {split, batch - split}, start[2] = {0, split};
    for (int i = 0; i < 2; ++i)
      m.forward_layers(0, m.layers(), x.data() + start[i] * in, rows[i], mb[i]);
    double loss_sum = 0;
    for (int i = 0; i < 2; ++i) {
      std::vector<float> dlogits(rows[i] * classes);
      const LossResult head = softmax_xent_loss(mb[i].output(), y.data() + start[i], rows[i],
                                                classes, dlogits.data(), batch);
      loss_sum += head.loss * static_cast<double>(rows[i]);
      m.backward_layers(0, m.layers(), mb[i], dlogits.data(), nullptr, /*accumulate=*/i > 0);
    }
    EXPECT_NEAR(loss_sum / batch, loss, 1e-6 * loss);
    const auto g = m.gradients(), ref = whole.gradients();
    for (std::size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], ref[i], 1e-5 * std::fabs(ref[i]) + 1e-6 * largest) << "element " << i;
  }
}

TEST(MlpLayers, OnLayerDoneRunsOncePerLayerTopDownWhenThatGradientIsFinal) {
  Mlp whole = make_model(kernels::GemmVersion::openblas), m = whole;
  const std::size_t batch = 5, L = whole.layers(), classes = whole.spec().widths.back();
  const auto x = values(batch * whole.spec().widths.front(), 10);
  const auto y = labels_for(batch, classes);
  whole.forward_backward(x.data(), y.data(), batch);
  Activations a;
  m.forward_layers(0, L, x.data(), batch, a);
  std::vector<float> dlogits(batch * classes);
  softmax_xent_loss(a.output(), y.data(), batch, classes, dlogits.data());

  for (const std::size_t first : {std::size_t{0}, std::size_t{1}}) {
    SCOPED_TRACE("layers [" + std::to_string(first) + ", " + std::to_string(L) + ")");
    poison(m.gradients());
    std::vector<std::size_t> order;
    m.backward_layers(first, L, a, dlogits.data(), nullptr, false, [&](std::size_t l) {
      order.push_back(l);
      // Final already (equal to the finished whole-model gradient) ...
      EXPECT_TRUE(same_bits(layer_slice(m, l), layer_slice(whole, l))) << "layer " << l;
      // ... and reported before the layer below is started: the window an all-reduce uses.
      if (l > first) {
        EXPECT_TRUE(std::isnan(layer_slice(m, l - 1)[0])) << "layer " << l - 1;
      }
    });
    std::vector<std::size_t> expected;
    for (std::size_t l = L; l-- > first;) expected.push_back(l);
    EXPECT_EQ(order, expected);
  }
}

TEST(MlpLayers, BadRangesAreRefusedNamingTheRange) {
  Mlp m = make_model(kernels::GemmVersion::openblas);  // 4 layers
  const auto x = values(3 * 13, 11);
  const std::vector<float> dout(3 * 13);
  auto expect_refused = [&](auto&& call, const std::string& range) {
    try {
      call();
      ADD_FAILURE() << range << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(range), std::string::npos) << e.what();
    }
  };
  Activations a;
  for (const auto& bounds :
       std::vector<std::pair<std::size_t, std::size_t>>{{2, 2}, {3, 1}, {0, 5}, {4, 5}, {0, 0}}) {
    // Named copies, not structured bindings: clang 14 (the tsan preset) cannot capture those.
    const std::size_t first = bounds.first, last = bounds.second;
    // Built with +=: GCC 12 warns (-Wrestrict, a false positive) on "[" + std::to_string(...).
    std::string range = "[";
    range += std::to_string(first) + ", " + std::to_string(last) + ")";
    expect_refused([&] { m.forward_layers(first, last, x.data(), 3, a); }, range);
    expect_refused([&] { m.backward_layers(first, last, a, dout.data(), nullptr); }, range);
  }
  // Backward over layers this Activations did not run forward.
  expect_refused([&] { m.backward_layers(0, 1, a, dout.data(), nullptr); }, "[0, 1)");
  m.forward_layers(1, 3, x.data(), 3, a);
  expect_refused([&] { m.backward_layers(0, 2, a, dout.data(), nullptr); }, "[0, 2)");
  expect_refused([&] { m.backward_layers(2, 4, a, dout.data(), nullptr); }, "[2, 4)");
  EXPECT_NO_THROW(m.backward_layers(2, 3, a, dout.data(), nullptr));
  EXPECT_THROW(m.forward_layers(0, 1, x.data(), 0, a), std::invalid_argument);
  EXPECT_THROW(m.forward_layers(0, 1, nullptr, 3, a), std::invalid_argument);
  EXPECT_THROW(a.output(0), std::out_of_range);
}

// Every thread runs forward_layers on its own micro-batches and Activations, all on one const
// model; each micro-batch goes through two ranges, as two pipeline stages would.
TEST(MlpLayers, ConcurrentForwardOnAConstModelMatchesSequential) {
  for (const auto gemm : {kernels::GemmVersion::openblas, kernels::GemmVersion::v4_register}) {
    SCOPED_TRACE(std::string(kernels::gemm_version_name(gemm)));
    const Mlp m = make_model(gemm, "64-48-32-10");
    const std::size_t micro = 32, rows = 8, in = 64, classes = 10;
    const auto x = values(micro * rows * in, 12);
    auto run = [&](std::size_t mb, Activations& low, Activations& high, float* out) {
      m.forward_layers(0, 1, x.data() + mb * rows * in, rows, low);
      m.forward_layers(1, m.layers(), low.output(), rows, high);
      std::copy_n(high.output(), rows * classes, out);
    };
    std::vector<float> sequential(micro * rows * classes);
    {
      Activations low, high;
      for (std::size_t mb = 0; mb < micro; ++mb)
        run(mb, low, high, sequential.data() + mb * rows * classes);
    }
    for (const std::size_t threads : {1, 2, 4, 8}) {
      std::vector<float> out(sequential.size(), std::nanf(""));
      {
        std::vector<std::jthread> team;
        for (std::size_t t = 0; t < threads; ++t)
          team.emplace_back([&, t] {
            Activations low, high;
            for (int round = 0; round < 4; ++round)  // rounds: more chances to overlap
              for (std::size_t mb = t; mb < micro; mb += threads)
                run(mb, low, high, out.data() + mb * rows * classes);
          });
      }
      EXPECT_TRUE(same_bits(out, sequential)) << threads << " threads";
    }
  }
}

// Two pipeline stages' backward at once, as 1F1B overlaps them: layers [2, 4) for micro-batch 1
// beside [0, 2) for micro-batch 0, each with its own Activations and its own layers' gradients.
TEST(MlpLayers, BackwardOfDisjointStagesAtOnceMatchesSequential) {
  for (const auto gemm : {kernels::GemmVersion::openblas, kernels::GemmVersion::v4_register}) {
    SCOPED_TRACE(std::string(kernels::gemm_version_name(gemm)));
    Mlp m = make_model(gemm, "40-32-24-16-10");
    const std::size_t rows = 8, in = 40, mid = 24, classes = 10, L = m.layers();
    const auto x = values(2 * rows * in, 13);
    const auto y = labels_for(2 * rows, classes);
    Activations low[2], high[2];
    std::vector<float> dlogits[2], dmid[2];
    for (std::size_t i = 0; i < 2; ++i) {
      m.forward_layers(0, 2, x.data() + i * rows * in, rows, low[i]);
      m.forward_layers(2, L, low[i].output(), rows, high[i]);
      dlogits[i].resize(rows * classes);
      dmid[i].resize(rows * mid);
      softmax_xent_loss(high[i].output(), y.data() + i * rows, rows, classes, dlogits[i].data());
    }
    m.backward_layers(2, L, high[0], dlogits[0].data(), dmid[0].data());
    auto stage1 = [&] { m.backward_layers(2, L, high[1], dlogits[1].data(), dmid[1].data()); };
    auto stage0 = [&] { m.backward_layers(0, 2, low[0], dmid[0].data(), nullptr); };
    stage1();
    stage0();
    const std::vector<float> sequential(m.gradients().begin(), m.gradients().end()),
        sequential_dmid = dmid[1];
    for (int round = 0; round < 20; ++round) {
      poison(m.gradients());
      { std::jthread a(stage1), b(stage0); }
      ASSERT_TRUE(same_bits(m.gradients(), sequential)) << "round " << round;
      ASSERT_TRUE(same_bits(dmid[1], sequential_dmid)) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace concurdl::nn
