// Exercise 6.3 (exercises/student_zb_h1.hpp) through the checks the reference passes: the ZB-H1
// order against stage_order(Schedule::zb_h1, ...), typed over the chapter's own code and the
// student's (skipped as "not attempted" while the stub has CDL_TODO), under a deadline.
//   ch06_tests --gtest_filter='ZeroBubbleEx6_3/student.*'
#include "exercise_support.hpp"

namespace {

// --- 6.3 the ZB-H1 order -----------------------------------------------------------------------

struct ReferenceZbH1 {
  static constexpr bool student = false;
  static std::vector<PipeOp> order(int stage, int stages, std::size_t m) {
    return stage_order(Schedule::zb_h1, stage, stages, m);
  }
};
struct StudentZbH1 {
  static constexpr bool student = true;
  static std::vector<PipeOp> order(int stage, int stages, std::size_t m) {
    return student_zb_h1_order(stage, stages, m);
  }
};

std::string show(const std::vector<PipeOp>& order) {
  std::string out = "{";
  for (const PipeOp& op : order) {
    if (out.size() > 1) out += ' ';
    out += op_name(op);
  }
  return out + "}";
}

template <class Order>
void is_stage_orders_zb_h1() {
  for (int p = 1; p <= kMaxStages; ++p)
    for (int s = 0; s < p; ++s)
      for (std::size_t m = 1; m <= kMaxMicroBatches; ++m) {
        const std::vector<PipeOp> got = Order::order(s, p, m);
        const std::vector<PipeOp> want = stage_order(Schedule::zb_h1, s, p, m);
        ASSERT_EQ(got, want) << "stage " << s << " of " << p << ", m = " << m << ": got "
                             << show(got) << ", ZB-H1 is " << show(want);
      }
}

// Every stage's order valid (F, then B, then W, of each micro-batch, all split), at most
// min(m, p) micro-batches in flight, and all of them together meet in the idealised timeline
// with ZB-H1's bubble.
template <class Order>
void is_a_valid_order_with_zb_h1s_bubble() {
  for (int p = 1; p <= kMaxStages; ++p)
    for (std::size_t m = 1; m <= kMaxMicroBatches; ++m) {
      std::vector<std::vector<PipeOp>> orders;
      for (int s = 0; s < p; ++s) {
        orders.push_back(Order::order(s, p, m));
        const std::vector<PipeOp>& got = orders.back();
        const std::string where = "stage " + std::to_string(s) + " of " + std::to_string(p) +
                                  ", m = " + std::to_string(m) + ": " + show(got);
        try {
          check_order(got, m);
        } catch (const std::invalid_argument& e) {
          FAIL() << where << ": " << e.what();
        }
        ASSERT_EQ(got.size(), 3 * m) << where << ": every micro-batch needs its F, B and W";
        std::size_t live = 0, peak = 0;
        for (const PipeOp& op : got) {
          if (op.kind == OpKind::forward) peak = std::max(peak, ++live);
          if (op.kind == OpKind::weight) --live;
        }
        ASSERT_LE(peak, std::min(m, static_cast<std::size_t>(p)))
            << where << " holds " << peak << " micro-batches from F to W at once";
      }
      const ScheduleTimeline t = schedule_timeline(orders);
      ASSERT_FALSE(t.deadlocked) << "p = " << p << ", m = " << m
                                 << ": the stages' orders cannot meet (a deadlock)";
      ASSERT_NEAR(t.bubble, bubble_zb_h1(p, static_cast<double>(m), 1), 1e-12)
          << "p = " << p << ", m = " << m << ": the bubble of the idealised timeline";
    }
}

// One real pipeline step with the order on every stage gives the bits of 1F1B's step (ZB-H1
// splits the same backward and adds the micro-batches in the same order).
template <class Order>
void a_zb_h1_step_gives_one_f_one_bs_bits(int stages, std::size_t m) {
  SCOPED_TRACE(::testing::Message() << stages << " stages, " << m << " micro-batches");
  std::vector<std::vector<PipeOp>> orders;
  for (int s = 0; s < stages; ++s) orders.push_back(Order::order(s, stages, m));
  const std::vector<float> x = values(kRows * kSpec.widths.front(), 7);
  std::vector<std::uint8_t> labels(kRows);
  for (std::size_t i = 0; i < kRows; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 5);
  const std::vector<std::size_t> bounds = stage_boundaries(kSpec.widths.size() - 1, stages);
  std::vector<float> got(nn::Mlp(kSpec, 5).parameters().size()), want(got.size());
  for (const bool mine : {true, false})
    dp::run_threads(stages, [&](dp::Communicator& comm) {
      const auto s = static_cast<std::size_t>(comm.rank());
      nn::Mlp model(kSpec, 5, kernels::GemmVersion::v2_ikj);
      if (mine)
        pipeline_step(comm, model, bounds, x.data(), labels.data(), kRows, m,
                      std::span<const PipeOp>(orders[s]));
      else
        pipeline_step(comm, model, bounds, x.data(), labels.data(), kRows, m,
                      Schedule::one_f_one_b);
      const auto& off = model.layer_offsets();
      for (std::size_t i = off[bounds[s]]; i < off[bounds[s + 1]]; ++i)
        (mine ? got : want)[i] = model.gradients()[i];
    });
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "gradient " << i << ": not 1F1B's bits";
}

template <class Order>
class ZeroBubbleEx6_3 : public ::testing::Test {
 protected:
  void SetUp() override { kernels::set_compute_threads(1); }
};
using ZbOrders = ::testing::Types<ReferenceZbH1, StudentZbH1>;
TYPED_TEST_SUITE(ZeroBubbleEx6_3, ZbOrders, ImplNames);

TYPED_TEST(ZeroBubbleEx6_3, IsStageOrdersZbH1ForEveryStage) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, is_stage_orders_zb_h1<TypeParam>)));
}

TYPED_TEST(ZeroBubbleEx6_3, IsAValidOrderWithZbH1sBubble) {
  CDL_TRY_EXERCISE(
      ASSERT_TRUE(finishes_within(kDeadline, is_a_valid_order_with_zb_h1s_bubble<TypeParam>)));
}

TYPED_TEST(ZeroBubbleEx6_3, APipelineStepGivesOneFOneBsBits) {
  for (int stages : {2, 3, 4})
    for (std::size_t m : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{8}})
      CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(
          kDeadline, [stages, m] { a_zb_h1_step_gives_one_f_one_bs_bits<TypeParam>(stages, m); })));
}

}  // namespace
