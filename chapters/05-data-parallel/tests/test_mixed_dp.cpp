// Mixed-precision data parallelism on the threads backend: the 16-bit ring all-reduce
// (allreduce16.hpp) leaves the same bits on every rank, within its n - 1 roundings of the exact
// sum, at 1, 2, 3, 4 and 8 ranks and sizes that do not divide by them; it sends half the bytes of
// the float32 ring, counted; an infinity on one rank reaches all. DataParallelTrainer in bf16 and
// fp16 keeps its replicas identical, learns as one 16-bit trainer does, and under a forced
// overflow every rank skips the same steps and backs off the same scale, with the ring after
// backward or overlapped with it bucket by bucket; one rank with its update fused takes
// nn::Trainer's steps bit for bit. Exercise 5.4 (the
// student's dynamic loss scale, exercises/student_loss_scale.hpp) runs through the scaler's
// rules and a trainer forced to overflow.
//   ch05_tests --gtest_filter='Mixed*:LossScale*'   ch05_tests --gtest_filter='LossScaleEx5_4*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../exercises/student_loss_scale.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/allreduce16.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/trainer.hpp"

namespace {

using namespace concurdl::dp;
using concurdl::testing::within_seconds;
namespace nn = concurdl::nn;

constexpr int kDeadline = 60;

// Rank r's value i: a float in (-1, 1) of the rank and the index, rounded to the format.
float value(int r, std::size_t i) {
  std::uint32_t s =
      static_cast<std::uint32_t>(i) * 2654435761u + static_cast<std::uint32_t>(r) * 40503u + 1u;
  s ^= s >> 13;
  s *= 0x5bd1e995u;
  s ^= s >> 15;
  return static_cast<float>(s % 20001u) / 10000.0f - 1.0f;
}

struct RingCase {
  int ranks;
  std::size_t count;
};

class MixedRingRanks : public ::testing::TestWithParam<RingCase> {};

TEST_P(MixedRingRanks, SameBitsEverywhereWithinTheRoundingsAndHalfTheBytes) {
  const int ranks = GetParam().ranks;
  const std::size_t count = GetParam().count;
  for (const nn::Precision p : {nn::Precision::bf16, nn::Precision::fp16}) {
    SCOPED_TRACE(std::string(nn::describe(p)) + " at " + std::to_string(ranks) + " ranks, " +
                 std::to_string(count) + " values");
    std::vector<std::vector<std::uint16_t>> got(static_cast<std::size_t>(ranks));
    std::vector<std::uint64_t> sent16(static_cast<std::size_t>(ranks)),
        sent32(static_cast<std::size_t>(ranks));
    within_seconds(kDeadline, [&] {
      run_threads(ranks, [&](Communicator& comm) {
        const int r = comm.rank();
        std::vector<float> f(count);
        for (std::size_t i = 0; i < count; ++i) f[i] = value(r, i);
        std::vector<std::uint16_t> h(count);
        nn::to_16bit(p, f, h);
        const std::uint64_t before = comm.bytes_sent();
        allreduce_ring_16bit(comm, p, h);
        sent16[static_cast<std::size_t>(r)] = comm.bytes_sent() - before;
        std::vector<float> out(count);
        allreduce_ring(comm, f, out);
        sent32[static_cast<std::size_t>(r)] =
            comm.bytes_sent() - before - sent16[static_cast<std::size_t>(r)];
        got[static_cast<std::size_t>(r)] = h;
      });
    });
    for (int r = 1; r < ranks; ++r)
      ASSERT_EQ(got[static_cast<std::size_t>(r)], got[0]) << "rank " << r << " differs from rank 0";
    // Each hop adds in float32 and rounds once: n - 1 roundings of partial sums no larger than
    // the sum of magnitudes, half an ulp (2^-8 bfloat16, 2^-11 binary16) each, plus the inputs'.
    const double u = p == nn::Precision::bf16 ? 0x1p-8 : 0x1p-11;
    std::vector<float> sum(count);
    nn::from_16bit(p, got[0], sum);
    for (std::size_t i = 0; i < count; ++i) {
      double exact = 0, mag = 0;
      for (int r = 0; r < ranks; ++r) {
        exact += value(r, i);
        mag += std::fabs(value(r, i));
      }
      ASSERT_LE(std::fabs(sum[i] - exact), (ranks + 1) * u * mag + 1e-30) << "value " << i;
    }
    // Bytes: 2 (n - 1) blocks of 2 bytes a value, against 4. The ring splits the values into
    // blocks of whole pairs (the pairs split as evenly as they go), so only a last block of odd
    // size pads one value.
    const std::size_t pairs = (count + 1) / 2;
    const auto values_in = [&](int b) {
      const Block w = block_of(pairs, ranks, b);
      return std::min(count, 2 * (w.offset + w.count)) - std::min(count, 2 * w.offset);
    };
    for (int r = 0; r < ranks; ++r) {
      const std::uint64_t s16 = sent16[static_cast<std::size_t>(r)],
                          s32 = sent32[static_cast<std::size_t>(r)];
      if (ranks == 1) {
        EXPECT_EQ(s16, 0u);
        continue;
      }
      std::uint64_t want = 0;
      for (int s = 0; s < ranks - 1; ++s)
        for (const int b :
             {((r - s) % ranks + ranks) % ranks, ((r + 1 - s) % ranks + ranks) % ranks})
          want += 4 * ((values_in(b) + 1) / 2);
      EXPECT_EQ(s16, want) << "rank " << r;
      EXPECT_LE(static_cast<double>(s16), 0.5 * static_cast<double>(s32) + 4.0 * 2 * ranks)
          << "rank " << r << ": " << s16 << " bytes against the float32 ring's " << s32;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MixedRing, MixedRingRanks,
                         ::testing::Values(RingCase{1, 10}, RingCase{2, 1}, RingCase{2, 1001},
                                           RingCase{3, 7}, RingCase{3, 1000}, RingCase{4, 4096},
                                           RingCase{8, 1001}, RingCase{8, 5}),
                         [](const auto& info) {
                           return std::to_string(info.param.ranks) + "ranks_" +
                                  std::to_string(info.param.count);
                         });

// The ring's per-hop sum in one pass: the same bits as widening both operands, adding in float32
// and rounding, at sizes around its chunk of 512, with infinities, NaNs and values that overflow
// on addition among them.
TEST(Add16bit, TheSameBitsAsWideningAddingAndRounding) {
  for (const nn::Precision p : {nn::Precision::bf16, nn::Precision::fp16}) {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{511}, std::size_t{512},
                                std::size_t{513}, std::size_t{2000}}) {
      std::vector<float> a(n), b(n);
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = 1000.0f * value(0, i);
        b[i] = 1000.0f * value(1, i);
      }
      if (n > 3) {
        a[1] = std::numeric_limits<float>::infinity();
        b[2] = std::numeric_limits<float>::quiet_NaN();
        a[3] = b[3] = p == nn::Precision::fp16 ? 60000.0f : 3e38f;  // the sum overflows
      }
      std::vector<std::uint16_t> acc(n), in(n), want(n);
      nn::to_16bit(p, a, acc);
      nn::to_16bit(p, b, in);
      std::vector<float> wa(n), wb(n);
      nn::from_16bit(p, acc, wa);
      nn::from_16bit(p, in, wb);
      for (std::size_t i = 0; i < n; ++i) wa[i] += wb[i];
      nn::to_16bit(p, wa, want);
      nn::add_16bit(p, acc, in);
      EXPECT_EQ(acc, want) << nn::describe(p) << ", " << n << " values";
    }
  }
  std::vector<std::uint16_t> two(2), three(3);
  EXPECT_THROW(nn::add_16bit(nn::Precision::bf16, two, three), std::invalid_argument);
  EXPECT_THROW(nn::add_16bit(nn::Precision::fp32, two, two), std::invalid_argument);
}

TEST(MixedRingArgs, AnInfinityOnOneRankReachesEveryRankAndFp32IsRefused) {
  within_seconds(kDeadline, [&] {
    run_threads(4, [&](Communicator& comm) {
      std::vector<std::uint16_t> h(100, 0x3c00);  // binary16 1.0
      if (comm.rank() == 2) h[57] = 0x7c00;       // +inf
      allreduce_ring_16bit(comm, nn::Precision::fp16, h);
      EXPECT_EQ(h[57], 0x7c00) << "rank " << comm.rank();
      EXPECT_EQ(h[56], 0x4400) << "rank " << comm.rank();  // 4.0
      EXPECT_THROW(allreduce_ring_16bit(comm, nn::Precision::fp32, h), std::invalid_argument);
    });
  });
}

const nn::Dataset& data() {
  static const nn::Dataset d = nn::linear_problem(98, 32, 10, 4711);
  return d;
}

nn::TrainConfig config(nn::Precision p, std::size_t batch) {
  nn::TrainConfig c;
  c.spec.widths = {32, 24, 16, 10};
  c.batch = batch;
  c.seed = 11;
  c.threads = 1;
  c.sgd.lr = 0.05f;
  c.precision = p;
  return c;
}

struct Outcome {
  std::vector<float> params;
  double loss = 0, divergence = -1;
  std::size_t skipped = 0;
  float scale = 0;
};

Outcome train(int ranks, nn::TrainConfig c, int epochs, DataParallelOptions options = {},
              const nn::Dataset& d = data()) {
  concurdl::kernels::set_compute_threads(1);
  Outcome o;
  within_seconds(kDeadline, [&] {
    run_threads(ranks, [&](Communicator& comm) {
      DataParallelTrainer t(comm, c, d, options);
      double loss = 0;
      std::size_t skipped = 0;
      for (int e = 0; e < epochs; ++e) {
        const nn::EpochResult r = t.run_epoch();
        loss = r.loss;
        skipped += r.skipped_steps;
      }
      const double div = replica_divergence(comm, t.model().parameters());
      if (comm.rank() == 0) {
        o.params.assign(t.model().parameters().begin(), t.model().parameters().end());
        o.loss = loss;
        o.divergence = div;
        o.skipped = skipped;
        o.scale = t.loss_scaler().scale();
      }
    });
  });
  return o;
}

TEST(MixedDataParallel, ReplicasStayIdenticalAndLearnAsOneTrainerDoes) {
  for (const nn::Precision p : {nn::Precision::bf16, nn::Precision::fp16}) {
    SCOPED_TRACE(std::string(nn::describe(p)));
    const Outcome one = train(1, config(p, 20), 4);
    const Outcome fp32 = train(1, config(nn::Precision::fp32, 20), 4);
    EXPECT_NEAR(one.loss, fp32.loss, 0.05 * fp32.loss);
    for (const int ranks : {2, 4}) {
      // The same global batch of 20 rows, split over the ranks.
      const Outcome dp = train(ranks, config(p, 20 / static_cast<std::size_t>(ranks)), 4);
      EXPECT_EQ(dp.divergence, 0.0) << ranks << " ranks";
      EXPECT_EQ(dp.skipped, 0u);
      EXPECT_NEAR(dp.loss, one.loss, 0.05 * one.loss) << ranks << " ranks";
    }
  }
}

TEST(MixedDataParallel, AForcedOverflowSkipsTheSameStepsOnEveryRank) {
  nn::TrainConfig c = config(nn::Precision::fp16, 5);
  c.loss_scaler.initial = 0x1p60f;  // 4 ranks x 5 rows = 20 a step, 98 rows: 5 steps an epoch
  const Outcome o = train(4, c, 1);
  EXPECT_EQ(o.skipped, 5u);
  EXPECT_EQ(o.scale, 0x1p55f);
  EXPECT_EQ(o.divergence, 0.0);
  const nn::Mlp fresh(c.spec, c.seed, c.gemm);
  EXPECT_EQ(std::memcmp(o.params.data(), fresh.parameters().data(), o.params.size() * 4), 0)
      << "a skipped step changed the weights";
}

// With overlap, each layer's 16-bit gradients are summed on the communication thread while
// backward computes the layers below, bucket by bucket (one a layer, and the default plan): at
// 2, 3, 4 and 8 ranks the replicas stay identical and learn as the blocking ring's do (the
// buckets' rings round at other places than the whole buffer's, so not to its bits); a forced
// overflow skips the same steps everywhere.
// One rank with nothing to sum may fuse the update into the weight-gradient GEMMs: then it takes
// nn::Trainer's fused steps bit for bit, in every precision. The control: unfused, a 16-bit step
// rounds its weight gradients to 16 bits and lands elsewhere, so the comparison can fail. At two
// ranks the option changes nothing.
TEST(MixedDataParallel, OneRankFusedTakesTheTrainersStepsBitForBit) {
  concurdl::kernels::set_compute_threads(1);
  for (const nn::Precision p : {nn::Precision::fp32, nn::Precision::bf16, nn::Precision::fp16}) {
    SCOPED_TRACE(std::string(nn::describe(p)));
    nn::Trainer want(config(p, 20), data());
    double want_loss = 0;
    for (int e = 0; e < 2; ++e) want_loss = want.run_epoch().loss;
    const std::span<const float> wp = std::as_const(want).model().parameters();
    DataParallelOptions fused;
    fused.fuse_update_alone = true;
    const Outcome got = train(1, config(p, 20), 2, fused);
    ASSERT_EQ(got.params.size(), wp.size());
    EXPECT_EQ(std::memcmp(got.params.data(), wp.data(), wp.size() * sizeof(float)), 0);
    EXPECT_NEAR(got.loss, want_loss, 1e-6 * want_loss);  // summed in another order
    const Outcome unfused = train(1, config(p, 20), 2);
    const bool same = std::memcmp(unfused.params.data(), wp.data(), wp.size() * sizeof(float)) == 0;
    EXPECT_EQ(same, p == nn::Precision::fp32) << "unfused 16-bit steps round the weight gradients";
    const Outcome two = train(2, config(p, 10), 1), two_fused = train(2, config(p, 10), 1, fused);
    EXPECT_EQ(two.params, two_fused.params);
    EXPECT_EQ(two_fused.divergence, 0.0);
  }
}

// A data set that keeps its bytes is gathered from them (nn::gather_batch, a 16-bit batch
// rounded as it is gathered): at 1 and 2 ranks, in every precision, the bits of the same images
// gathered as floats. The control: bytes that are not those images give other parameters, and
// bytes that are not one a feature are refused.
TEST(MixedDataParallel, GatheringBytesGivesTheBitsOfGatheringFloats) {
  nn::Dataset bytes = data();
  bytes.pixels.resize(bytes.x.size());
  for (std::size_t i = 0; i < bytes.pixels.size(); ++i)
    bytes.pixels[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 24);
  bytes.pixel_scale = 1.0f / 255.0f;
  bytes.pixel_shift = -0.5f;
  for (std::size_t i = 0; i < bytes.x.size(); ++i)
    bytes.x[i] = nn::normalise_pixel(bytes.pixels[i], bytes.pixel_scale, bytes.pixel_shift);
  nn::Dataset floats = bytes;
  floats.pixels.clear();
  for (const nn::Precision p : {nn::Precision::fp32, nn::Precision::bf16, nn::Precision::fp16}) {
    for (const int ranks : {1, 2}) {
      SCOPED_TRACE(std::string(nn::describe(p)) + ", " + std::to_string(ranks) + " ranks");
      const Outcome a = train(ranks, config(p, 10), 1, {}, bytes);
      const Outcome b = train(ranks, config(p, 10), 1, {}, floats);
      EXPECT_EQ(a.params, b.params);
    }
  }
  nn::Dataset other = bytes;
  std::reverse(other.pixels.begin(), other.pixels.end());
  EXPECT_NE(train(2, config(nn::Precision::fp16, 10), 1, {}, other).params,
            train(2, config(nn::Precision::fp16, 10), 1, {}, floats).params);
  other.pixels.pop_back();
  EXPECT_THROW(train(1, config(nn::Precision::fp32, 10), 1, {}, other), std::invalid_argument);
}

TEST(MixedDataParallel, OverlappedBucketsKeepTheReplicasIdentical) {
  for (const nn::Precision p : {nn::Precision::bf16, nn::Precision::fp16}) {
    SCOPED_TRACE(std::string(nn::describe(p)));
    for (const int ranks : {2, 3, 4, 8}) {
      const std::size_t rows = 24 / static_cast<std::size_t>(ranks);
      const Outcome blocking = train(ranks, config(p, rows), 3);
      for (const std::size_t bucket_bytes : {std::size_t{0}, kDefaultBucketBytes}) {
        DataParallelOptions o;
        o.overlap = true;
        o.bucket_bytes = bucket_bytes;
        const Outcome dp = train(ranks, config(p, rows), 3, o);
        EXPECT_EQ(dp.divergence, 0.0) << ranks << " ranks, buckets of " << bucket_bytes;
        EXPECT_EQ(dp.skipped, blocking.skipped) << ranks << " ranks (the first step's scale)";
        EXPECT_NEAR(dp.loss, blocking.loss, 0.02 * blocking.loss) << ranks << " ranks";
      }
    }
  }
  nn::TrainConfig c = config(nn::Precision::fp16, 5);
  c.loss_scaler.initial = 0x1p60f;
  DataParallelOptions o;
  o.overlap = true;
  o.bucket_bytes = 0;
  const Outcome forced = train(4, c, 1, o);
  EXPECT_EQ(forced.skipped, 5u);
  EXPECT_EQ(forced.scale, 0x1p55f);
  EXPECT_EQ(forced.divergence, 0.0);
}

// Buckets of 16-bit values, 2 bytes each: on 32-24-16-10 (layers of 792, 400 and 170 values)
// buckets of 1200 bytes close only at the first layer (1140 bytes for the last two), where 4 bytes
// a value would close one after layer 1 (2280).
TEST(MixedDataParallel, BucketsCountTheirSixteenBitBytes) {
  within_seconds(kDeadline, [&] {
    run_threads(2, [&](Communicator& comm) {
      DataParallelOptions o;
      o.overlap = true;
      o.bucket_bytes = 1200;
      DataParallelTrainer t(comm, config(nn::Precision::bf16, 5), data(), o);
      EXPECT_NE(t.describe().find("in 1 bucket of"), std::string::npos) << t.describe();
      o.bucket_bytes = 1000;  // closes after layer 1 (1140 >= 1000)
      DataParallelTrainer two(comm, config(nn::Precision::bf16, 5), data(), o);
      EXPECT_NE(two.describe().find("in 2 buckets of"), std::string::npos) << two.describe();
    });
  });
}

TEST(MixedDataParallel, OtherAllReducesAndSynchronisersAreRefused) {
  within_seconds(kDeadline, [&] {
    run_threads(2, [&](Communicator& comm) {
      DataParallelOptions buckets_alone;  // buckets only with overlap
      buckets_alone.bucket_bytes = 1000;
      EXPECT_THROW(DataParallelTrainer(comm, config(nn::Precision::bf16, 5), data(), buckets_alone),
                   std::invalid_argument);
      DataParallelOptions other;
      other.algorithm = "v4_ring";
      EXPECT_THROW(DataParallelTrainer(comm, config(nn::Precision::bf16, 5), data(), other),
                   std::invalid_argument);
      DataParallelOptions own;
      own.make_sync = [](Communicator& c, std::span<float> g, std::vector<std::size_t> off,
                         std::size_t bytes, AllReduceFn f, AlgoOptions a) {
        return std::make_unique<BlockingSync>(c, g, std::move(off), bytes, f, a);
      };
      EXPECT_THROW(DataParallelTrainer(comm, config(nn::Precision::fp16, 5), data(), own),
                   std::invalid_argument);
    });
  });
}

// --- exercise 5.4: the student's dynamic loss scale -------------------------------------------

class LossScale5_4 : public ::testing::TestWithParam<std::pair<const char*, nn::LossScaleUpdate>> {
};

// The update's rules, one by one: an overflow skips, backs off and restarts the count; good
// steps grow the scale after exactly growth_interval in a row; the floor holds.
TEST_P(LossScale5_4, BacksOffOnAnOverflowAndGrowsOnSchedule) {
  const nn::LossScaleUpdate update = GetParam().second;
  CDL_TRY_EXERCISE({
    const nn::LossScalerOptions o{
        .initial = 1024, .growth = 2, .backoff = 0.5, .growth_interval = 3};
    nn::LossScaleState s{.scale = 1024};
    EXPECT_FALSE(update(s, true, o));
    EXPECT_EQ(s.scale, 512.0f);
    EXPECT_EQ(s.skipped, 1u);
    EXPECT_EQ(s.good_steps, 0u);
    EXPECT_TRUE(update(s, false, o));
    EXPECT_TRUE(update(s, false, o));
    EXPECT_EQ(s.scale, 512.0f);
    EXPECT_EQ(s.good_steps, 2u);
    EXPECT_FALSE(update(s, true, o));  // the count restarts
    EXPECT_EQ(s.scale, 256.0f);
    EXPECT_EQ(s.good_steps, 0u);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(update(s, false, o));
    EXPECT_EQ(s.scale, 512.0f);  // exactly three in a row
    EXPECT_EQ(s.good_steps, 0u);
    EXPECT_EQ(s.skipped, 2u);
    const nn::LossScalerOptions third{
        .initial = 8, .growth = 4, .backoff = 0.25, .growth_interval = 1};
    nn::LossScaleState t{.scale = 8};
    EXPECT_TRUE(update(t, false, third));
    EXPECT_EQ(t.scale, 32.0f);
    EXPECT_FALSE(update(t, true, third));
    EXPECT_EQ(t.scale, 8.0f);
    nn::LossScaleState tiny{.scale = 0x1p-23f};
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(update(tiny, true, o));
    EXPECT_EQ(tiny.scale, 0x1p-24f) << "the scale fell below 2^-24";
  });
}

// Through a trainer: 4 ranks in fp16 forced to overflow (a scale of 2^60) skip every step of
// the first epoch and leave the weights alone; the scale then falls until nothing overflows and
// training goes on, the replicas identical.
TEST_P(LossScale5_4, TrainsThroughAForcedOverflow) {
  const nn::LossScaleUpdate update = GetParam().second;
  CDL_TRY_EXERCISE({
    concurdl::kernels::set_compute_threads(1);
    nn::TrainConfig c = config(nn::Precision::fp16, 5);
    c.loss_scaler.initial = 0x1p60f;
    c.loss_scaler.growth_interval = 4;
    within_seconds(kDeadline, [&] {
      run_threads(4, [&](Communicator& comm) {
        DataParallelOptions opt;
        opt.loss_scale_update = update;
        DataParallelTrainer t(comm, c, data(), opt);
        const nn::EpochResult first = t.run_epoch();
        EXPECT_EQ(first.skipped_steps, 5u);
        EXPECT_EQ(t.loss_scaler().scale(), 0x1p55f);
        std::size_t skipped = 0;
        double loss = 0;
        for (int e = 0; e < 8; ++e) {
          const nn::EpochResult r = t.run_epoch();
          skipped += r.skipped_steps;
          loss = r.loss;
        }
        EXPECT_LT(skipped, 40u) << "the scale never came down far enough";
        EXPECT_LT(loss, first.loss);
        EXPECT_EQ(replica_divergence(comm, t.model().parameters()), 0.0);
      });
    });
  });
}

INSTANTIATE_TEST_SUITE_P(LossScaleReference, LossScale5_4,
                         ::testing::Values(std::pair<const char*, nn::LossScaleUpdate>{
                             "reference", &nn::update_loss_scale}),
                         [](const auto& info) { return std::string(info.param.first); });
INSTANTIATE_TEST_SUITE_P(LossScaleEx5_4, LossScale5_4,
                         ::testing::Values(std::pair<const char*, nn::LossScaleUpdate>{
                             "student", &student_update_loss_scale}),
                         [](const auto& info) { return std::string(info.param.first); });

}  // namespace
