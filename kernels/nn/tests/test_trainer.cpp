// The trainer: it learns (Fashion-MNIST subset, skipped when the data set is not installed);
// the same seed and thread count give the same bits, another seed other bits; a run resumed
// from a checkpoint at an epoch boundary ends bit-identical to the uninterrupted run; the
// epoch permutation is a permutation drawn from (seed, epoch) alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/data/idx.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/random.hpp"
#include "concurdl/nn/trainer.hpp"
#include "test_util.hpp"

namespace concurdl::nn {
namespace {

using nn_test::kSanitized;
using nn_test::same_bits;

class ThreadsGuard {
 public:
  ThreadsGuard() : saved_(kernels::compute_threads()) {}
  ~ThreadsGuard() { kernels::set_compute_threads(saved_); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;

 private:
  int saved_;
};

TrainConfig toy_config(int threads, std::uint64_t seed = 1) {
  TrainConfig c;
  c.spec = MlpSpec::parse("20-16-8-4");
  c.batch = 32;  // 300 samples: 9 full batches and one of 12
  c.seed = seed;
  c.threads = threads;
  c.lr_decay = 0.7f;  // a schedule, so resuming must also restore where it was
  return c;
}

TEST(Permutation, IsAPermutationDrawnFromSeedAndEpoch) {
  std::vector<std::uint32_t> a, b, c, d;
  epoch_permutation(1000, 1, 0, a);
  epoch_permutation(1000, 1, 0, b);
  epoch_permutation(1000, 1, 1, c);
  epoch_permutation(1000, 2, 0, d);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  std::vector<std::uint32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint32_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0u);
  EXPECT_EQ(sorted, iota);
  std::vector<std::uint32_t> none;
  epoch_permutation(0, 1, 0, none);
  EXPECT_TRUE(none.empty());
}

TEST(Trainer, SameSeedAndThreadsGiveTheSameBitsAnotherSeedOtherBits) {
  ThreadsGuard guard;
  const Dataset train = nn_test::toy_dataset(300, 20, 4, 1);
  for (const int threads : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    Trainer a(toy_config(threads), train), b(toy_config(threads), train),
        c(toy_config(threads, 2), train);
    for (int e = 0; e < 2; ++e) {
      a.run_epoch();
      b.run_epoch();
      c.run_epoch();
    }
    EXPECT_TRUE(same_bits(a.model().parameters(), b.model().parameters()));
    EXPECT_TRUE(same_bits(a.optimizer().velocity(), b.optimizer().velocity()));
    EXPECT_FALSE(same_bits(a.model().parameters(), c.model().parameters()));
  }
}

// A data set that keeps its bytes is gathered from them, normalised on the way: the trained
// model must have the bits of the same data set gathered as floats, in every precision, at 1, 2
// and 4 threads (the gather itself split over the team: the Gather test below); and the bytes
// must be the same images as the floats.
TEST(Trainer, GatheringBytesGivesTheBitsOfGatheringFloats) {
  ThreadsGuard guard;
  Dataset bytes = nn_test::toy_dataset(300, 20, 4, 1);
  std::mt19937 rng(3);
  bytes.pixels.resize(bytes.n * bytes.dim);
  for (std::uint8_t& p : bytes.pixels) p = static_cast<std::uint8_t>(rng() & 0xff);
  bytes.pixel_scale = 1.0f / (255.0f * 0.3530f);
  bytes.pixel_shift = -0.2860f / 0.3530f;
  for (std::size_t i = 0; i < bytes.x.size(); ++i)
    bytes.x[i] = normalise_pixel(bytes.pixels[i], bytes.pixel_scale, bytes.pixel_shift);
  Dataset floats = bytes;
  floats.pixels.clear();
  for (const Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    for (const int threads : {1, 2, 4}) {
      SCOPED_TRACE(std::string(describe(p)) + ", " + std::to_string(threads) + " threads");
      TrainConfig c = toy_config(threads);
      c.batch = 64;
      c.spec = MlpSpec::parse("20-300-4");
      c.precision = p;  // 16-bit: the rows rounded as they are gathered
      Trainer a(c, bytes), b(c, floats);
      for (int e = 0; e < 2; ++e) {
        a.run_epoch();
        b.run_epoch();
      }
      EXPECT_TRUE(same_bits(a.model().parameters(), b.model().parameters()));
    }
  }
  // Bytes that are not the floats' images: another model (the bytes are what was read).
  Dataset other = bytes;
  std::reverse(other.pixels.begin(), other.pixels.end());
  Trainer a(toy_config(1), other), b(toy_config(1), floats);
  a.run_epoch();
  b.run_epoch();
  EXPECT_FALSE(same_bits(a.model().parameters(), b.model().parameters()));
  other.pixels.pop_back();
  EXPECT_THROW(Trainer(toy_config(1), other), std::invalid_argument);
}

// gather_batch: row order[i] of the data set in row i, whether read from its bytes or its floats,
// on the calling thread or split over 1, 2 and 4 threads; gather_batch_16bit: those rows rounded
// (to_16bit's bits), with the same labels; a different order gives other rows; fp32 is refused.
TEST(Gather, TheBatchIsTheRowsInOrderAndItsSixteenBitsTheirRounding) {
  ThreadsGuard guard;
  Dataset bytes = nn_test::toy_dataset(500, 300, 4, 2);  // 64 x 300 values: split from 16K
  std::mt19937 rng(5);
  bytes.pixels.resize(bytes.n * bytes.dim);
  for (std::uint8_t& p : bytes.pixels) p = static_cast<std::uint8_t>(rng() & 0xff);
  bytes.pixel_scale = 1.0f / (255.0f * 0.3530f);
  bytes.pixel_shift = -0.2860f / 0.3530f;
  for (std::size_t i = 0; i < bytes.x.size(); ++i)
    bytes.x[i] = normalise_pixel(bytes.pixels[i], bytes.pixel_scale, bytes.pixel_shift);
  Dataset floats = bytes;
  floats.pixels.clear();
  std::vector<std::uint32_t> order(bytes.n);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  const std::size_t rows = 64, dim = bytes.dim, at = 100;
  std::vector<float> want(rows * dim);
  std::vector<std::uint8_t> want_y(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    std::copy_n(bytes.row(order[at + i]), dim, want.begin() + static_cast<std::ptrdiff_t>(i * dim));
    want_y[i] = bytes.y[order[at + i]];
  }
  for (const Dataset* d : {&bytes, &floats}) {
    for (const int threads : {1, 2, 4}) {
      for (const bool parallel : {false, true}) {
        SCOPED_TRACE(std::string(d == &bytes ? "bytes, " : "floats, ") + std::to_string(threads) +
                     " threads" + (parallel ? ", parallel" : ""));
        kernels::set_compute_threads(threads);
        std::vector<float> x(rows * dim, -1.0f);
        std::vector<std::uint8_t> y(rows, 99);
        gather_batch(*d, order.data() + at, rows, x.data(), y.data(), parallel);
        EXPECT_TRUE(same_bits(x, want));
        EXPECT_EQ(y, want_y);
        for (const Precision p : {Precision::bf16, Precision::fp16}) {
          std::vector<std::uint16_t> x16(rows * dim, 0xffff), want16(rows * dim);
          to_16bit(p, want, want16);
          std::vector<std::uint8_t> y16(rows, 99);
          gather_batch_16bit(p, *d, order.data() + at, rows, x16.data(), y16.data(), parallel);
          EXPECT_EQ(x16, want16) << describe(p);
          EXPECT_EQ(y16, want_y);
        }
      }
    }
  }
  std::vector<float> x(rows * dim);
  std::vector<std::uint8_t> y(rows);
  gather_batch(bytes, order.data() + at + 1, rows, x.data(), y.data());
  EXPECT_FALSE(same_bits(x, want));
  // Bytes that are not the floats' images: what was read is the bytes, in both formats.
  Dataset liar = bytes;
  std::reverse(liar.pixels.begin(), liar.pixels.end());
  gather_batch(liar, order.data() + at, rows, x.data(), y.data());
  EXPECT_FALSE(same_bits(x, want));
  std::vector<std::uint16_t> x16(rows * dim), want16(rows * dim);
  to_16bit(Precision::fp16, want, want16);
  gather_batch_16bit(Precision::fp16, liar, order.data() + at, rows, x16.data(), y.data());
  EXPECT_NE(x16, want16);
  liar.pixels.pop_back();
  EXPECT_THROW(gather_batch(liar, order.data(), rows, x.data(), y.data()), std::invalid_argument);
  EXPECT_THROW(gather_batch_16bit(Precision::fp32, bytes, order.data(), rows, x16.data(), y.data()),
               std::invalid_argument);
}

// The update fused into the weight-gradient GEMMs (Mlp::train_step) trains the bits of
// forward_backward followed by Sgd::step, with either GEMM, at 1, 2 and 4 threads: widths that
// give v4 whole tiles, half-width and scratch edge tiles and short row panels (200-300-48-10;
// the first layer's weight gradient large enough for a team at batch 64), and a batch longer
// than one of v4's K blocks (600). The optimiser's velocities too.
TEST(Trainer, TheFusedUpdateTrainsTheBitsOfTheSeparateOne) {
  ThreadsGuard guard;
  const Dataset train = nn_test::toy_dataset(1300, 200, 10, 2);
  for (const kernels::GemmVersion gemm :
       {kernels::GemmVersion::v4_register, kernels::GemmVersion::openblas})
    for (const std::size_t batch : {std::size_t{64}, std::size_t{600}})
      for (const int threads : {1, 2, 4}) {
        SCOPED_TRACE(std::string(kernels::gemm_version_name(gemm)) + ", batch " +
                     std::to_string(batch) + ", " + std::to_string(threads) + " threads");
        TrainConfig c = toy_config(threads);
        c.spec = MlpSpec::parse("200-300-48-10");
        c.batch = batch;
        c.gemm = gemm;
        TrainConfig separate = c;
        separate.fuse_update = false;
        Trainer a(c, train), b(separate, train);
        for (int e = 0; e < 2; ++e) {
          a.run_epoch();
          b.run_epoch();
        }
        EXPECT_TRUE(same_bits(a.model().parameters(), b.model().parameters()));
        EXPECT_TRUE(same_bits(a.optimizer().velocity(), b.optimizer().velocity()));
      }
  Mlp model(MlpSpec::parse("4-3-2"), 1);
  Sgd wrong(model.parameters().size() + 1, SgdOptions{});
  const std::vector<float> x(4, 0.5f);
  const std::vector<std::uint8_t> y(1, 1);
  EXPECT_THROW(model.train_step(x.data(), y.data(), 1, wrong), std::invalid_argument);
}

TEST(Trainer, ResumedRunIsBitIdenticalToTheUninterruptedOne) {
  ThreadsGuard guard;
  nn_test::ScratchDir dir;
  const Dataset train = nn_test::toy_dataset(300, 20, 4, 1);
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    Trainer whole(toy_config(threads), train);
    whole.run_epoch();
    whole.run_epoch();

    const auto ckpt = dir.path() / "epoch1.ckpt";
    {
      Trainer first(toy_config(threads), train);
      first.run_epoch();
      first.save(ckpt);
    }
    // A fresh trainer: its own initial weights are overwritten by the checkpoint.
    TrainConfig other = toy_config(threads);
    Trainer resumed(other, train);
    resumed.resume(ckpt);
    EXPECT_EQ(resumed.state().epoch, 1u);
    EXPECT_EQ(resumed.state().step, 10u);
    resumed.run_epoch();

    EXPECT_TRUE(same_bits(whole.model().parameters(), resumed.model().parameters()));
    EXPECT_TRUE(same_bits(whole.optimizer().velocity(), resumed.optimizer().velocity()));
    EXPECT_EQ(whole.state().epoch, resumed.state().epoch);
    EXPECT_EQ(whole.state().step, resumed.state().step);
  }
}

TEST(Trainer, CountsStepsAndReportsProgress) {
  ThreadsGuard guard;
  const Dataset train = nn_test::toy_dataset(300, 20, 4, 1);
  Trainer t(toy_config(3), train);
  EXPECT_EQ(kernels::compute_threads(), 3) << "config.threads sets the kernels' thread count";
  std::vector<StepProgress> reports;
  const EpochResult r = t.run_epoch([&](const StepProgress& p) { reports.push_back(p); }, 4);
  ASSERT_EQ(reports.size(), 3u);  // after steps 4 and 8, and at the end (10)
  EXPECT_EQ(reports[0].step_in_epoch, 4u);
  EXPECT_EQ(reports[0].samples, 128u);
  EXPECT_EQ(reports[2].step_in_epoch, 10u);
  EXPECT_EQ(reports[2].steps_per_epoch, 10u);
  EXPECT_EQ(reports[2].samples, 300u);
  EXPECT_EQ(reports[2].step, 10u);
  for (const auto& p : reports) {
    EXPECT_EQ(p.epoch, 0u);
    EXPECT_GT(p.loss, 0.0);
    EXPECT_GE(p.accuracy, 0.0);
    EXPECT_LE(p.accuracy, 1.0);
  }
  EXPECT_EQ(r.samples, 300u);
  EXPECT_EQ(t.state().epoch, 1u);
  EXPECT_EQ(t.state().step, 10u);
  t.run_epoch();
  EXPECT_EQ(t.state().step, 20u);
  EXPECT_EQ(t.state().epoch, 2u);
}

TEST(Trainer, LearningRateDecaysPerEpoch) {
  TrainConfig c = toy_config(0);
  c.sgd.lr = 0.1f;
  c.lr_decay = 0.5f;
  EXPECT_EQ(epoch_lr(c, 0), 0.1f);
  EXPECT_EQ(epoch_lr(c, 1), 0.05f);
  EXPECT_EQ(epoch_lr(c, 3), 0.1f * 0.5f * 0.5f * 0.5f);
  const Dataset train = nn_test::toy_dataset(40, 20, 4, 1);
  Trainer t(c, train);
  t.run_epoch();
  EXPECT_EQ(t.optimizer().options().lr, 0.1f);
  t.run_epoch();
  EXPECT_EQ(t.optimizer().options().lr, 0.05f);
  c.lr_decay = 1.0f;  // constant: the trainer leaves the optimiser's rate to the caller
  Trainer u(c, train);
  u.optimizer().set_lr(0.02f);
  u.run_epoch();
  EXPECT_EQ(u.optimizer().options().lr, 0.02f);
}

TEST(Trainer, RejectsMismatchedData) {
  const Dataset train = nn_test::toy_dataset(50, 20, 4, 1);
  TrainConfig c = toy_config(0);
  c.spec = MlpSpec::parse("21-4");
  EXPECT_THROW(Trainer(c, train), std::invalid_argument);
  c = toy_config(0);
  c.batch = 0;
  EXPECT_THROW(Trainer(c, train), std::invalid_argument);
  Trainer t(toy_config(0), train);
  EXPECT_THROW(t.evaluate(nn_test::toy_dataset(10, 19, 4, 2)), std::invalid_argument);
}

// A short run on real data: the loss falls and the accuracy beats chance (0.1) by far.
TEST(Trainer, LearnsAFashionMnistSubset) {
  ThreadsGuard guard;
  std::string why;
  if (!data::fashion_mnist_present(data::fashion_mnist_dir(), &why)) GTEST_SKIP() << why;
  const auto fm = data::load_fashion_mnist();
  const Dataset train = to_dataset(fm.train, kSanitized ? 600 : 2000);
  const Dataset test = to_dataset(fm.test, kSanitized ? 300 : 1000);
  ASSERT_EQ(train.dim, 784u);
  ASSERT_EQ(train.n, kSanitized ? 600u : 2000u);
  // The bytes kept are the images', and each float is (p / 255 - mean) / std to within an ulp.
  ASSERT_EQ(train.pixels.size(), train.x.size());
  EXPECT_TRUE(std::equal(train.pixels.begin(), train.pixels.end(), fm.train.images.pixels.begin()));
  for (std::size_t i = 0; i < train.x.size(); ++i) {
    const double want =
        (train.pixels[i] / 255.0 - data::kFashionMnistMean) / data::kFashionMnistStd;
    ASSERT_NEAR(train.x[i], want, 2e-7 * std::max(1.0, std::abs(want))) << i;
  }
  // Normalised with the training statistics: roughly zero mean, unit spread.
  double mean = 0;
  for (const float v : train.x) mean += v;
  EXPECT_NEAR(mean / static_cast<double>(train.x.size()), 0.0, 0.1);

  TrainConfig c;
  c.threads = 2;
  if (kSanitized) c.spec = MlpSpec::parse("784-64-10");
  Trainer t(c, train);
  const EvalResult before = t.evaluate(test);
  EXPECT_NEAR(before.accuracy, 0.1, 0.1);
  double first_loss = 0, last_loss = 0;
  const int epochs = 3;
  for (int e = 0; e < epochs; ++e) {
    const EpochResult r = t.run_epoch();
    (e == 0 ? first_loss : last_loss) = r.loss;
  }
  const EvalResult after = t.evaluate(test);
  EXPECT_LT(last_loss, first_loss);
  EXPECT_LT(after.loss, before.loss);
  EXPECT_GT(after.accuracy, 0.6) << "loss " << after.loss;
}

}  // namespace
}  // namespace concurdl::nn
