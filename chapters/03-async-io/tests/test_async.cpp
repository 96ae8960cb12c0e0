// Asynchrony beyond files: futures with continuations (future.hpp) and the epoll event loop
// (event_loop.hpp). A continuation runs on the thread that sets the value, exceptions skip the
// continuations after them, and the event loop reads every byte written into many pipes.
//   ch03_tests --gtest_filter='Future*:EventLoop*'
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/async_io/event_loop.hpp"
#include "concurdl/async_io/future.hpp"
#include "concurdl/core/testing.hpp"

namespace {

using namespace concurdl::async_io;
using concurdl::testing::within_seconds;

TEST(Future, ThenRunsOnTheThreadThatSetsTheValue) {
  within_seconds(20, [] {
    Promise<int> p;
    std::thread::id ran_on;
    Future<std::string> f = p.get_future().then([&](int v) {
      ran_on = std::this_thread::get_id();
      return std::to_string(v * 2);
    });
    std::thread::id setter;
    std::thread t([&] {
      setter = std::this_thread::get_id();
      p.set_value(21);
    });
    EXPECT_EQ(f.get(), "42");
    t.join();
    EXPECT_EQ(ran_on, setter);
  });
}

TEST(Future, ThenOnAReadyFutureRunsNow) {
  std::thread::id ran_on;
  Future<int> f = make_ready_future(1).then([&](int v) {
    ran_on = std::this_thread::get_id();
    return v + 1;
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(f.get(), 2);
}

TEST(Future, ChainsAndExceptionsSkipTheRest) {
  within_seconds(20, [] {
    Promise<int> p;
    std::atomic<int> calls{0};
    Future<int> f = p.get_future()
                        .then([&](int v) {
                          ++calls;
                          if (v > 0) throw std::runtime_error("step 1 failed");
                          return v;
                        })
                        .then([&](int v) {
                          ++calls;  // skipped
                          return v;
                        });
    std::thread t([&] { p.set_value(5); });
    EXPECT_THROW(f.get(), std::runtime_error);
    t.join();
    EXPECT_EQ(calls.load(), 1);

    Promise<int> q;
    Future<int> g = q.get_future().then([](int v) { return v; });
    q.set_exception(std::make_exception_ptr(std::logic_error("no value")));
    EXPECT_THROW(g.get(), std::logic_error);
  });
}

TEST(Future, LongChainRunsOnTheSettingThread) {
  within_seconds(20, [] {
    // 1000 continuations attached before the value exists; one set_value on another thread
    // runs them all there, one after another, and nobody blocks until the final get().
    Promise<int> p;
    Future<int> tail = p.get_future();
    for (int i = 0; i < 1000; ++i) tail = std::move(tail).then([](int v) { return v + 1; });
    std::thread setter([&] { p.set_value(7); });
    EXPECT_EQ(tail.get(), 1007);
    setter.join();
  });
}

TEST(Future, SetTwiceAndConsumedFutureAreErrors) {
  Promise<int> p;
  Future<int> f = p.get_future();
  p.set_value(1);
  EXPECT_THROW(p.set_value(2), std::logic_error);
  EXPECT_EQ(f.get(), 1);
  EXPECT_FALSE(f.valid());
  EXPECT_THROW(f.get(), std::logic_error);
}

TEST(Future, BlockingThenForStdFuture) {
  std::promise<int> p;
  std::future<int> f = blocking_then(p.get_future(), [](int v) { return v * 3; });
  p.set_value(5);
  EXPECT_EQ(f.get(), 15);
}

TEST(EventLoop, ReadsEveryByteFromManyPipes) {
  within_seconds(30, [] {
    constexpr int kPipes = 16;
    constexpr std::size_t kBytes = 300'000;  // per pipe: several times a pipe's buffer
    std::vector<int> rd(kPipes), wr(kPipes);
    for (int i = 0; i < kPipes; ++i) {
      int fds[2];
      ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
      rd[i] = fds[0];
      wr[i] = fds[1];
      set_nonblocking(rd[i]);
    }
    std::vector<std::size_t> got(kPipes, 0);
    std::vector<std::uint64_t> sum(kPipes, 0);
    EventLoop loop;
    for (int i = 0; i < kPipes; ++i)
      loop.add(rd[i], [&, i](int fd) {
        char buf[8192];
        while (true) {
          const ssize_t r = ::read(fd, buf, sizeof buf);
          if (r > 0) {
            got[i] += static_cast<std::size_t>(r);
            for (ssize_t k = 0; k < r; ++k) sum[i] += static_cast<unsigned char>(buf[k]);
            continue;
          }
          if (r == 0) loop.remove(fd);  // the writer closed: done with this pipe
          break;                        // EAGAIN: nothing more for now
        }
      });
    std::thread writer([&] {
      std::vector<char> chunk(1000);
      for (std::size_t at = 0; at < kBytes; at += chunk.size())
        for (int i = 0; i < kPipes; ++i) {
          std::fill(chunk.begin(), chunk.end(), static_cast<char>(i + 1));
          for (std::size_t w = 0; w < chunk.size();) {
            const ssize_t r = ::write(wr[i], chunk.data() + w, chunk.size() - w);
            ASSERT_GT(r, 0);
            w += static_cast<std::size_t>(r);
          }
        }
      for (int fd : wr) ::close(fd);
    });
    const std::size_t calls = loop.run();
    writer.join();
    EXPECT_GT(calls, 0u);
    for (int i = 0; i < kPipes; ++i) {
      EXPECT_EQ(got[i], kBytes) << "pipe " << i;
      EXPECT_EQ(sum[i], kBytes * static_cast<std::uint64_t>(i + 1)) << "pipe " << i;
      ::close(rd[i]);
    }
  });
}

TEST(EventLoop, StopFromAnotherThread) {
  within_seconds(20, [] {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    EventLoop loop;
    loop.add(fds[0], [](int) {});
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      loop.stop();
    });
    EXPECT_EQ(loop.run(), 0u);  // nothing was ever readable; stop() ended the wait
    stopper.join();
    ::close(fds[0]);
    ::close(fds[1]);
  });
}

}  // namespace
