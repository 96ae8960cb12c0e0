// The MLP with a MoE block inside it (moe_trainer.hpp): its gradients against central finite
// differences of a double-precision re-implementation (the MLP's layers around moe_reference's
// block; k = 1 and 2, with drops and dropless); training that lowers the loss and keeps its
// routing statistics; a run resumed from its checkpoint ending on the uninterrupted run's bits;
// dense and MoE checkpoints refused for each other; bad blocks refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/moe_trainer.hpp"
#include "moe_reference.hpp"
#include "test_util.hpp"

namespace concurdl::nn {
namespace {

using nn_test::same_bits;
using nn_test::values;

// The model's objective in double: MLP layers [0, L), the block, layers [L, end), mean
// cross-entropy, plus the block's aux loss. Parameters flat as Mlp and MoeLayer lay them out.
struct ModelReference {
  MlpSpec spec;
  std::size_t after;
  moe_test::Reference block;
  double kink = 0;  // smallest |pre-activation| of an MLP ReLU

  // Layer l of the MLP on `in` (rows x widths[l]), its ReLU unless last.
  std::vector<double> layer(const std::vector<double>& p, const std::vector<std::size_t>& off,
                            std::size_t l, const std::vector<double>& in, std::size_t rows) {
    const std::size_t n_in = spec.widths[l], n_out = spec.widths[l + 1];
    const bool relu = l + 2 < spec.widths.size();
    std::vector<double> out(rows * n_out);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < n_out; ++o) {
        double z = p[off[l] + n_out * n_in + o];
        for (std::size_t i = 0; i < n_in; ++i) z += p[off[l] + o * n_in + i] * in[r * n_in + i];
        if (relu) kink = std::min(kink, std::fabs(z));
        out[r * n_out + o] = relu ? std::max(z, 0.0) : z;
      }
    return out;
  }

  double objective(const std::vector<double>& pm, const std::vector<std::size_t>& off,
                   const std::vector<double>& pe, const std::vector<double>& x,
                   const std::vector<std::uint8_t>& labels, std::size_t rows) {
    kink = std::numeric_limits<double>::infinity();
    std::vector<double> h = x;
    for (std::size_t l = 0; l < after; ++l) h = layer(pm, off, l, h, rows);
    block.loss(pe, h, std::vector<double>(h.size(), 0.0), rows);
    h = block.y;
    for (std::size_t l = after; l + 1 < spec.widths.size(); ++l) h = layer(pm, off, l, h, rows);
    const std::size_t classes = spec.widths.back();
    double loss = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const double* z = h.data() + r * classes;
      const double m = *std::max_element(z, z + classes);
      double sum = 0;
      for (std::size_t c = 0; c < classes; ++c) sum += std::exp(z[c] - m);
      loss += std::log(sum) + m - z[labels[r]];
    }
    return loss / static_cast<double>(rows) + block.aux;
  }
};

void check_model_gradients(const char* name, std::size_t k, double factor, bool dropless) {
  SCOPED_TRACE(name);
  const MlpSpec spec{{7, 6, 5, 3}};
  MoeBlock b{.after = 1, .hidden = 4, .experts = 4, .top_k = k};
  b.capacity_factor = factor;
  b.dropless = dropless;
  b.aux_alpha = 0.5f;  // large, so the aux gradient is well above the tolerance
  MoeMlp m(spec, b, 9);
  // A skewed router (scaled up, biased), so capacity bites and routing margins are wide.
  const LayerView r = m.moe().router();
  const auto rb = values(r.b.size(), 31);
  for (std::size_t i = 0; i < r.w.rows * r.w.cols; ++i) r.w.data[i] *= 6.0f;
  for (std::size_t i = 0; i < r.b.size(); ++i) r.b[i] = 0.3f * rb[i];
  const std::size_t T = 16;
  const auto xf = values(T * spec.widths[0], 21);
  std::vector<std::uint8_t> labels(T);
  for (std::size_t t = 0; t < T; ++t) labels[t] = static_cast<std::uint8_t>((t * 5 + 1) % 3);
  const MoeMlp::Loss l = m.forward_backward(xf.data(), labels.data(), T);
  EXPECT_EQ(m.moe().stats().dropped > 0, !dropless && factor < 1.0);

  ModelReference ref{spec, b.after, moe_test::Reference{m.moe().spec()}};
  std::vector<double> pm(m.mlp().parameters().begin(), m.mlp().parameters().end());
  std::vector<double> pe(m.moe().parameters().begin(), m.moe().parameters().end());
  const std::vector<double> x(xf.begin(), xf.end());
  const auto& off = m.mlp().layer_offsets();
  const double f = ref.objective(pm, off, pe, x, labels, T);
  EXPECT_NEAR(l.loss + l.aux, f, 1e-5 * std::max(1.0, f));
  EXPECT_NEAR(l.aux, ref.block.aux, 1e-6);
  // Finite differences must not move a routing decision or a ReLU across its kink.
  ASSERT_GT(ref.block.margin, 1e-4);
  ASSERT_GT(std::min(ref.kink, ref.block.kink), 1e-5);

  const double h = 1e-6;
  auto numeric = [&](std::vector<double>& v, std::size_t i) {
    const double saved = v[i];
    v[i] = saved + h;
    const double up = ref.objective(pm, off, pe, x, labels, T);
    v[i] = saved - h;
    const double down = ref.objective(pm, off, pe, x, labels, T);
    v[i] = saved;
    return (up - down) / (2 * h);
  };
  auto close = [](float analytic, double num, const char* what, std::size_t i) {
    EXPECT_NEAR(analytic, num, 2e-6 + 2e-4 * std::fabs(num)) << what << " " << i;
  };
  const auto gm = m.mlp().gradients();
  for (std::size_t i = 0; i < gm.size(); ++i) close(gm[i], numeric(pm, i), "mlp", i);
  const auto ge = m.moe().gradients();
  double router_norm = 0;
  for (std::size_t i = 0; i < ge.size(); ++i) {
    if (i < m.moe().parameter_offsets()[1]) router_norm += std::fabs(ge[i]);
    close(ge[i], numeric(pe, i), "moe", i);
  }
  EXPECT_GT(router_norm, 1e-4);
}

TEST(MoeMlpGradients, MatchFiniteDifferences) {
  check_model_gradients("k=1 drops", 1, 0.5, false);
  check_model_gradients("k=1 dropless", 1, 1.0, true);
  check_model_gradients("k=2 drops", 2, 0.5, false);
  check_model_gradients("k=2 dropless", 2, 1.0, true);
}

TrainConfig small_config() {
  TrainConfig c;
  c.spec = MlpSpec{{12, 16, 8, 4}};
  c.batch = 32;
  c.sgd.lr = 0.05f;
  c.seed = 4;
  c.threads = 2;
  return c;
}

MoeBlock small_block(std::size_t k = 1) {
  return MoeBlock{.after = 1, .hidden = 8, .experts = 4, .top_k = k};
}

TEST(MoeTrainer, LowersTheLossAndKeepsItsRoutingStatistics) {
  const Dataset d = nn_test::toy_dataset(512, 12, 4, 3);
  for (const std::size_t k : {1u, 2u}) {
    MoeTrainer t(small_config(), small_block(k), d);
    const EvalResult before = t.evaluate(d);
    EpochResult first, last;
    for (int e = 0; e < 4; ++e) (e == 0 ? first : last) = t.run_epoch();
    const EvalResult after = t.evaluate(d);
    EXPECT_LT(last.loss, first.loss) << "k=" << k;
    EXPECT_LT(after.loss, before.loss) << "k=" << k;
    EXPECT_GT(after.accuracy, 0.5) << "k=" << k;  // chance is 0.25
    const MoeEpochStats& s = t.epoch_stats();
    EXPECT_EQ(s.steps, 16u);
    EXPECT_GE(s.dropped_fraction, 0.0);
    EXPECT_LE(s.dropped_fraction, 1.0);
    EXPECT_GE(s.imbalance, 1.0);
    EXPECT_GT(s.aux_loss, 0.0);
    ASSERT_EQ(s.share.size(), 4u);
    EXPECT_NEAR(std::accumulate(s.share.begin(), s.share.end(), 0.0), 1.0, 1e-12);
    const auto m = t.epoch_metrics();
    EXPECT_EQ(m.at("moe_imbalance"), s.imbalance);
    EXPECT_EQ(m.at("moe_share_e3"), s.share[3]);
    EXPECT_EQ(t.state().moe, "4x8-top" + std::to_string(k) + "-cap1.25-after1-aux0.01");
  }
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> all_parameters(MoeTrainer& t) {
  std::vector<float> p(t.model().mlp().parameters().begin(), t.model().mlp().parameters().end());
  p.insert(p.end(), t.model().moe().parameters().begin(), t.model().moe().parameters().end());
  return p;
}

TEST(MoeTrainer, ResumedRunEndsOnTheUninterruptedRunsBits) {
  const Dataset d = nn_test::toy_dataset(320, 12, 4, 5);
  nn_test::ScratchDir dir;
  MoeTrainer straight(small_config(), small_block(2), d);
  for (int e = 0; e < 3; ++e) straight.run_epoch();
  MoeTrainer first(small_config(), small_block(2), d);
  for (int e = 0; e < 2; ++e) first.run_epoch();
  first.save(dir.path() / "two.ckpt");
  TrainConfig other = small_config();
  other.seed = 99;  // the checkpoint's seed wins
  MoeTrainer resumed(other, small_block(2), d);
  resumed.resume(dir.path() / "two.ckpt");
  EXPECT_EQ(resumed.state().epoch, 2u);
  EXPECT_EQ(resumed.state().seed, 4u);
  resumed.run_epoch();
  EXPECT_TRUE(same_bits(all_parameters(resumed), all_parameters(straight)));
  EXPECT_EQ(resumed.state().step, straight.state().step);
  straight.save(dir.path() / "a.ckpt");
  resumed.save(dir.path() / "b.ckpt");
  EXPECT_EQ(slurp(dir.path() / "a.ckpt"), slurp(dir.path() / "b.ckpt"));
}

TEST(MoeTrainer, DenseAndMoeCheckpointsAreRefusedForEachOther) {
  const Dataset d = nn_test::toy_dataset(64, 12, 4, 7);
  nn_test::ScratchDir dir;
  Trainer dense(small_config(), d);
  dense.save(dir.path() / "dense.ckpt");
  MoeTrainer moe(small_config(), small_block(1), d);
  moe.save(dir.path() / "moe.ckpt");
  auto refused = [](auto&& resume, const std::string& want) {
    try {
      resume();
      ADD_FAILURE() << "accepted; wanted a refusal naming '" << want << "'";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused([&] { moe.resume(dir.path() / "dense.ckpt"); }, "checkpoint is of a dense model");
  refused([&] { dense.resume(dir.path() / "moe.ckpt"); },
          "mixture-of-experts block (moe=4x8-top1-cap1.25-after1-aux0.01); the model is dense");
  MoeTrainer top2(small_config(), small_block(2), d);
  refused([&] { top2.resume(dir.path() / "moe.ckpt"); }, "the model's moe=4x8-top2");
  EXPECT_EQ(moe.state().epoch, 0u);  // a refusal changes nothing
  moe.resume(dir.path() / "moe.ckpt");
}

TEST(MoeBlock, RefusesBlocksThatDoNotFit) {
  const MlpSpec spec{{12, 16, 8, 4}};
  auto bad = [&](MoeBlock b, const char* want) {
    try {
      (void)b.layer_spec(spec);
      ADD_FAILURE() << "accepted; wanted '" << want << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  bad({.after = 0, .experts = 4}, "hidden layers 1 to 2");
  bad({.after = 3, .experts = 4}, "hidden layers 1 to 2");
  bad({.after = 1, .experts = 1}, "need at least 2");
  bad({.after = 1, .experts = 4, .top_k = 3}, "top_k");
  MoeBlock zero{.after = 2, .experts = 4};
  zero.capacity_factor = 0;
  bad(zero, "capacity");
  const MoeBlock ok{.after = 2, .experts = 3};
  EXPECT_EQ(ok.layer_spec(spec).width, 8u);
  EXPECT_EQ(ok.layer_spec(spec).hidden, 8u);
  MoeBlock dropless{.after = 1, .hidden = 5, .experts = 2, .top_k = 2, .dropless = true};
  EXPECT_EQ(dropless.describe(spec), "2x5-top2-dropless-after1-aux0.01");
  TrainConfig half = small_config();
  half.precision = Precision::bf16;
  const Dataset d = nn_test::toy_dataset(64, 12, 4, 7);
  EXPECT_THROW({ MoeTrainer t(half, small_block(), d); }, std::invalid_argument);
}

}  // namespace
}  // namespace concurdl::nn
