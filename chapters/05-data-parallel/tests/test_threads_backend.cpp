// The threads backend's point-to-point contract (communicator.hpp) and its failure handling:
// messages match by source and tag, in order; receives posted before or after the send get the
// same data; kAnySource takes whoever sends; sizes must match; and a rank that throws, or
// returns while another waits for it, makes every waiting rank throw within seconds, never hang;
// CONCURDL_THREADS_SPIN=0 turns its spinning off.
//   ch05_tests --gtest_filter='ThreadsP2p*:ThreadsFailure*:ThreadsSpin*:ThreadsBarrier*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collective_checks.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"

namespace {

using namespace concurdl::dp;
using concurdl::testing::within_seconds;
using namespace std::chrono_literals;

constexpr int kDeadline = 30;

std::vector<float> iota(std::size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(ThreadsP2p, RankAndSize) {
  std::atomic<int> sum{0};
  run_threads(4, [&](Communicator& comm) {
    EXPECT_EQ(comm.size(), 4);
    EXPECT_EQ(comm.name(), "threads");
    EXPECT_EQ(comm.memory(), MemorySpace::host);
    sum += comm.rank();
  });
  EXPECT_EQ(sum.load(), 0 + 1 + 2 + 3);
}

// The barrier orders the two sides: the receive is posted first (copied straight in) or the
// message arrives first (buffered).
TEST(ThreadsP2p, ReceivePostedBeforeOrAfterTheSend) {
  for (bool recv_first : {true, false}) {
    within_seconds(kDeadline, [&] {
      run_threads(2, [&](Communicator& comm) {
        const std::vector<float> msg = iota(1000, 1.0f);
        if (comm.rank() == 0) {
          if (recv_first) comm.barrier();
          comm.send(1, msg, 7);
          if (!recv_first) comm.barrier();
        } else {
          std::vector<float> got(1000, 0.0f);
          Request r = comm.irecv(0, got, 7);
          if (recv_first) {
            EXPECT_FALSE(r.test());
            comm.barrier();
          } else {
            comm.barrier();
          }
          r.wait();
          EXPECT_TRUE(r.test());
          EXPECT_EQ(r.source(), 0);
          EXPECT_EQ(got, msg);
        }
      });
    });
  }
}

// Non-overtaking: one sender, one tag, order kept; another tag is another queue.
TEST(ThreadsP2p, OrderPerSourceAndTag) {
  within_seconds(kDeadline, [] {
    run_threads(2, [](Communicator& comm) {
      constexpr int kMessages = 200;
      if (comm.rank() == 0) {
        for (int i = 0; i < kMessages; ++i) {
          const float v = static_cast<float>(i);
          comm.send(1, {&v, 1}, 1 + i % 2);
        }
      } else {
        for (int tag : {2, 1})
          for (int i = tag == 1 ? 0 : 1; i < kMessages; i += 2) {
            float v = -1;
            comm.recv(0, {&v, 1}, tag);
            EXPECT_EQ(v, static_cast<float>(i)) << "tag " << tag;
          }
      }
    });
  });
}

TEST(ThreadsP2p, AnySourceTakesEverySender) {
  for (int ranks : {2, 4, 8}) {
    within_seconds(kDeadline, [&] {
      run_threads(ranks, [&](Communicator& comm) {
        if (comm.rank() != 0) {
          const float v = static_cast<float>(comm.rank());
          comm.send(0, {&v, 1}, 3);
          return;
        }
        std::set<int> seen;
        for (int i = 1; i < comm.size(); ++i) {
          float v = -1;
          const int from = comm.recv(kAnySource, {&v, 1}, 3);
          EXPECT_EQ(v, static_cast<float>(from));
          seen.insert(from);
        }
        EXPECT_EQ(seen.size(), static_cast<std::size_t>(comm.size() - 1));
      });
    });
  }
}

TEST(ThreadsP2p, SendToSelfAndEmptyMessages) {
  run_threads(1, [](Communicator& comm) {
    const std::vector<float> msg = iota(5, 3.0f);
    comm.send(0, msg, 0);
    comm.send(0, {}, 0);
    std::vector<float> got(5);
    comm.recv(0, got, 0);
    EXPECT_EQ(got, msg);
    comm.recv(0, {}, 0);
  });
}

// Both sides send first, then receive: the threads backend never blocks in send.
TEST(ThreadsP2p, SendNeverBlocks) {
  within_seconds(kDeadline, [] {
    run_threads(2, [](Communicator& comm) {
      const int peer = 1 - comm.rank();
      const std::vector<float> mine = iota(1 << 20, static_cast<float>(comm.rank()));
      std::vector<float> theirs(mine.size());
      comm.send(peer, mine, 0);
      comm.recv(peer, theirs, 0);
      EXPECT_EQ(theirs[0], static_cast<float>(peer));
    });
  });
}

TEST(ThreadsP2p, SizeMismatchIsAnError) {
  for (bool recv_first : {true, false}) {
    within_seconds(kDeadline, [&] {
      EXPECT_THROW(run_threads(2,
                               [&](Communicator& comm) {
                                 if (comm.rank() == 0) {
                                   if (recv_first) comm.barrier();
                                   comm.send(1, std::vector<float>(3), 0);
                                   if (!recv_first) comm.barrier();
                                 } else {
                                   std::vector<float> got(4);
                                   Request r = comm.irecv(0, got, 0);
                                   comm.barrier();
                                   r.wait();
                                 }
                               }),
                   std::length_error);
    });
  }
}

TEST(ThreadsP2p, BadArgumentsAreInvalidArgument) {
  EXPECT_THROW(run_threads(0, [](Communicator&) {}), std::invalid_argument);
  run_threads(2, [](Communicator& comm) {
    std::vector<float> v(4);
    EXPECT_THROW(comm.send(2, v, 0), std::invalid_argument);
    EXPECT_THROW(comm.send(-1, v, 0), std::invalid_argument);
    EXPECT_THROW(comm.recv(0, v, -1), std::invalid_argument);
    EXPECT_THROW(comm.recv(0, v, kMaxTag + 1), std::invalid_argument);
    EXPECT_THROW(comm.broadcast(v, 5), std::invalid_argument);
    std::vector<float> small(3);
    EXPECT_THROW(comm.all_reduce(v, small), std::invalid_argument);
    EXPECT_THROW(comm.all_gather(v, v), std::invalid_argument);
    EXPECT_THROW(
        comm.all_reduce(std::span<const float>(v.data(), 3), std::span<float>(v.data() + 1, 3)),
        std::invalid_argument);
  });
}

// split (MPI_Comm_split's contract) at 1 to 8 ranks, and 5, 7 (uneven groups).
TEST(ThreadsSplit, GroupsMembersOrderAndIndependentTraffic) {
  for (const int n : {1, 2, 3, 4, 5, 7, 8})
    within_seconds(kDeadline, [&] {
      std::atomic<std::size_t> wrong{0};
      run_threads(n,
                  [&](Communicator& comm) { wrong += concurdl::dp::testing::wrong_split(comm); });
      EXPECT_EQ(wrong.load(), 0u) << n << " ranks";
    });
  EXPECT_THROW(run_threads(2, [](Communicator& comm) { (void)comm.split(-1, 0); }),
               std::invalid_argument);
}

// A rank that throws wakes the ranks waiting in a group of a split too (one that it is not in,
// and one that it is), and one that returns leaves no group member waiting for it forever.
TEST(ThreadsSplit, FailureReachesEveryGroup) {
  within_seconds(kDeadline, [&] {
    EXPECT_THROW(run_threads(4,
                             [](Communicator& comm) {
                               const auto sub = comm.split(comm.rank() % 2, comm.rank());
                               std::vector<float> buf(4);
                               if (comm.rank() == 1) throw std::runtime_error("boom");
                               if (comm.rank() == 0) sub->recv(1, buf, 0);  // 2, never sends
                               if (comm.rank() == 2) sub->barrier();
                               if (comm.rank() == 3) sub->recv(0, buf, 0);  // 1, who threw
                             }),
                 std::runtime_error);
  });
  within_seconds(kDeadline, [&] {
    EXPECT_THROW(run_threads(2,
                             [](Communicator& comm) {
                               const auto sub = comm.split(0, comm.rank());
                               std::vector<float> buf(4);
                               if (comm.rank() == 0) sub->recv(1, buf, 0);  // 1 returns
                             }),
                 std::logic_error);
  });
}

// --- failure ---------------------------------------------------------------------------------

// Rank 1 throws while rank 0 waits in recv, rank 2 in a barrier, rank 3 in a Request's wait and
// rank 4 in a native all-reduce: each of them throws PeerFailed naming rank 1 and its message,
// and run_threads rethrows rank 1's own exception, all within seconds.
TEST(ThreadsFailure, ARankThatThrowsWakesEveryOther) {
  std::mutex m;
  std::vector<std::string> peers;
  // Timed from the throw, not from before the threads start: thread start-up on a loaded machine
  // or under a sanitizer is not what is measured. A rank never woken hangs (within_seconds ends
  // the run); one woken only by a slow poll or timeout fails the bound below.
  std::chrono::steady_clock::time_point thrown{};
  within_seconds(kDeadline, [&] {
    try {
      run_threads(5, [&](Communicator& comm) {
        try {
          std::vector<float> buf(16);
          switch (comm.rank()) {
            case 1:
              std::this_thread::sleep_for(50ms);
              thrown = std::chrono::steady_clock::now();  // read after run_threads joins
              throw std::runtime_error("boom");
            case 0:
              comm.recv(1, buf, 0);
              break;
            case 2:
              comm.barrier();
              break;
            case 3: {
              Request r = comm.irecv(1, buf, 0);
              r.wait();
              break;
            }
            case 4:
              comm.all_reduce(buf);
              break;
          }
        } catch (const PeerFailed& e) {
          std::lock_guard lock(m);
          peers.emplace_back(e.what());
          throw;
        }
      });
      ADD_FAILURE() << "run_threads did not throw";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "boom");
      EXPECT_EQ(dynamic_cast<const PeerFailed*>(&e), nullptr) << "the first failure, not a peer's";
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - thrown, 10s) << "the waiting ranks woke late";
  ASSERT_EQ(peers.size(), 4u);
  for (const std::string& p : peers) EXPECT_EQ(p, "rank 1 failed: boom");
}

// A rank that returns while another waits for a message from it, or at a barrier it will never
// reach: the waiting rank throws instead of hanging.
TEST(ThreadsFailure, ARankThatReturnsEarlyIsAnErrorNotAHang) {
  within_seconds(kDeadline, [] {
    try {
      run_threads(2, [](Communicator& comm) {
        if (comm.rank() == 1) {
          float v;
          comm.recv(0, {&v, 1}, 9);
        }
      });
      ADD_FAILURE() << "run_threads did not throw";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("returned without sending"), std::string::npos)
          << e.what();
    }
    EXPECT_THROW(run_threads(3,
                             [](Communicator& comm) {
                               if (comm.rank() != 0) comm.barrier();
                             }),
                 std::logic_error);
    EXPECT_THROW(run_threads(3,
                             [](Communicator& comm) {
                               if (comm.rank() == 0) {
                                 float v;
                                 comm.recv(kAnySource, {&v, 1}, 0);
                               }
                             }),
                 std::logic_error);
  });
}

// A receive abandoned on the way out (its Request destroyed by an exception) is withdrawn: a
// later send to the same source and tag is not copied into the freed buffer, and goes to the
// next receive instead.
TEST(ThreadsFailure, AnAbandonedReceiveIsWithdrawn) {
  within_seconds(kDeadline, [] {
    run_threads(2, [](Communicator& comm) {
      if (comm.rank() == 1) {
        {
          auto doomed = std::make_unique<std::vector<float>>(4, -1.0f);
          Request r = comm.irecv(0, *doomed, 5);
        }  // abandoned: withdrawn, then the buffer is freed
        comm.barrier();
        std::vector<float> got(4);
        comm.recv(0, got, 5);
        EXPECT_EQ(got, iota(4, 10.0f));
      } else {
        comm.barrier();
        comm.send(1, iota(4, 10.0f), 5);
      }
    });
  });
}

TEST(ThreadsFailure, EveryRankThrowingReportsOne) {
  within_seconds(kDeadline, [] {
    EXPECT_THROW(run_threads(8,
                             [](Communicator& comm) {
                               throw std::out_of_range("rank " + std::to_string(comm.rank()));
                             }),
                 std::out_of_range);
  });
}

// CONCURDL_THREADS_SPIN: 0 turns the spinning off, 1 or unset leaves the rule (no more ranks than
// CPUs), anything else is an error naming the variable; the ring still sums without spinning.
TEST(ThreadsSpin, TheVariableTurnsItOffAndABadValueIsAnError) {
  const char* before = std::getenv("CONCURDL_THREADS_SPIN");
  const std::string saved = before ? before : "";
  ::unsetenv("CONCURDL_THREADS_SPIN");
  EXPECT_TRUE(threads_spin(1));
  EXPECT_FALSE(threads_spin(static_cast<int>(std::thread::hardware_concurrency()) + 1));
  ::setenv("CONCURDL_THREADS_SPIN", "1", 1);
  EXPECT_TRUE(threads_spin(1));
  ::setenv("CONCURDL_THREADS_SPIN", "0", 1);
  EXPECT_FALSE(threads_spin(1));
  within_seconds(kDeadline, [] {
    run_threads(2, [](Communicator& comm) {
      std::vector<float> v(100000, static_cast<float>(comm.rank() + 1));
      allreduce_ring(comm, v, v);
      EXPECT_EQ(v.front(), 3.0f);
      EXPECT_EQ(v.back(), 3.0f);
    });
  });
  ::setenv("CONCURDL_THREADS_SPIN", "yes", 1);
  try {
    threads_spin(1);
    ADD_FAILURE() << "no error for CONCURDL_THREADS_SPIN=yes";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CONCURDL_THREADS_SPIN: 'yes'"), std::string::npos)
        << e.what();
  }
  if (before)
    ::setenv("CONCURDL_THREADS_SPIN", saved.c_str(), 1);
  else
    ::unsetenv("CONCURDL_THREADS_SPIN");
}

}  // namespace

// The barrier, whose waiting ranks spin before they sleep where every rank has a CPU: at 1, 2, 4
// and 8 ranks (spinning at 2 on a 2-CPU machine, sleeping beyond it), with the spin on and off,
// no rank leaves round k's barrier before every rank has arrived (at least (k + 1) n arrivals
// counted) and none arrives at round k + 2 before everyone left round k (at most (k + 2) n), and
// every arrival is counted; then native all-reduces back to back, each the exact sum.
TEST(ThreadsBarrier, NoRankPassesBeforeEveryRankArrivesSpinningOrNot) {
  const char* before = std::getenv("CONCURDL_THREADS_SPIN");
  const std::string saved = before ? before : "";
  for (const char* spin : {"1", "0"}) {
    ::setenv("CONCURDL_THREADS_SPIN", spin, 1);
    for (const int ranks : {1, 2, 4, 8}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, CONCURDL_THREADS_SPIN=" + spin);
      constexpr int kRounds = 2000;
      std::atomic<long> arrivals{0}, out_of_order{0};
      within_seconds(kDeadline, [&] {
        run_threads(ranks, [&](Communicator& comm) {
          const long n = comm.size();
          for (long k = 0; k < kRounds; ++k) {
            arrivals.fetch_add(1);
            comm.barrier();
            const long seen = arrivals.load();
            if (seen < (k + 1) * n || seen > (k + 2) * n) out_of_order.fetch_add(1);
          }
          for (int k = 0; k < 200; ++k) {
            std::vector<float> v(395, static_cast<float>(comm.rank() + k));
            comm.all_reduce(v);
            const float want = static_cast<float>(n * k + n * (n - 1) / 2);
            EXPECT_EQ(v.front(), want);
            EXPECT_EQ(v.back(), want);
          }
        });
      });
      EXPECT_EQ(arrivals.load(), static_cast<long>(ranks) * kRounds);
      EXPECT_EQ(out_of_order.load(), 0);
    }
  }
  if (before)
    ::setenv("CONCURDL_THREADS_SPIN", saved.c_str(), 1);
  else
    ::unsetenv("CONCURDL_THREADS_SPIN");
}
