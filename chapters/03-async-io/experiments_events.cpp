// Asynchrony beyond files.
//   ch03/fan_in         one producer writes into N pipes; the consumer is N threads blocked in
//                       read (one per pipe), one thread with epoll (readiness: "fd 7 is
//                       readable", then read it), or one thread with io_uring (completion: a
//                       read per pipe always in flight, "4096 bytes arrived in your buffer").
//   ch03/continuations  K steps, each completed on another thread: blocking get() per step
//                       (a round trip between two threads), std::async + get per step (a thread
//                       per pending step), and Future::then (the continuation runs on the
//                       completing thread: no hand-back, nobody blocked).
// Both check every byte / every step.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/async_io/event_loop.hpp"
#include "concurdl/async_io/future.hpp"
#include "concurdl/async_io/uring.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/harness/experiment.hpp"

namespace {

using namespace concurdl;
using namespace concurdl::async_io;

// ---- ch03/fan_in ----

struct Pipes {
  std::vector<UniqueFd> rd, wr;
  std::vector<std::uint64_t> got, sum;
  std::string error;
};

void make_pipes(Pipes& p, std::size_t n) {
  p.rd.clear();
  p.wr.clear();
  for (std::size_t i = 0; i < n; ++i) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2 (too many open files?)");
    p.rd.emplace_back(fds[0]);
    p.wr.emplace_back(fds[1]);
  }
  p.got.assign(n, 0);
  p.sum.assign(n, 0);
}

std::uint8_t pipe_byte(std::size_t i) { return static_cast<std::uint8_t>(i * 37 + 11); }

void count(Pipes& p, std::size_t i, const std::uint8_t* buf, std::size_t n) {
  p.got[i] += n;
  std::uint64_t s = 0;
  for (std::size_t k = 0; k < n; ++k) s += buf[k];
  p.sum[i] += s;
}

// Round-robin, `message` bytes at a time, blocking writes; closes each pipe when done.
void produce(Pipes& p, std::uint64_t per_pipe, std::size_t message) {
  const std::size_t n = p.wr.size();
  std::vector<std::vector<std::uint8_t>> msg(n);
  for (std::size_t i = 0; i < n; ++i) msg[i].assign(message, pipe_byte(i));
  for (std::uint64_t at = 0; at < per_pipe; at += message)
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t len =
          static_cast<std::size_t>(std::min<std::uint64_t>(message, per_pipe - at));
      for (std::size_t w = 0; w < len;) {
        const ssize_t r = ::write(p.wr[i].get(), msg[i].data() + w, len - w);
        if (r < 0) {
          if (errno == EINTR) continue;
          throw std::system_error(errno, std::generic_category(), "write to pipe");
        }
        w += static_cast<std::size_t>(r);
      }
    }
  for (auto& w : p.wr) w.reset();
}

constexpr std::size_t kReadChunk = 64 * 1024;

void consume_threads(Pipes& p) {
  std::vector<std::jthread> readers;
  for (std::size_t i = 0; i < p.rd.size(); ++i)
    readers.emplace_back([&p, i] {
      std::vector<std::uint8_t> buf(kReadChunk);
      while (true) {
        const ssize_t r = ::read(p.rd[i].get(), buf.data(), buf.size());
        if (r > 0)
          count(p, i, buf.data(), static_cast<std::size_t>(r));
        else if (r == 0 || errno != EINTR)
          break;
      }
    });
}

void consume_epoll(Pipes& p) {
  EventLoop loop;
  std::vector<std::uint8_t> buf(kReadChunk);
  for (std::size_t i = 0; i < p.rd.size(); ++i) {
    set_nonblocking(p.rd[i].get());
    loop.add(p.rd[i].get(), [&, i](int fd) {
      while (true) {  // readiness: read until the pipe is empty (EAGAIN)
        const ssize_t r = ::read(fd, buf.data(), buf.size());
        if (r > 0) {
          count(p, i, buf.data(), static_cast<std::size_t>(r));
          continue;
        }
        if (r == 0) loop.remove(fd);  // writer closed
        break;
      }
    });
  }
  loop.run();
}

#if CONCURDL_HAVE_URING
void consume_uring(Pipes& p) {
  const std::size_t n = p.rd.size();
  Ring ring(static_cast<unsigned>(std::min<std::size_t>(n, 4096)));
  std::vector<std::uint8_t> bufs(n * kReadChunk);
  std::size_t open = n, queued = 0;
  std::vector<std::size_t> to_submit;
  for (std::size_t i = 0; i < n; ++i) to_submit.push_back(i);
  io_uring* r = ring.get();
  while (open > 0) {
    // Completion model: a read per open pipe is always in flight; the kernel fills the buffer
    // and tells us how much arrived.
    for (std::size_t k = 0; k < to_submit.size();) {
      io_uring_sqe* sqe = io_uring_get_sqe(r);
      if (sqe == nullptr) {
        io_uring_submit(r);
        continue;
      }
      const std::size_t i = to_submit[k++];
      io_uring_prep_read(sqe, p.rd[i].get(), bufs.data() + i * kReadChunk, kReadChunk, 0);
      io_uring_sqe_set_data64(sqe, i);
      ++queued;
    }
    to_submit.clear();
    if (const int s = io_uring_submit_and_wait(r, 1); s < 0 && s != -EINTR)
      throw std::system_error(-s, std::generic_category(), "io_uring_submit_and_wait");
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(r, head, cqe) {
      ++seen;
      --queued;
      const auto i = static_cast<std::size_t>(io_uring_cqe_get_data64(cqe));
      if (cqe->res > 0) {
        count(p, i, bufs.data() + i * kReadChunk, static_cast<std::size_t>(cqe->res));
        to_submit.push_back(i);
      } else if (cqe->res == 0) {
        --open;  // writer closed
      } else if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
        to_submit.push_back(i);
      } else {
        p.error = fmt::format("io_uring read of pipe {}: {}", i, std::strerror(-cqe->res));
        --open;
      }
    }
    io_uring_cq_advance(r, seen);
  }
}
#else
void consume_uring(Pipes&) { throw std::runtime_error(capability_missing(Capability::uring)); }
#endif

struct Consumer : VariantInfo {
  void (*consume)(Pipes& p);
};

const Consumer kConsumerRows[] = {
    {{"threads",
      "a thread per pipe, each blocked in read(): blocking I/O, N stacks and N sleeping threads"},
     consume_threads},
    {{"epoll",
      "one thread told which pipes are readable (readiness), then reading each until EAGAIN: "
      "the event loop of libuv, asyncio, Netty"},
     consume_epoll},
    {{"uring",
      "one thread with a read per pipe always in flight on io_uring; the kernel says how many "
      "bytes arrived (completion)",
      Capability::uring},
     consume_uring},
};
const VariantTable kConsumers{kConsumerRows};

Trial fan_in_trial(const Params& params, GroupCache&) {
  void (*consume)(Pipes&) = kConsumers.find(params).consume;
  const auto n = static_cast<std::size_t>(param_int(params, "pipes"));
  const auto total = static_cast<std::uint64_t>(param_int(params, "bytes"));
  const auto message = static_cast<std::size_t>(param_int(params, "message"));
  const std::uint64_t per_pipe = total / n;
  auto p = std::make_shared<Pipes>();
  Trial t;
  t.reset = [p, n] { make_pipes(*p, n); };
  t.run = [p, consume, per_pipe, message] {
    std::exception_ptr producer_error;
    std::thread producer([&] {
      try {
        produce(*p, per_pipe, message);
      } catch (...) {
        producer_error = std::current_exception();
        for (auto& w : p->wr) w.reset();  // let the consumer see the end
      }
    });
    try {
      consume(*p);
    } catch (...) {
      p->rd.clear();  // the producer's blocked writes fail with EPIPE instead of hanging
      producer.join();
      throw;
    }
    producer.join();
    if (producer_error) std::rethrow_exception(producer_error);
  };
  t.check = [p, per_pipe] {
    if (!p->error.empty()) return p->error;
    for (std::size_t i = 0; i < p->got.size(); ++i)
      if (p->got[i] != per_pipe || p->sum[i] != per_pipe * pipe_byte(i))
        return fmt::format("pipe {}: {} bytes read (sum {}), {} written (sum {})", i, p->got[i],
                           p->sum[i], per_pipe, per_pipe * pipe_byte(i));
    return std::string();
  };
  t.work = {.items = static_cast<double>(n * ((per_pipe + message - 1) / message)),
            .bytes = static_cast<double>(n * per_pipe)};
  return t;
}

// ---- ch03/continuations ----

// One thread running posted jobs in order: the "I/O thread" that completes operations.
class SerialExecutor {
 public:
  SerialExecutor() : thread_([this] { loop(); }) {}
  ~SerialExecutor() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

// The work of one step: 3v + 1 modulo 2^32, in unsigned arithmetic (signed overflow would be
// undefined behaviour, which UBSan reports), read back as an int.
int step(int v) { return static_cast<int>(static_cast<std::uint32_t>(v) * 3U + 1U); }

// A chain of `steps` dependent steps, run to the end; the result is the last step's value.
using ChainFn = int (*)(SerialExecutor& io, int steps);

struct ContinuationVariant : VariantInfo {
  ChainFn run;
};

const ContinuationVariant kContinuationRows[] = {
    {{"blocking_get",
      "each step posted to the I/O thread, then std::future::get() blocks until it is done: "
      "two thread switches per step"},
     [](SerialExecutor& io, int steps) {
       int v = 0;
       for (int i = 0; i < steps; ++i) {
         // The job owns the promise: set_value may still be returning when get() wakes here.
         auto p = std::make_shared<std::promise<int>>();
         std::future<int> f = p->get_future();
         io.post([p, v] { p->set_value(step(v)); });
         v = f.get();
       }
       return v;
     }},
    {{"std_async",
      "the only continuation std::future has: std::async blocking on the previous step, a "
      "thread per pending step"},
     [](SerialExecutor&, int steps) {
       std::promise<int> first;
       std::future<int> f = first.get_future();
       for (int i = 0; i < steps; ++i) f = blocking_then(std::move(f), step);
       first.set_value(0);
       return f.get();
     }},
    {{"continuation",
      "Future::then: the chain attached up front, and the thread that completes a step runs the "
      "next; nobody blocks until the last get()"},
     [](SerialExecutor& io, int steps) {
       Promise<int> first;
       Future<int> f = first.get_future();
       for (int i = 0; i < steps; ++i) f = std::move(f).then(step);
       io.post([first]() mutable { first.set_value(0); });
       return f.get();
     }},
};
const VariantTable kContinuations{kContinuationRows};

Trial continuations_trial(const Params& params, GroupCache&) {
  const ChainFn chain = kContinuations.find(params).run;
  const auto steps = static_cast<int>(param_int(params, "steps"));
  int expected = 0;
  for (int i = 0; i < steps; ++i)
    expected = static_cast<int>(static_cast<unsigned>(step(expected)));
  auto result = std::make_shared<int>(-1);
  auto io = std::make_shared<SerialExecutor>();
  Trial t;
  t.reset = [result] { *result = -1; };
  t.run = [io, result, chain, steps] { *result = chain(*io, steps); };
  t.check = [result, expected] {
    return *result == expected ? std::string()
                               : fmt::format("chain gave {}, expected {}", *result, expected);
  };
  t.work = {.items = static_cast<double>(steps)};
  return t;
}

const bool registered = [] {
  register_experiment({
      .id = "ch03/fan_in",
      .chapter = "03-async-io",
      .title = "Reading N pipes: a thread per pipe (blocking), epoll (readiness), io_uring "
               "(completion)",
      .axes = {kConsumers.axis("ch03/fan_in"),
               // The threads row reads each pipe on a thread of its own.
               {"pipes", {"1", "4", "16", "64", "256"}, {"4", "64"}, AxisKind::count, kMaxThreads},
               // Streamed, never held: 64 GiB take about a minute at pipe speeds.
               {"bytes", {"64M"}, {"16M"}, AxisKind::size, std::int64_t{1} << 36},
               // The producer holds one message per pipe; a pipe buffers 64 KiB, so larger
               // writes are only split by the kernel.
               {"message", {"4K"}, {}, AxisKind::size, std::int64_t{1} << 20}},
      .baseline = {{"variant", "threads"}},
      .interleave = {"variant", "pipes"},
      .prepare = fan_in_trial,
      .figures = {{.id = "rate",
                   .title = "Messages/s vs pipes: blocking threads, epoll, io_uring",
                   .kind = FigureKind::lines,
                   .x = "pipes",
                   .y = "items_per_s",
                   .series = "variant",
                   .log_x = true,
                   .y_label = "messages/s"}},
      .claims = {{.id = "epoll_beats_thread_per_pipe",
                  // A magnitude: the threads' wake-ups against one thread's loop: it falls with the
                  // cores (4.3x on 2 vCPUs, 1.65x on 16).
                  .statement = "How many times as fast one epoll thread reads 64 pipes as a thread "
                               "blocked in read() on each",
                  .select = {{"variant", "epoll"}, {"pipes", "64"}},
                  .versus = {{"variant", "threads"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::wakeup_latency, ClaimCause::cores_and_smt},
                  .unit = "×"}},
  });

  register_experiment({
      .id = "ch03/continuations",
      .chapter = "03-async-io",
      .title = "K dependent asynchronous steps: blocking get, std::async per step, Future::then",
      .axes = {kContinuations.axis("ch03/continuations"),
               // std_async holds a thread per step, all pending at once.
               {"steps", {"1000"}, {"500"}, AxisKind::count, kMaxThreads}},
      .baseline = {{"variant", "blocking_get"}},
      .prepare = continuations_trial,
      .figures = {{.id = "rate",
                   .title = "Steps per second (1e9 / rate = ns per step)",
                   .kind = FigureKind::bars,
                   .x = "variant",
                   .y = "items_per_s",
                   .series = "steps",
                   .log_y = true,
                   .y_label = "steps/s (log)"}},
      .claims = {{.id = "continuations_beat_blocking",
                  // A magnitude: each machine's wake-up latency against a function call (8.5-145x
                  // on the committed guests).
                  .statement = "How many times as fast a Future::then chain, where the thread that "
                               "completes a step runs the next, does dependent steps as blocking "
                               "on each step's std::future::get()",
                  .select = {{"variant", "continuation"}},
                  .versus = {{"variant", "blocking_get"}},
                  .kind = Claim::Kind::magnitude,
                  .causes = {ClaimCause::wakeup_latency},
                  .unit = "×"}},
  });
  return true;
}();

}  // namespace
