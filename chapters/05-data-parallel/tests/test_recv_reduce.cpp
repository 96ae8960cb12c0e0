// Communicator::irecv_reduce / recv_reduce: acc += the message, at 1 to 8 ranks (irecv_add and
// irecv_combine, another reduction, too). The threads
// backend adds straight from the sender's buffer (its own do_irecv_reduce); the default
// (receive into scratch, then add), which MPI uses, is tested on threads too, through a
// communicator that forwards everything but irecv_reduce. Both orders: the receive posted before
// the message arrives (the sender adds) and after it (added from the buffered message).
//   ch05_tests --gtest_filter='RecvReduce*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "collective_checks.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"

namespace {

using namespace concurdl::dp;
using namespace concurdl::dp::testing;
using concurdl::testing::within_seconds;

constexpr int kDeadline = 60;

// Forwards every call to `inner` except irecv_reduce, which keeps Communicator's default.
class DefaultReduce final : public Communicator {
 public:
  explicit DefaultReduce(Communicator& inner) : inner_(inner) {}
  std::string_view name() const override { return inner_.name(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void barrier() override { inner_.barrier(); }

 protected:
  void do_send(int dst, std::span<const float> d, int tag) override { inner_.send(dst, d, tag); }
  int do_recv(int src, std::span<float> d, int tag) override { return inner_.recv(src, d, tag); }
  Request do_isend(int dst, std::span<const float> d, int tag) override {
    return inner_.isend(dst, d, tag);
  }
  Request do_irecv(int src, std::span<float> d, int tag) override {
    return inner_.irecv(src, d, tag);
  }
  void do_broadcast(std::span<float> d, int root) override { inner_.broadcast(d, root); }
  void do_all_reduce(std::span<const float> in, std::span<float> out) override {
    inner_.all_reduce(in, out);
  }
  void do_reduce_scatter(std::span<const float> in, std::span<float> out) override {
    inner_.reduce_scatter(in, out);
  }
  void do_all_gather(std::span<const float> in, std::span<float> out) override {
    inner_.all_gather(in, out);
  }

 private:
  Communicator& inner_;
};

enum class Path { fused, default_scratch };
enum class Order { receive_first, message_first };

struct Case {
  Path path;
  Order order;
  bool blocking;
  int ranks;
};

std::string name_of(const Case& c) {
  return std::string(c.path == Path::fused ? "fused" : "default") + "_" +
         (c.order == Order::receive_first ? "receive_first" : "message_first") + "_" +
         (c.blocking ? "blocking" : "nonblocking") + "_" + std::to_string(c.ranks) + "ranks";
}

class RecvReduce : public ::testing::TestWithParam<Case> {};

// Every rank sends value(r, ·) to its right neighbour and reduces what its left one sent into
// its own value(r, ·): afterwards element i is value(r, i) + value(left, i), exactly.
TEST_P(RecvReduce, AddsTheMessageOnceIntoAcc) {
  const Case c = GetParam();
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(std::to_string(count) + " floats");
    std::atomic<std::size_t> wrong{0};
    within_seconds(kDeadline, [&] {
      run_threads(c.ranks, [&](Communicator& threads) {
        DefaultReduce plain(threads);
        Communicator& comm = c.path == Path::fused ? threads : static_cast<Communicator&>(plain);
        const int n = comm.size(), r = comm.rank();
        const int right = (r + 1) % n, left = (r - 1 + n) % n;
        std::vector<float> mine = input(r, count), acc = input(r, count);
        std::vector<float> scratch(count, kPoison);
        if (c.order == Order::receive_first) {
          Request req = c.blocking ? Request() : comm.irecv_reduce(left, acc, scratch, 7);
          comm.barrier();  // every receive is posted before any message is sent
          if (c.blocking) {
            // A blocking receive cannot be posted first; post it, and send from another place.
            Request s = comm.isend(right, mine, 7);
            EXPECT_EQ(comm.recv_reduce(left, acc, 7), left);
            s.wait();
          } else {
            comm.send(right, mine, 7);
            while (!req.test()) {
            }
            req.wait();  // after a true test(): returns at once, and adds nothing again
            EXPECT_EQ(req.source(), left);
          }
        } else {
          comm.send(right, mine, 7);
          comm.barrier();  // every message is sent before any receive is posted
          if (c.blocking) {
            EXPECT_EQ(comm.recv_reduce(left, acc, 7), left);
          } else {
            Request req = comm.irecv_reduce(left, acc, scratch, 7);
            req.wait();
          }
        }
        std::size_t w = 0;
        for (std::size_t i = 0; i < count; ++i) w += acc[i] != value(r, i) + value(left, i);
        wrong += w;
        comm.barrier();
      });
    });
    EXPECT_EQ(wrong.load(), 0u);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Path p : {Path::fused, Path::default_scratch})
    for (Order o : {Order::receive_first, Order::message_first})
      for (bool blocking : {false, true})
        for (int ranks : {1, 2, 3, 4, 8}) out.push_back({p, o, blocking, ranks});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, RecvReduce, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

TEST(RecvReduceErrors, SizeMismatchAndShortScratchAreErrors) {
  within_seconds(kDeadline, [] {
    EXPECT_THROW(run_threads(2,
                             [](Communicator& comm) {
                               std::vector<float> v(comm.rank() == 0 ? 5 : 4, 1.0f);
                               if (comm.rank() == 0)
                                 comm.send(1, v, 3);
                               else
                                 comm.recv_reduce(0, v, 3);
                             }),
                 std::length_error);
    EXPECT_THROW(run_threads(1,
                             [](Communicator& comm) {
                               std::vector<float> acc(4), scratch(3);
                               comm.irecv_reduce(0, acc, scratch, 3);
                             }),
                 std::invalid_argument);
  });
}

// Each rank reduces a message from every other rank, from whichever sends first.
TEST(RecvReduceAnySource, SumsEveryOtherRank) {
  for (int ranks : {1, 2, 4, 8}) {
    std::atomic<std::size_t> wrong{0};
    within_seconds(kDeadline, [&] {
      run_threads(ranks, [&](Communicator& comm) {
        const int n = comm.size(), r = comm.rank();
        constexpr std::size_t kCount = 1000;
        std::vector<float> acc = input(r, kCount);
        for (int q = 0; q < n; ++q)
          if (q != r) comm.send(q, input(r, kCount), 9);
        for (int k = 1; k < n; ++k) comm.recv_reduce(kAnySource, acc, 9);
        for (std::size_t i = 0; i < kCount; ++i) wrong += acc[i] != sum_over_ranks(n, i);
      });
    });
    EXPECT_EQ(wrong.load(), 0u) << ranks << " ranks";
  }
}

// Every all-reduce of the table through the default irecv_reduce (what MPI runs), on threads.
class DefaultPathAllReduce
    : public ::testing::TestWithParam<std::tuple<const AllReduceVariant*, int>> {};

TEST_P(DefaultPathAllReduce, EqualsTheSerialSum) {
  const AllReduceVariant* row = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  for (std::size_t count : kSizes)
    for (bool in_place : {true, false}) {
      std::atomic<std::size_t> wrong{0};
      within_seconds(kDeadline, [&] {
        run_threads(ranks, [&](Communicator& threads) {
          DefaultReduce plain(threads);
          wrong += wrong_all_reduce(plain, row->run, count, in_place);
        });
      });
      EXPECT_EQ(wrong.load(), 0u) << count << " floats, in place " << in_place;
    }
}

std::vector<const AllReduceVariant*> hand_written() {
  std::vector<const AllReduceVariant*> rows;
  for (const AllReduceVariant& r : kAllReduceVariants)
    if (r.hand_written) rows.push_back(&r);
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Table, DefaultPathAllReduce,
                         ::testing::Combine(::testing::ValuesIn(hand_written()),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)->name) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// Communicator::irecv_add: out = in + the message, in left as it was, at 1 to 8 ranks, on the
// fused path (the sender writes out) and the default one (copy in to out, then receive-and-add),
// with the receive posted before the message and after it; and in place (in is out).
TEST_P(RecvReduce, IrecvAddWritesInPlusTheMessageIntoOut) {
  const Case c = GetParam();
  if (c.blocking) GTEST_SKIP() << "irecv_add has no blocking form";
  for (std::size_t count : kSizes)
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(std::to_string(count) + " floats, in place " + (in_place ? "yes" : "no"));
      std::atomic<std::size_t> wrong{0};
      within_seconds(kDeadline, [&] {
        run_threads(c.ranks, [&](Communicator& threads) {
          DefaultReduce plain(threads);
          Communicator& comm = c.path == Path::fused ? threads : static_cast<Communicator&>(plain);
          const int n = comm.size(), r = comm.rank();
          const int right = (r + 1) % n, left = (r - 1 + n) % n;
          std::vector<float> mine = input(r, count), in = input(r, count);
          std::vector<float> out(count, kPoison), scratch(count, kPoison);
          std::span<float> dst = in_place ? std::span<float>(in) : std::span<float>(out);
          if (c.order == Order::receive_first) {
            Request req = comm.irecv_add(left, in, dst, scratch, 9);
            comm.barrier();  // every receive is posted before any message is sent
            comm.send(right, mine, 9);
            req.wait();
            EXPECT_EQ(req.source(), left);
          } else {
            comm.send(right, mine, 9);
            comm.barrier();  // every message is sent before any receive is posted
            Request req = comm.irecv_add(left, in, dst, scratch, 9);
            req.wait();
          }
          std::size_t w = 0;
          for (std::size_t i = 0; i < count; ++i) {
            w += dst[i] != value(r, i) + value(left, i);
            if (!in_place) w += in[i] != value(r, i);
          }
          wrong += w;
          comm.barrier();
        });
      });
      EXPECT_EQ(wrong.load(), 0u);
    }
}

// irecv_combine: another reduction than the sum, with its context passed through (here
// acc = max(acc, message) + 0.5), applied once, by the sender (threads) or after the receive
// into scratch (the default), whichever comes first.
void max_plus(float* acc, const float* message, std::size_t n, const void* context) {
  const float off = *static_cast<const float*>(context);
  for (std::size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], message[i]) + off;
}

TEST_P(RecvReduce, IrecvCombineAppliesItsReductionOnce) {
  const Case c = GetParam();
  if (c.blocking) GTEST_SKIP() << "irecv_combine has no blocking form";
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(std::to_string(count) + " floats");
    std::atomic<std::size_t> wrong{0};
    within_seconds(kDeadline, [&] {
      run_threads(c.ranks, [&](Communicator& threads) {
        DefaultReduce plain(threads);
        Communicator& comm = c.path == Path::fused ? threads : static_cast<Communicator&>(plain);
        const int n = comm.size(), r = comm.rank();
        const int right = (r + 1) % n, left = (r - 1 + n) % n;
        const float off = 0.5f;
        const Combine op{&max_plus, &off};
        std::vector<float> mine = input(r, count), acc = input(r, count);
        std::vector<float> scratch(count, kPoison);
        if (c.order == Order::receive_first) {
          Request req = comm.irecv_combine(left, acc, scratch, op, 11);
          comm.barrier();  // every receive is posted before any message is sent
          comm.send(right, mine, 11);
          req.wait();
          EXPECT_EQ(req.source(), left);
        } else {
          comm.send(right, mine, 11);
          comm.barrier();  // every message is sent before any receive is posted
          Request req = comm.irecv_combine(left, acc, scratch, op, 11);
          req.wait();
        }
        std::size_t w = 0;
        for (std::size_t i = 0; i < count; ++i)
          w += acc[i] != std::max(value(r, i), value(left, i)) + off;
        wrong += w;
        comm.barrier();
      });
    });
    EXPECT_EQ(wrong.load(), 0u);
  }
}

TEST(RecvReduceErrors, IrecvCombineNeedsAFunctionAndScratch) {
  within_seconds(kDeadline, [] {
    run_threads(1, [](Communicator& threads) {
      DefaultReduce plain(threads);
      std::vector<float> a(8, 1.0f), scratch(8, 0.0f), short_scratch(3, 0.0f);
      EXPECT_THROW(threads.irecv_combine(0, a, scratch, Combine{}, 1), std::invalid_argument);
      const float off = 0;
      EXPECT_THROW(plain.irecv_combine(0, a, short_scratch, Combine{&max_plus, &off}, 1),
                   std::invalid_argument);
    });
  });
}

TEST(RecvReduceErrors, IrecvAddChecksItsSpans) {
  within_seconds(kDeadline, [] {
    run_threads(1, [](Communicator& comm) {
      std::vector<float> a(8, 1.0f), b(7, 0.0f), scratch(8, 0.0f), short_scratch(3, 0.0f);
      EXPECT_THROW(comm.irecv_add(0, a, b, scratch, 1), std::invalid_argument);
      std::vector<float> out(8, 0.0f);
      EXPECT_THROW(comm.irecv_add(0, a, out, short_scratch, 1), std::invalid_argument);
      EXPECT_THROW(comm.irecv_add(0, std::span<const float>(a).first(6),
                                  std::span<float>(a).subspan(2), scratch, 1),
                   std::invalid_argument);
    });
  });
}

// The ring's segment: opts.segment_floats when given, else an eighth of the block within
// [64 Ki, 1 Mi] floats.
TEST(RingSegment, ChosenFromTheBlockUnlessGiven) {
  const AlgoOptions automatic;
  EXPECT_EQ(ring_segment_floats(0, automatic), std::size_t{1} << 16);
  EXPECT_EQ(ring_segment_floats(1000, automatic), std::size_t{1} << 16);
  EXPECT_EQ(ring_segment_floats(std::size_t{1} << 22, automatic), std::size_t{1} << 19);
  EXPECT_EQ(ring_segment_floats(std::size_t{1} << 24, automatic), std::size_t{1} << 20);
  EXPECT_EQ(ring_segment_floats(std::size_t{1} << 30, automatic), std::size_t{1} << 20);
  AlgoOptions given;
  given.segment_floats = 7;
  EXPECT_EQ(ring_segment_floats(std::size_t{1} << 24, given), 7u);
  given.segment_floats = 0;
  EXPECT_EQ(ring_segment_floats(std::size_t{1} << 24, given), 0u);
}

// The ring with its own segment choice, on blocks of several segments (blocks of ~140 000
// floats: segments of 64 Ki, the last one short), in place and out of place, 1 to 8 ranks. At
// ranks <= CPUs a waiting receive spins a few microseconds before it sleeps; above, it sleeps.
TEST(RingSegment, AutomaticSegmentsSumAt1To8Ranks) {
  for (int ranks = 1; ranks <= 8; ++ranks)
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, in place " + (in_place ? "yes" : "no"));
      const std::size_t count = 140000 * static_cast<std::size_t>(ranks) + 3;
      std::atomic<std::size_t> wrong{0};
      within_seconds(kDeadline, [&] {
        run_threads(ranks, [&](Communicator& comm) {
          wrong += wrong_all_reduce(comm, &allreduce_ring, count, in_place);
        });
      });
      EXPECT_EQ(wrong.load(), 0u);
    }
}

}  // namespace
