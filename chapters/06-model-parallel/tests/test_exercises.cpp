// Chapter 06's exercises through the checks their references pass. Each suite is typed over the
// chapter's own code and the student's, so both meet the same tests; while a stub still has
// CDL_TODO, its tests are skipped as "not attempted". Every test runs under a deadline
// (finishes_within, exercise_support.hpp), on 1, 2, 3 and 4 thread ranks (6.1) or 2, 3 and 4
// stages (6.2, 6.3; 6.3's tests are in test_exercise_zb.cpp).
//   6.1 ColumnParallelLinear vs student_column_forward/backward
//       (exercises/student_column_parallel.hpp)
//       ch06_tests --gtest_filter='ColumnLinearEx6_1/student.*'
//   6.2 stage_order(Schedule::one_f_one_b, ...) vs student_1f1b_order (exercises/student_1f1b.hpp)
//       ch06_tests --gtest_filter='OneFOneBEx6_2/student.*'
//   6.3 stage_order(Schedule::zb_h1, ...) vs student_zb_h1_order (exercises/student_zb_h1.hpp)
//       ch06_tests --gtest_filter='ZeroBubbleEx6_3/student.*'
// (what `concurdl exercise ch06` runs; '*Ex6*' runs the references' instances too).
#include "exercise_support.hpp"

namespace {

// --- 6.1 the column-parallel Linear ----------------------------------------------------------

// The two implementations behind one face: the reference is ColumnParallelLinear, built around
// the shard for each call (it owns its shard; the shard is moved in and back out).
struct ReferenceColumn {
  static constexpr bool student = false;
  static void forward(dp::Communicator& comm, const LinearShard& shard, const float* x,
                      std::size_t batch, float* y_local) {
    ColumnParallelLinear layer(comm, shard);
    layer.forward(x, batch, y_local);
  }
  static void backward(dp::Communicator& comm, LinearShard& shard, const float* x,
                       const float* dy_local, std::size_t batch, float* dx) {
    ColumnParallelLinear layer(comm, std::move(shard));
    layer.backward(x, dy_local, batch, dx);
    shard = std::move(layer.shard());
  }
};
struct StudentColumn {
  static constexpr bool student = true;
  static void forward(dp::Communicator& comm, const LinearShard& shard, const float* x,
                      std::size_t batch, float* y_local) {
    student_column_forward(comm, shard, x, batch, y_local);
  }
  static void backward(dp::Communicator& comm, LinearShard& shard, const float* x,
                       const float* dy_local, std::size_t batch, float* dx) {
    student_column_backward(comm, shard, x, dy_local, batch, dx);
  }
};

// The 1F1B order as a type, so that its suite is typed like 6.1's.
struct Reference1F1B {
  static constexpr bool student = false;
  static std::vector<int> order(int stage, int stages, std::size_t m) {
    return codes_of(stage_order(Schedule::one_f_one_b, stage, stages, m));
  }
};
struct Student1F1B {
  static constexpr bool student = true;
  static std::vector<int> order(int stage, int stages, std::size_t m) {
    return student_1f1b_order(stage, stages, m);
  }
};

// The instances are named "reference" and "student", so that `Suite/student.*` selects the
// student's tests alone.

// The unsplit layer (nn::Mlp with one layer: Linear, no ReLU), forward and backward, and the
// columns of its output that rank r of p owns.
struct Unsplit {
  std::size_t batch, in, out;
  std::vector<float> x, dy, w, b, y, dx, dw, db;
  Unsplit(std::size_t batch_, std::size_t in_, std::size_t out_, std::uint32_t seed)
      : batch(batch_), in(in_), out(out_) {
    x = values(batch * in, seed);
    dy = values(batch * out, seed + 1);
    nn::Mlp mlp(nn::MlpSpec{{in, out}}, seed + 2, kernels::GemmVersion::v2_ikj);
    // Non-zero biases, so that a forgotten or misplaced bias shows.
    const nn::LayerView l = mlp.layer(0);
    const std::vector<float> bias = values(out, seed + 3);
    std::copy(bias.begin(), bias.end(), l.b.begin());
    w.assign(l.w.data, l.w.data + out * in);
    b.assign(l.b.begin(), l.b.end());
    nn::Activations a;
    mlp.forward_layers(0, 1, x.data(), batch, a);
    y.assign(a.output(), a.output() + batch * out);
    dx.resize(batch * in);
    mlp.backward_layers(0, 1, a, dy.data(), dx.data());
    const nn::LayerView g = mlp.layer_gradient(0);
    dw.assign(g.w.data, g.w.data + out * in);
    db.assign(g.b.begin(), g.b.end());
  }
  // Rank r's columns of a batch x out matrix.
  std::vector<float> columns(const std::vector<float>& m, int r, int p) const {
    const std::size_t k = out / static_cast<std::size_t>(p),
                      first = k * static_cast<std::size_t>(r);
    std::vector<float> c(batch * k);
    for (std::size_t row = 0; row < batch; ++row)
      std::copy_n(m.begin() + static_cast<std::ptrdiff_t>(row * out + first), k,
                  c.begin() + static_cast<std::ptrdiff_t>(row * k));
    return c;
  }
};

// What every rank computed, kept for the test's thread to check.
struct RankResults {
  std::vector<std::vector<float>> y, dx, dw, db, dw_no_dx, db_no_dx;
  explicit RankResults(int ranks) {
    for (auto* v : {&y, &dx, &dw, &db, &dw_no_dx, &db_no_dx})
      v->resize(static_cast<std::size_t>(ranks));
  }
};

// Forward and backward on `ranks` thread ranks: each rank's y_local must be its columns of the
// unsplit layer's output, its dw and db its block of the unsplit gradients (overwritten: they
// hold garbage before), and dx the whole input gradient on every rank; then backward again
// with dx null (no all-reduce asked for): the same dw and db.
template <class Column>
void equals_the_unsplit_layer(int ranks, std::size_t batch, std::size_t in, std::size_t out) {
  SCOPED_TRACE(::testing::Message()
               << ranks << " ranks, batch " << batch << ", " << in << " -> " << out);
  const Unsplit full(batch, in, out, static_cast<std::uint32_t>(batch * 131 + in * 7 + out));
  RankResults got(ranks);
  dp::run_threads(ranks, [&](dp::Communicator& comm) {
    const int r = comm.rank();
    const auto ru = static_cast<std::size_t>(r);
    LinearShard shard = column_shard(full.w, full.b, in, out, r, ranks);
    std::fill(shard.dw.begin(), shard.dw.end(), 1e3f);
    std::fill(shard.db.begin(), shard.db.end(), 1e3f);
    const std::vector<float> dy_local = full.columns(full.dy, r, ranks);
    got.y[ru].assign(batch * shard.out, -7.0f);
    got.dx[ru].assign(batch * in, -7.0f);
    Column::forward(comm, shard, full.x.data(), batch, got.y[ru].data());
    Column::backward(comm, shard, full.x.data(), dy_local.data(), batch, got.dx[ru].data());
    got.dw[ru] = shard.dw;
    got.db[ru] = shard.db;
    std::fill(shard.dw.begin(), shard.dw.end(), -1e3f);
    std::fill(shard.db.begin(), shard.db.end(), -1e3f);
    Column::backward(comm, shard, full.x.data(), dy_local.data(), batch, nullptr);
    got.dw_no_dx[ru] = shard.dw;
    got.db_no_dx[ru] = shard.db;
  });
  for (int r = 0; r < ranks; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const std::string rank = "rank " + std::to_string(r) + "'s ";
    const LinearShard want = column_shard(full.dw, full.db, in, out, r, ranks);
    EXPECT_TRUE(near(got.y[ru], full.columns(full.y, r, ranks), rank + "y_local"));
    EXPECT_TRUE(near(got.dx[ru], full.dx, rank + "dx (the whole input gradient)"));
    EXPECT_TRUE(near(got.dw[ru], want.w, rank + "dw"));
    EXPECT_TRUE(near(got.db[ru], want.b, rank + "db"));
    EXPECT_TRUE(near(got.dw_no_dx[ru], want.w, rank + "dw (backward with dx null)"));
    EXPECT_TRUE(near(got.db_no_dx[ru], want.b, rank + "db (backward with dx null)"));
  }
}

// Against ColumnParallelLinear itself on the same ranks: the same y_local, dw, db and dx.
template <class Column>
void equals_column_parallel_linear(int ranks) {
  constexpr std::size_t batch = 9, in = 20, out = 36;
  SCOPED_TRACE(::testing::Message() << ranks << " ranks");
  const Unsplit full(batch, in, out, 77);
  RankResults got(ranks), want(ranks);
  dp::run_threads(ranks, [&](dp::Communicator& comm) {
    const int r = comm.rank();
    const auto ru = static_cast<std::size_t>(r);
    const std::vector<float> dy_local = full.columns(full.dy, r, ranks);
    LinearShard shard = column_shard(full.w, full.b, in, out, r, ranks);
    ColumnParallelLinear layer(comm, shard);
    want.y[ru].resize(batch * shard.out);
    want.dx[ru].resize(batch * in);
    layer.forward(full.x.data(), batch, want.y[ru].data());
    layer.backward(full.x.data(), dy_local.data(), batch, want.dx[ru].data());
    got.y[ru].resize(batch * shard.out);
    got.dx[ru].resize(batch * in);
    Column::forward(comm, shard, full.x.data(), batch, got.y[ru].data());
    Column::backward(comm, shard, full.x.data(), dy_local.data(), batch, got.dx[ru].data());
    got.dw[ru] = shard.dw;
    got.db[ru] = shard.db;
    want.dw[ru] = layer.shard().dw;
    want.db[ru] = layer.shard().db;
  });
  for (std::size_t r = 0; r < static_cast<std::size_t>(ranks); ++r) {
    const std::string rank = "rank " + std::to_string(r) + "'s ";
    EXPECT_TRUE(near(got.y[r], want.y[r], rank + "y_local"));
    EXPECT_TRUE(near(got.dx[r], want.dx[r], rank + "dx"));
    EXPECT_TRUE(near(got.dw[r], want.dw[r], rank + "dw"));
    EXPECT_TRUE(near(got.db[r], want.db[r], rank + "db"));
  }
}

// Five forward and backward steps in a row on the same ranks, each with its own layer and batch
// size: a message or a buffer left over from one step would spoil the next.
template <class Column>
void back_to_back_steps(int ranks) {
  constexpr std::size_t in = 13, out = 24;
  SCOPED_TRACE(::testing::Message() << ranks << " ranks");
  const std::size_t batches[] = {4, 1, 7, 2, 5};
  std::vector<Unsplit> full;
  for (std::size_t i = 0; i < std::size(batches); ++i)
    full.emplace_back(batches[i], in, out, static_cast<std::uint32_t>(100 + i));
  std::vector<RankResults> got;  // per step
  for (std::size_t i = 0; i < std::size(batches); ++i) got.emplace_back(ranks);
  dp::run_threads(ranks, [&](dp::Communicator& comm) {
    const int r = comm.rank();
    const auto ru = static_cast<std::size_t>(r);
    for (std::size_t i = 0; i < full.size(); ++i) {
      const Unsplit& f = full[i];
      LinearShard shard = column_shard(f.w, f.b, in, out, r, ranks);
      const std::vector<float> dy_local = f.columns(f.dy, r, ranks);
      RankResults& g = got[i];
      g.y[ru].resize(f.batch * shard.out);
      g.dx[ru].resize(f.batch * in);
      Column::forward(comm, shard, f.x.data(), f.batch, g.y[ru].data());
      Column::backward(comm, shard, f.x.data(), dy_local.data(), f.batch, g.dx[ru].data());
      g.dw[ru] = shard.dw;
      g.db[ru] = shard.db;
    }
  });
  for (std::size_t i = 0; i < full.size(); ++i)
    for (int r = 0; r < ranks; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      const RankResults& g = got[i];
      const std::string what = "step " + std::to_string(i) + ", rank " + std::to_string(r) + "'s ";
      const LinearShard want = column_shard(full[i].dw, full[i].db, in, out, r, ranks);
      EXPECT_TRUE(near(g.y[ru], full[i].columns(full[i].y, r, ranks), what + "y_local"));
      EXPECT_TRUE(near(g.dx[ru], full[i].dx, what + "dx"));
      EXPECT_TRUE(near(g.dw[ru], want.w, what + "dw"));
      EXPECT_TRUE(near(g.db[ru], want.b, what + "db"));
    }
}

template <class Column>
class ColumnLinearEx6_1 : public ::testing::Test {
 protected:
  void SetUp() override { kernels::set_compute_threads(1); }
};
using Columns = ::testing::Types<ReferenceColumn, StudentColumn>;
TYPED_TEST_SUITE(ColumnLinearEx6_1, Columns, ImplNames);

TYPED_TEST(ColumnLinearEx6_1, EqualsTheUnsplitLayerForwardAndBackward) {
  for (int ranks : kRankCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(
        kDeadline, [ranks] { equals_the_unsplit_layer<TypeParam>(ranks, 5, 7, 24); })));
}

// Sizes that the GEMM kernels block (more than one tile each way), one row, one feature.
TYPED_TEST(ColumnLinearEx6_1, EqualsTheUnsplitLayerAtOtherShapes) {
  for (int ranks : kRankCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [ranks] {
      equals_the_unsplit_layer<TypeParam>(ranks, 33, 70, 48);
      equals_the_unsplit_layer<TypeParam>(ranks, 1, 3, 12);
      equals_the_unsplit_layer<TypeParam>(ranks, 6, 1, 12);
    })));
}

TYPED_TEST(ColumnLinearEx6_1, EqualsColumnParallelLinear) {
  for (int ranks : kRankCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(
        finishes_within(kDeadline, [ranks] { equals_column_parallel_linear<TypeParam>(ranks); })));
}

TYPED_TEST(ColumnLinearEx6_1, BackToBackStepsOfDifferentBatches) {
  for (int ranks : kRankCounts)
    CDL_TRY_EXERCISE(
        ASSERT_TRUE(finishes_within(kDeadline, [ranks] { back_to_back_steps<TypeParam>(ranks); })));
}

// --- 6.2 the 1F1B order ----------------------------------------------------------------------

std::string show(const std::vector<int>& order) {
  std::string s = "{";
  for (std::size_t i = 0; i < order.size(); ++i) s += (i ? ", " : "") + std::to_string(order[i]);
  return s + "}";
}

// The most micro-batches whose activations a stage holds at once when it runs `order`: from a
// micro-batch's forward to its backward.
std::size_t peak_held(const std::vector<int>& order) {
  std::size_t live = 0, peak = 0;
  for (int op : order) {
    if (op > 0)
      peak = std::max(peak, ++live);
    else if (live > 0)
      --live;
  }
  return peak;
}

template <class Order>
void is_stage_orders_one_f_one_b() {
  for (int p = 1; p <= kMaxStages; ++p)
    for (int s = 0; s < p; ++s)
      for (std::size_t m = 1; m <= kMaxMicroBatches; ++m) {
        const std::vector<int> got = Order::order(s, p, m);
        const std::vector<int> want = codes_of(stage_order(Schedule::one_f_one_b, s, p, m));
        ASSERT_EQ(got, want) << "stage " << s << " of " << p << ", m = " << m << ": got "
                             << show(got) << ", 1F1B is " << show(want);
      }
}

template <class Order>
void is_a_valid_order_holding_at_most_p_minus_s() {
  for (int p = 1; p <= kMaxStages; ++p)
    for (int s = 0; s < p; ++s)
      for (std::size_t m = 1; m <= kMaxMicroBatches; ++m) {
        const std::vector<int> got = Order::order(s, p, m);
        const std::string where = "stage " + std::to_string(s) + " of " + std::to_string(p) +
                                  ", m = " + std::to_string(m) + ": " + show(got);
        try {
          check_order(got, m);
        } catch (const std::invalid_argument& e) {
          FAIL() << where << ": " << e.what();
        }
        const std::size_t bound = std::min(m, static_cast<std::size_t>(p - s));
        ASSERT_LE(peak_held(got), bound)
            << where << " holds " << peak_held(got) << " micro-batches' activations at once; "
            << "1F1B holds at most min(m, stages - stage) = " << bound;
      }
}

// One pipeline step with the order on every stage, over thread ranks, against one process's
// forward and backward of the whole batch (as tests/test_pipeline.cpp checks the schedules).

template <class Order>
void a_pipeline_step_gives_the_whole_batchs_gradients(int stages, std::size_t m) {
  SCOPED_TRACE(::testing::Message() << stages << " stages, " << m << " micro-batches");
  // The orders first, on the test's thread: a stub throws here, not on a rank.
  std::vector<std::vector<int>> orders;
  for (int s = 0; s < stages; ++s) orders.push_back(Order::order(s, stages, m));
  const std::vector<float> x = values(kRows * kSpec.widths.front(), 7);
  std::vector<std::uint8_t> labels(kRows);
  for (std::size_t i = 0; i < kRows; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 5);
  nn::Mlp whole(kSpec, 5, kernels::GemmVersion::v2_ikj);
  std::size_t correct_ref = 0;
  const float loss_ref = whole.forward_backward(x.data(), labels.data(), kRows, &correct_ref);
  const std::vector<std::size_t> bounds = stage_boundaries(kSpec.widths.size() - 1, stages);
  std::vector<std::vector<float>> grads(static_cast<std::size_t>(stages));
  std::vector<PipelineStepResult> results(static_cast<std::size_t>(stages));
  dp::run_threads(stages, [&](dp::Communicator& comm) {
    const auto s = static_cast<std::size_t>(comm.rank());
    nn::Mlp model(kSpec, 5, kernels::GemmVersion::v2_ikj);
    results[s] = pipeline_step(comm, model, bounds, x.data(), labels.data(), kRows, m, orders[s]);
    const auto& off = model.layer_offsets();
    const auto g = model.gradients();
    grads[s].assign(g.begin() + static_cast<std::ptrdiff_t>(off[bounds[s]]),
                    g.begin() + static_cast<std::ptrdiff_t>(off[bounds[s + 1]]));
  });
  const auto& off = whole.layer_offsets();
  const auto want = whole.gradients();
  for (std::size_t s = 0; s < static_cast<std::size_t>(stages); ++s) {
    const std::span<const float> mine =
        want.subspan(off[bounds[s]], off[bounds[s + 1]] - off[bounds[s]]);
    EXPECT_TRUE(near(grads[s], mine, "stage " + std::to_string(s) + "'s gradient"));
    EXPECT_LE(results[s].peak_activations, std::min(m, static_cast<std::size_t>(stages) - s))
        << "stage " << s << ": micro-batches' activations held at once";
  }
  const PipelineStepResult& last = results.back();
  EXPECT_NEAR(last.loss_sum / kRows, loss_ref, 1e-5);
  EXPECT_EQ(last.correct, correct_ref);
}

template <class Order>
class OneFOneBEx6_2 : public ::testing::Test {
 protected:
  void SetUp() override { kernels::set_compute_threads(1); }
};
using Orders = ::testing::Types<Reference1F1B, Student1F1B>;
TYPED_TEST_SUITE(OneFOneBEx6_2, Orders, ImplNames);

TYPED_TEST(OneFOneBEx6_2, IsStageOrdersOneFOneBForEveryStage) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, is_stage_orders_one_f_one_b<TypeParam>)));
}

TYPED_TEST(OneFOneBEx6_2, IsAValidOrderHoldingAtMostStagesMinusStage) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(
      finishes_within(kDeadline, is_a_valid_order_holding_at_most_p_minus_s<TypeParam>)));
}

TYPED_TEST(OneFOneBEx6_2, APipelineStepGivesTheWholeBatchsGradients) {
  for (int stages : {2, 3, 4})
    for (std::size_t m : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{8}})
      CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [stages, m] {
        a_pipeline_step_gives_the_whole_batchs_gradients<TypeParam>(stages, m);
      })));
}

}  // namespace
