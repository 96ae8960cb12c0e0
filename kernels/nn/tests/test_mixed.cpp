// Mixed precision (precision.hpp, Mlp::forward_backward_mixed): bf16 and fp16 steps give float32's
// gradients within their formats' rounding; fp16 without a loss scale loses small gradients that
// a scale keeps; an overflow is found and leaves gradients() alone; the loss scaler backs off,
// skips and grows; a trainer forced to overflow skips every step and leaves the weights bit for
// bit, and one that does not overflow grows its scale on schedule; bf16 and fp16 training learn a
// Fashion-MNIST subset as float32 does (skipped when the data set is not installed).
//   nn_tests --gtest_filter='Mixed*:LossScal*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/data/idx.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/trainer.hpp"
#include "test_util.hpp"

namespace concurdl::nn {
namespace {

using nn_test::kSanitized;
using nn_test::toy_dataset;

// ||a - b|| / ||b||.
double relative_error(std::span<const float> a, std::span<const float> b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

struct Reference {
  std::vector<float> grads;
  float loss = 0;
};

// The float32 gradient of model on the first `batch` samples of d.
Reference fp32_gradient(Mlp& model, const Dataset& d, std::size_t batch) {
  Reference r;
  r.loss = model.forward_backward(d.x.data(), d.y.data(), batch);
  r.grads.assign(model.gradients().begin(), model.gradients().end());
  return r;
}

TEST(MixedPrecision, GradientsAreFloat32sWithinTheFormatsRounding) {
  const Dataset d = toy_dataset(256, 40, 6, 3);
  // One linear layer: no ReLU whose mask a rounding can flip, so the error is the roundings'
  // alone, and FP16's 3 more mantissa bits show (2^-11 against bfloat16's 2^-8 per rounding).
  Mlp linear(MlpSpec::parse("40-6"), 5);
  const Reference want_linear = fp32_gradient(linear, d, 256);
  double err[2] = {};
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
    const Mlp::MixedStep got =
        linear.forward_backward_mixed(p, d.x.data(), d.y.data(), 256, 1024.0f);
    EXPECT_TRUE(got.finite);
    err[p == Precision::fp16] = relative_error(linear.gradients(), want_linear.grads);
  }
  EXPECT_GT(err[0], 0.0) << "bfloat16 gave float32's bits: nothing was rounded";
  EXPECT_LE(err[0], 0x1p-6);
  EXPECT_LT(err[1], err[0] / 4) << "bf16 " << err[0] << ", fp16 " << err[1];
  // Two hidden layers: a rounding near a ReLU's 0 flips its mask, a step change in the
  // gradient; perturbing float32's weights by 2^-12 of themselves moves this gradient by 0.25%,
  // by 2^-9 1%. Both formats land within a few percent.
  Mlp model(MlpSpec::parse("40-32-16-6"), 5);
  const Reference want = fp32_gradient(model, d, 256);
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(std::string(describe(p)));
    std::size_t correct = 999;
    const Mlp::MixedStep got =
        model.forward_backward_mixed(p, d.x.data(), d.y.data(), 256, 1024.0f, &correct);
    EXPECT_TRUE(got.finite);
    EXPECT_NEAR(got.loss, want.loss, 0.01 * want.loss);
    EXPECT_LE(correct, 256u);
    EXPECT_LE(relative_error(model.gradients(), want.grads), 0.05);
    EXPECT_EQ(model.mixed_gradients().size(), want.grads.size());
  }
}

TEST(MixedPrecision, Fp16WithoutAScaleLosesSmallGradientsAScaleKeeps) {
  // A model trained until it is sure of its answers: its dlogits, p - onehot over the batch, are
  // tiny (about 1e-7 each over 4096 samples), below FP16's smallest normal (2^-14), where it
  // keeps only the bits above 2^-24, many below 2^-25, where it keeps nothing. Scaled by 2^16
  // they are back in range: the gradients Micikevicius et al. show lost without a scale.
  const Dataset d = toy_dataset(4096, 40, 6, 4);
  TrainConfig c;
  c.spec = MlpSpec::parse("40-6");
  c.batch = 64;
  c.threads = 1;
  c.sgd.lr = 0.2f;
  c.lr_decay = 1.0f;
  Trainer t(c, d);
  for (int e = 0; e < 10; ++e) t.run_epoch();
  Mlp& model = t.model();
  const Reference want = fp32_gradient(model, d, 4096);
  model.forward_backward_mixed(Precision::fp16, d.x.data(), d.y.data(), 4096, 1.0f);
  const double unscaled = relative_error(model.gradients(), want.grads);
  model.forward_backward_mixed(Precision::fp16, d.x.data(), d.y.data(), 4096, 65536.0f);
  const double scaled = relative_error(model.gradients(), want.grads);
  // 0.025 against 0.0008 here: a factor of 31.
  EXPECT_GT(unscaled, 8 * scaled) << "unscaled " << unscaled << ", scaled by 2^16 " << scaled;
  // bfloat16 has float32's range: nothing lost without a scale.
  model.forward_backward_mixed(Precision::bf16, d.x.data(), d.y.data(), 4096, 1.0f);
  EXPECT_LT(relative_error(model.gradients(), want.grads), 0x1p-6);
}

TEST(MixedPrecision, AnOverflowIsFoundAndLeavesTheGradientsAlone) {
  const Dataset d = toy_dataset(64, 40, 6, 3);
  Mlp model(MlpSpec::parse("40-32-16-6"), 5);
  std::fill(model.gradients().begin(), model.gradients().end(), 7.0f);
  // 2^40 x a dlogit of 1/64 is past FP16's 65504.
  const Mlp::MixedStep r =
      model.forward_backward_mixed(Precision::fp16, d.x.data(), d.y.data(), 64, 0x1p40f);
  EXPECT_FALSE(r.finite);
  EXPECT_TRUE(std::isfinite(r.loss));
  for (const float g : model.gradients()) ASSERT_EQ(g, 7.0f);
  // bfloat16 holds 2^40 x 1/64 easily.
  EXPECT_TRUE(
      model.forward_backward_mixed(Precision::bf16, d.x.data(), d.y.data(), 64, 0x1p40f).finite);
  // keep does not look: the same overflow reported finite, the same 16-bit gradients as check's.
  Mlp kept(MlpSpec::parse("40-32-16-6"), 5), checked(MlpSpec::parse("40-32-16-6"), 5);
  EXPECT_TRUE(kept.forward_backward_mixed(Precision::fp16, d.x.data(), d.y.data(), 64, 0x1p40f,
                                          nullptr, 0, Mlp::MixedGrads::keep)
                  .finite);
  EXPECT_FALSE(checked
                   .forward_backward_mixed(Precision::fp16, d.x.data(), d.y.data(), 64, 0x1p40f,
                                           nullptr, 0, Mlp::MixedGrads::check)
                   .finite);
  const Mlp& k = kept;
  const Mlp& c = checked;
  EXPECT_TRUE(std::ranges::equal(k.mixed_gradients(), c.mixed_gradients()));
}

// A batch handed over in 16 bits (read in place) is the float batch rounded: the same loss, the
// same 16-bit gradients, and for the fused step the same parameters, bit for bit; a batch that
// is not that rounding gives other gradients.
TEST(MixedPrecision, ABatchInSixteenBitsIsTheFloatBatchRounded) {
  const Dataset d = toy_dataset(64, 40, 6, 3);
  const MlpSpec spec = MlpSpec::parse("40-32-16-6");
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(std::string(describe(p)));
    std::vector<std::uint16_t> x16(d.x.size());
    to_16bit(p, d.x, x16);
    Mlp a(spec, 5), b(spec, 5);
    const Mlp::MixedStep fa = a.forward_backward_mixed(p, d.x.data(), d.y.data(), 64, 512.0f,
                                                       nullptr, 0, Mlp::MixedGrads::check);
    const Mlp::MixedStep fb = b.forward_backward_mixed(p, x16.data(), d.y.data(), 64, 512.0f,
                                                       nullptr, 0, Mlp::MixedGrads::check);
    EXPECT_EQ(fa.loss, fb.loss);
    const Mlp &ca = a, &cb = b;
    EXPECT_TRUE(std::ranges::equal(ca.mixed_gradients(), cb.mixed_gradients()));
    Sgd oa(a.parameters().size(), {}), ob(b.parameters().size(), {});
    const auto yes = [](bool finite) { return finite; };
    for (int step = 0; step < 3; ++step) {
      const Mlp::MixedStep sa = a.train_step_mixed(p, d.x.data(), d.y.data(), 64, 512.0f, oa, yes);
      const Mlp::MixedStep sb = b.train_step_mixed(p, x16.data(), d.y.data(), 64, 512.0f, ob, yes);
      EXPECT_EQ(sa.loss, sb.loss);
      EXPECT_TRUE(sa.applied && sb.applied);
    }
    EXPECT_TRUE(nn_test::same_bits(a.parameters(), b.parameters()));
    // Not the rounding of d.x: other gradients.
    std::vector<std::uint16_t> other(x16);
    std::reverse(other.begin(), other.end());
    Mlp e(spec, 5), f(spec, 5);
    e.forward_backward_mixed(p, x16.data(), d.y.data(), 64, 512.0f, nullptr, 0,
                             Mlp::MixedGrads::check);
    f.forward_backward_mixed(p, other.data(), d.y.data(), 64, 512.0f, nullptr, 0,
                             Mlp::MixedGrads::check);
    const Mlp &ce = e, &cf = f;
    EXPECT_FALSE(std::ranges::equal(ce.mixed_gradients(), cf.mixed_gradients()));
  }
}

// The hand-over hook: every layer from the last down, each once its 16-bit gradients are stored
// (the same bits as without the hook), `finite` from each layer's own check (an overflow found
// as without it), and with unscale it is refused.
TEST(MixedPrecision, EachLayerIsHandedOverOnceItsGradientsAreStored) {
  const Dataset d = toy_dataset(64, 40, 6, 3);
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
    for (const float scale : {1024.0f, 0x1p40f}) {
      Mlp plain(MlpSpec::parse("40-32-16-6"), 5), hooked(MlpSpec::parse("40-32-16-6"), 5);
      const Mlp::MixedStep want = plain.forward_backward_mixed(p, d.x.data(), d.y.data(), 64, scale,
                                                               nullptr, 0, Mlp::MixedGrads::check);
      std::vector<std::size_t> order;
      std::vector<std::vector<std::uint16_t>> seen;  // each layer's values when handed over
      const auto& off = hooked.layer_offsets();
      const Mlp::MixedStep got = hooked.forward_backward_mixed(
          p, d.x.data(), d.y.data(), 64, scale, nullptr, 0, Mlp::MixedGrads::check,
          [&](std::size_t l) {
            order.push_back(l);
            const auto g = hooked.mixed_gradients();
            seen.emplace_back(g.begin() + static_cast<std::ptrdiff_t>(off[l]),
                              g.begin() + static_cast<std::ptrdiff_t>(off[l + 1]));
          });
      EXPECT_EQ(order, (std::vector<std::size_t>{2, 1, 0}));
      EXPECT_EQ(got.finite, want.finite) << "scale " << scale;
      EXPECT_EQ(got.loss, want.loss);
      const auto w = plain.mixed_gradients();
      for (std::size_t i = 0; i < order.size(); ++i) {
        const std::size_t l = order[i];
        EXPECT_TRUE(std::equal(seen[i].begin(), seen[i].end(),
                               w.begin() + static_cast<std::ptrdiff_t>(off[l])))
            << "layer " << l << " was handed over before it was complete";
      }
    }
  }
  Mlp model(MlpSpec::parse("40-32-16-6"), 5);
  EXPECT_THROW(
      model.forward_backward_mixed(Precision::bf16, d.x.data(), d.y.data(), 64, 1.0f, nullptr, 0,
                                   Mlp::MixedGrads::unscale, [](std::size_t) {}),
      std::invalid_argument);
}

// The fused mixed step (train_step_mixed) against its unfused twin (forward_backward_mixed,
// then Sgd::step_16bit), from the same start: they differ only in the weight gradients' rounding
// to 16 bits, which the fused one skips, so the updates agree within that rounding (2^-8 of a
// gradient in bfloat16, 2^-11 in FP16) and not bit for bit. After the step the working copy
// holds the rounding of every updated parameter; a skipped step leaves parameters, velocities
// and the copy alone; parameters written through parameters() are rounded afresh.
TEST(MixedPrecision, TheFusedStepIsTheUnfusedOneWithFloat32WeightGradients) {
  const Dataset d = toy_dataset(64, 40, 6, 3);
  const SgdOptions o{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-3f};
  for (const kernels::GemmVersion g :
       {kernels::GemmVersion::v4_register, kernels::GemmVersion::openblas})
    for (const Precision p : {Precision::bf16, Precision::fp16}) {
      const std::string what =
          std::string(describe(p)) + " " + std::string(kernels::gemm_version_name(g));
      const float scale = p == Precision::fp16 ? 1024.0f : 1.0f;
      Mlp fused(MlpSpec::parse("40-32-16-6"), 7, g), unfused = fused;
      Sgd opt_f(fused.parameters().size(), o), opt_u = opt_f;
      const std::vector<float> start(fused.parameters().begin(), fused.parameters().end());
      int asked = 0;
      const Mlp::MixedStep m =
          fused.train_step_mixed(p, d.x.data(), d.y.data(), 64, scale, opt_f, [&](bool finite) {
            ++asked;
            return finite;
          });
      EXPECT_EQ(asked, 1) << what;
      EXPECT_TRUE(m.finite && m.applied) << what;
      const Mlp::MixedStep u = unfused.forward_backward_mixed(p, d.x.data(), d.y.data(), 64, scale,
                                                              nullptr, 0, Mlp::MixedGrads::check);
      ASSERT_TRUE(u.finite);
      EXPECT_EQ(m.loss, u.loss) << what << ": the same forward pass";
      opt_u.step_16bit(unfused.parameters(), unfused.mixed_gradients(), p, scale);
      double step_size = 0, diff = 0;
      for (std::size_t i = 0; i < start.size(); ++i) {
        step_size = std::max(step_size, std::fabs(double{unfused.parameters()[i]} - start[i]));
        diff = std::max(diff, std::fabs(double{fused.parameters()[i]} - unfused.parameters()[i]));
      }
      EXPECT_GT(step_size, 0.0) << what;
      EXPECT_GT(diff, 0.0) << what << ": the weight gradients were rounded after all?";
      EXPECT_LT(diff, step_size * (p == Precision::bf16 ? 0x1p-6 : 0x1p-9)) << what;
      const auto rounded = [&](const Mlp& model) {
        std::vector<std::uint16_t> r(model.parameters().size());
        to_16bit(p, model.parameters(), r);
        return r;
      };
      const std::span<const std::uint16_t> copy = fused.mixed_parameters();
      EXPECT_EQ(std::vector<std::uint16_t>(copy.begin(), copy.end()), rounded(fused)) << what;
      // Skipped: nothing moves.
      const std::vector<float> p1(fused.parameters().begin(), fused.parameters().end());
      const std::vector<float> v1(opt_f.velocity().begin(), opt_f.velocity().end());
      const Mlp::MixedStep s = fused.train_step_mixed(p, d.x.data(), d.y.data(), 64, scale, opt_f,
                                                      [](bool) { return false; });
      EXPECT_FALSE(s.applied);
      const Mlp& cf = fused;
      EXPECT_EQ(std::vector<float>(cf.parameters().begin(), cf.parameters().end()), p1) << what;
      EXPECT_EQ(std::vector<float>(opt_f.velocity().begin(), opt_f.velocity().end()), v1) << what;
      // Written through parameters(): the next step rounds them afresh (a copy kept as current
      // would still hold the old weights).
      for (float& w : fused.parameters()) w *= 0.5f;
      fused.train_step_mixed(p, d.x.data(), d.y.data(), 64, scale, opt_f,
                             [](bool) { return false; });
      const std::span<const std::uint16_t> again = fused.mixed_parameters();
      EXPECT_EQ(std::vector<std::uint16_t>(again.begin(), again.end()), rounded(fused)) << what;
    }
  // An overflow is asked about as one, and the update is not applied when refused.
  Mlp model(MlpSpec::parse("40-32-6"), 3);
  Sgd opt(model.parameters().size(), o);
  bool seen = true;
  const Mlp::MixedStep m = model.train_step_mixed(Precision::fp16, d.x.data(), d.y.data(), 64,
                                                  0x1p40f, opt, [&](bool finite) {
                                                    seen = finite;
                                                    return false;
                                                  });
  EXPECT_FALSE(seen);
  EXPECT_FALSE(m.finite);
  Sgd wrong(3, o);
  EXPECT_THROW(model.train_step_mixed(Precision::bf16, d.x.data(), d.y.data(), 64, 1.0f, wrong,
                                      [](bool) { return true; }),
               std::invalid_argument);
  EXPECT_THROW(model.train_step_mixed(Precision::fp32, d.x.data(), d.y.data(), 64, 1.0f, opt,
                                      [](bool) { return true; }),
               std::invalid_argument);
}

// The 16-bit step is mlp_mixed.cpp's formula, bit for bit: every product GEMM v4's on the
// widened 16-bit tensors, bias and ReLU in float32, each stored tensor rounded once, the bias
// gradient summed over the rows in order. Written here as separate passes over whole tensors,
// against the step's fused and blocked ones. FP16 on GEMM v4 (bf16 takes VDPBF16PS where the CPU
// has it, whose sums are in another order).
TEST(MixedPrecision, TheFp16StepIsItsFormulaBitForBit) {
  using kernels::Trans;
  const auto v4 = kernels::GemmVersion::v4_register;
  const Dataset d = toy_dataset(64, 40, 6, 3);
  const std::size_t batch = 64;
  const float scale = 1024.0f;
  Mlp model(MlpSpec::parse("40-48-24-6"), 11, v4);
  const std::vector<std::size_t> widths = {40, 48, 24, 6};
  const std::vector<std::size_t>& off = model.layer_offsets();
  const std::span<const float> params = std::as_const(model).parameters();
  const auto round = [](std::span<const float> x) {
    std::vector<std::uint16_t> h(x.size());
    to_16bit(Precision::fp16, x, h);
    return h;
  };
  const auto widen = [](const std::vector<std::uint16_t>& h) {
    std::vector<float> x(h.size());
    from_16bit(Precision::fp16, h, x);
    return x;
  };
  const std::vector<float> w = widen(round(params));  // the working copy, widened
  std::vector<std::vector<std::uint16_t>> act = {round({d.x.data(), batch * widths[0]})};
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::size_t in = widths[l], out = widths[l + 1];
    const std::vector<float> a = widen(act[l]);
    std::vector<float> z(batch * out);
    kernels::gemm(v4, Trans::no, Trans::yes, batch, out, in, 1.0f, a.data(), in, w.data() + off[l],
                  in, 0.0f, z.data(), out);
    for (std::size_t i = 0; i < batch; ++i)
      for (std::size_t j = 0; j < out; ++j) {
        float& v = z[i * out + j];
        v += params[off[l] + out * in + j];
        if (l + 2 < widths.size()) v = v > 0.0f ? v : 0.0f;
      }
    act.push_back(round(z));
  }
  const std::size_t classes = widths.back();
  std::vector<float> logits = widen(act.back()), dl(batch * classes);
  const LossResult head =
      softmax_xent_loss(logits.data(), d.y.data(), batch, classes, dl.data(), 0);
  for (float& v : dl) v *= scale;
  std::vector<std::uint16_t> delta = round(dl), want(params.size());
  for (std::size_t l = widths.size() - 1; l-- > 0;) {
    const std::size_t in = widths[l], out = widths[l + 1];
    const std::vector<float> dz = widen(delta), a = widen(act[l]);
    std::vector<float> dw(out * in), db(out, 0.0f);
    kernels::gemm(v4, Trans::yes, Trans::no, out, in, batch, 1.0f, dz.data(), out, a.data(), in,
                  0.0f, dw.data(), in);
    for (std::size_t i = 0; i < batch; ++i)
      for (std::size_t j = 0; j < out; ++j) db[j] += dz[i * out + j];
    const std::vector<std::uint16_t> gw = round(dw), gb = round(db);
    std::copy(gw.begin(), gw.end(), want.begin() + off[l]);
    std::copy(gb.begin(), gb.end(), want.begin() + off[l] + out * in);
    if (l == 0) break;
    std::vector<float> da(batch * in);
    kernels::gemm(v4, Trans::no, Trans::no, batch, in, out, 1.0f, dz.data(), out, w.data() + off[l],
                  in, 0.0f, da.data(), in);
    for (std::size_t i = 0; i < batch * in; ++i)
      if ((act[l][i] & 0x7fffu) == 0) da[i] = 0.0f;
    delta = round(da);
  }
  const Mlp::MixedStep got = model.forward_backward_mixed(
      Precision::fp16, d.x.data(), d.y.data(), batch, scale, nullptr, 0, Mlp::MixedGrads::check);
  ASSERT_TRUE(got.finite);
  EXPECT_EQ(got.loss, static_cast<float>(head.loss));
  const std::span<const std::uint16_t> g16 = std::as_const(model).mixed_gradients();
  EXPECT_EQ(std::vector<std::uint16_t>(g16.begin(), g16.end()), want);
}

TEST(MixedPrecision, BadArgumentsAreClearErrors) {
  const Dataset d = toy_dataset(8, 4, 2, 3);
  Mlp model(MlpSpec::parse("4-3-2"), 5);
  EXPECT_THROW(model.forward_backward_mixed(Precision::fp32, d.x.data(), d.y.data(), 8, 1.0f),
               std::invalid_argument);
  EXPECT_THROW(model.forward_backward_mixed(Precision::bf16, d.x.data(), d.y.data(), 8, 0.0f),
               std::invalid_argument);
  EXPECT_THROW(model.forward_backward_mixed(Precision::bf16, d.x.data(), d.y.data(), 0, 1.0f),
               std::invalid_argument);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  try {
    parse_precision("fp8");
    ADD_FAILURE() << "fp8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'fp8'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(precision_compute(Precision::bf16).empty());
}

TEST(LossScaler, BacksOffAndSkipsOnAnOverflowAndGrowsAfterAnIntervalOfGoodSteps) {
  LossScaler s({.initial = 1024.0f, .growth = 2.0f, .backoff = 0.5f, .growth_interval = 3});
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_FALSE(s.update(true));  // overflow: skip, halve
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_FALSE(s.update(true));  // the count of good steps starts again
  EXPECT_EQ(s.scale(), 256.0f);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 512.0f);  // three in a row: doubled
  EXPECT_EQ(s.state().good_steps, 0u);
  EXPECT_EQ(s.state().skipped, 2u);
  LossScaler tiny({.initial = 0x1p-23f});
  for (int i = 0; i < 10; ++i) tiny.update(true);
  EXPECT_EQ(tiny.scale(), 0x1p-24f);  // floored
  EXPECT_THROW(LossScaler({.initial = 0.0f}), std::invalid_argument);
  EXPECT_THROW(LossScaler({.backoff = 1.0f}), std::invalid_argument);
}

TrainConfig fp16_config(float initial, std::size_t interval) {
  TrainConfig c;
  c.spec = MlpSpec::parse("20-16-8-4");
  c.batch = 32;  // 300 samples: 10 steps an epoch
  c.threads = 1;
  c.precision = Precision::fp16;
  c.loss_scaler = {.initial = initial, .growth_interval = interval};
  return c;
}

TEST(MixedPrecision, AForcedOverflowSkipsEveryStepAndLeavesTheWeights) {
  const Dataset train = toy_dataset(300, 20, 4, 1);
  Trainer t(fp16_config(0x1p60f, 2000), train);
  const std::vector<float> before(t.model().parameters().begin(), t.model().parameters().end());
  const EpochResult r = t.run_epoch();
  EXPECT_EQ(r.skipped_steps, 10u);
  EXPECT_EQ(t.loss_scaler().scale(), 0x1p50f);  // halved ten times
  EXPECT_EQ(t.loss_scaler().state().skipped, 10u);
  EXPECT_EQ(std::memcmp(before.data(), t.model().parameters().data(), before.size() * 4), 0);
}

TEST(MixedPrecision, TheScaleFallsUntilNothingOverflowsThenGrowsOnSchedule) {
  const Dataset train = toy_dataset(300, 20, 4, 1);
  {
    Trainer t(fp16_config(256.0f, 3), train);  // no overflow at 2^8 .. 2^11
    const EpochResult r = t.run_epoch();
    EXPECT_EQ(r.skipped_steps, 0u);
    EXPECT_EQ(t.loss_scaler().scale(), 2048.0f);  // 10 good steps: grown at 3, 6 and 9
  }
  Trainer t(fp16_config(0x1p30f, 4), train);
  std::size_t skipped = 0;
  for (int e = 0; e < 3; ++e) skipped += t.run_epoch().skipped_steps;
  EXPECT_GE(skipped, 1u);
  EXPECT_LT(skipped, 30u);
  EXPECT_LT(t.loss_scaler().scale(), 0x1p30f);
  for (const float p : t.model().parameters()) ASSERT_TRUE(std::isfinite(p));
}

TEST(MixedPrecision, Bf16AndFp16LearnAFashionMnistSubsetAsFloat32Does) {
  std::string why;
  if (!data::fashion_mnist_present(data::fashion_mnist_dir(), &why)) GTEST_SKIP() << why;
  const int saved = kernels::compute_threads();
  const auto fm = data::load_fashion_mnist();
  const Dataset train = to_dataset(fm.train, kSanitized ? 600 : 3000);
  const Dataset test = to_dataset(fm.test, kSanitized ? 300 : 1000);
  double accuracy[3] = {};
  for (const Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    TrainConfig c;
    c.threads = 2;
    if (kSanitized) c.spec = MlpSpec::parse("784-64-10");
    c.precision = p;
    Trainer t(c, train);
    for (int e = 0; e < 3; ++e) t.run_epoch();
    accuracy[static_cast<int>(p)] = t.evaluate(test).accuracy;
  }
  kernels::set_compute_threads(saved);
  EXPECT_GT(accuracy[0], 0.6);
  // A subset and 3 epochs: the runs differ by a few test samples; the 0.005 of the full run is
  // ch05/precision's claim.
  EXPECT_NEAR(accuracy[1], accuracy[0], 0.03);
  EXPECT_NEAR(accuracy[2], accuracy[0], 0.03);
}

}  // namespace
}  // namespace concurdl::nn
