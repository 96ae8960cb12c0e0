// The asynchronous engine (async_engine.hpp):
//  - on 200 random op sequences it computes exactly what eager execution computes;
//  - an op call returns before the op has run (an op held on a latch: no timing involved), and
//    value() waits for it;
//  - an op that throws fails its Future and those computed from it, not the others; wait_all()
//    rethrows it once; nothing hangs;
//  - the destructor runs every queued op; Futures may be waited on from several threads.
//   ch08_tests --gtest_filter='AsyncEngine*'
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/df/async_engine.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/kernels/threads.hpp"

namespace {

using namespace concurdl::df;
using concurdl::testing::within_seconds;
using Future = AsyncEngine::Future;

constexpr int kDeadline = 120;
constexpr auto kGemm = concurdl::kernels::GemmVersion::v2_ikj;

Tensor random_tensor(std::mt19937& rng, std::size_t side) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  Tensor t = Tensor::filled(side, side, 0.0f);
  for (float& x : t.data) x = value(rng);
  return t;
}

TEST(AsyncEngine, ComputesWhatEagerComputes) {
  concurdl::kernels::set_compute_threads(1);
  within_seconds(kDeadline, [] {
    for (std::uint32_t seed = 1; seed <= 200; ++seed) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed);
      std::mt19937 rng(seed);
      Eager eager(kGemm);
      AsyncEngine engine(kGemm);
      std::vector<NodeId> e;
      std::vector<Future> f;
      for (int i = 0; i < 3; ++i) {
        Tensor t = random_tensor(rng, 5);
        e.push_back(eager.input(t));
        f.push_back(engine.input(std::move(t)));
      }
      for (int i = 0; i < 30; ++i) {
        std::uniform_int_distribution<std::size_t> pick(0, e.size() - 1);
        const std::size_t a = pick(rng), b = pick(rng);
        const int kind = static_cast<int>(rng() % 4);
        const Op op = kind == 0   ? Op::matmul
                      : kind == 1 ? Op::add
                      : kind == 2 ? Op::relu
                                  : Op::scale;
        const bool unary = op == Op::relu || op == Op::scale;
        const float alpha = op == Op::scale ? 0.2f : 0.0f;
        e.push_back(eager.call([&](Graph& g) {
          return unary ? g.add_node(op, {e[a]}, alpha) : g.add_node(op, {e[a], e[b]});
        }));
        f.push_back(unary ? engine.op(op, {f[a]}, alpha) : engine.op(op, {f[a], f[b]}));
      }
      for (std::size_t i = 0; i < e.size(); ++i)
        ASSERT_EQ(f[i].value().data, eager.value(e[i]).data) << "op " << i;
    }
  });
}

// The front end runs ahead: ops issued behind one that cannot finish yet are all accepted, and
// none has run, until the test lets the first one go.
TEST(AsyncEngine, OpCallsReturnBeforeTheOpsRun) {
  within_seconds(kDeadline, [] {
    AsyncEngine engine(kGemm);
    std::latch release(1);
    std::atomic<int> ran{0};
    const Future x = engine.input(Tensor::filled(2, 2, 1.0f));
    const Future held = engine.custom("held", {x}, [&](std::span<const Tensor* const> in) {
      release.wait();
      ++ran;
      return *in[0];
    });
    Future y = held;
    for (int i = 0; i < 100; ++i) y = engine.scale(y, 2.0f);
    EXPECT_EQ(engine.issued(), 102u);
    EXPECT_FALSE(held.ready());
    EXPECT_FALSE(y.ready());
    EXPECT_EQ(ran.load(), 0);
    release.count_down();
    EXPECT_EQ(y.value().data, std::vector<float>(4, 1.0f * 1.2676506e30f));  // 2^100
    EXPECT_TRUE(held.ready());
    EXPECT_EQ(ran.load(), 1);
  });
}

TEST(AsyncEngine, AnOpsExceptionFailsItsDependentsOnly) {
  within_seconds(kDeadline, [] {
    AsyncEngine engine(kGemm);
    const Future x = engine.input(Tensor::filled(2, 2, 1.0f));
    const Future bad = engine.custom("bad", {x}, [](std::span<const Tensor* const>) -> Tensor {
      throw std::runtime_error("op failed on purpose");
    });
    const Future after = engine.relu(engine.scale(bad, 3.0f));
    const Future fine = engine.scale(x, 3.0f);
    EXPECT_EQ(fine.value().data, std::vector<float>(4, 3.0f));
    EXPECT_THROW(bad.wait(), std::runtime_error);
    try {
      after.value();
      FAIL() << "a Future computed from a failed op has a value";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "op failed on purpose");
    }
    EXPECT_THROW(engine.wait_all(), std::runtime_error);
    EXPECT_NO_THROW(engine.wait_all());                                      // reported once
    EXPECT_EQ(engine.relu(fine).value().data, std::vector<float>(4, 3.0f));  // goes on
    // A shape error is an exception too, naming the op.
    const Future mismatch = engine.add(x, engine.input(Tensor::filled(3, 3, 0.0f)));
    EXPECT_THROW(mismatch.wait(), GraphError);
    EXPECT_THROW(engine.wait_all(), GraphError);
  });
}

TEST(AsyncEngine, DestructorRunsEveryQueuedOp) {
  within_seconds(kDeadline, [] {
    std::atomic<int> ran{0};
    {
      AsyncEngine engine(kGemm);
      Future v = engine.input(Tensor::filled(1, 1, 0.0f));
      for (int i = 0; i < 1000; ++i)
        v = engine.custom("count", {v}, [&ran](std::span<const Tensor* const> in) {
          ++ran;
          return *in[0];
        });
    }
    EXPECT_EQ(ran.load(), 1000);
  });
}

TEST(AsyncEngine, FuturesMayBeWaitedOnFromSeveralThreads) {
  within_seconds(kDeadline, [] {
    for (const int waiters : {1, 2, 4, 8}) {
      AsyncEngine engine(kGemm);
      std::vector<Future> f{engine.input(Tensor::filled(1, 1, 1.0f))};
      for (int i = 0; i < 2000; ++i) f.push_back(engine.op(Op::shift, {f.back()}, 1.0f));
      std::vector<std::future<double>> sums;
      for (int t = 0; t < waiters; ++t)
        sums.push_back(std::async(std::launch::async, [&f, t, waiters] {
          double s = 0;
          for (std::size_t i = static_cast<std::size_t>(t); i < f.size();
               i += static_cast<std::size_t>(waiters))
            s += f[i].value().data[0];
          return s;
        }));
      double total = 0;
      for (auto& s : sums) total += s.get();
      EXPECT_EQ(total, 2001.0 * 2002.0 / 2.0) << waiters << " waiters";  // 1 + 2 + ... + 2001
    }
  });
}

TEST(AsyncEngine, RefusesInputsFromAnotherEngineAndBuildersOps) {
  AsyncEngine a(kGemm), b(kGemm);
  const Future x = a.input(Tensor::filled(1, 1, 1.0f));
  EXPECT_THROW(b.relu(x), std::invalid_argument);
  EXPECT_THROW(a.op(Op::input, {}), std::invalid_argument);
  EXPECT_THROW(Future().wait(), std::logic_error);
}

}  // namespace
