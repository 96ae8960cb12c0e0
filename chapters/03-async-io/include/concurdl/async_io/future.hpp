// Futures with continuations. std::future has get() and wait() but no then(): to act on a
// result somebody must block on it, a thread per outstanding operation. A continuation instead
// runs when the value arrives, on the thread that provides it (the I/O thread, the event
// loop), and nobody waits: the model of folly::Future, seastar, the Concurrency TS's
// future::then and JavaScript's promises.
//
//   Promise<int> p;
//   Future<std::string> f = p.get_future().then([](int n) { return std::to_string(n); });
//   io_thread_does([p]() mutable { p.set_value(42); });   // runs the lambda above, there
//   f.get();                                              // "42" (get blocks; then does not)
//
// An exception (set_exception, or thrown by a continuation) skips the continuations after it
// and comes out of get(). A future has at most one continuation: then() consumes it.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace concurdl::async_io {

template <class T>
class Future;

namespace detail {

template <class T>
struct FutureState {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<T> value;
  std::exception_ptr error;
  bool ready = false;
  std::function<void()> continuation;  // set by then(); run once by whoever makes the state ready

  template <class Set>
  void complete(Set set) {
    std::function<void()> run;
    {
      std::lock_guard lock(mu);
      if (ready) throw std::logic_error("Promise: value or exception set twice");
      set();
      ready = true;
      run = std::move(continuation);
    }
    cv.notify_all();
    if (run) run();  // outside the lock: the continuation may take long, or set other promises
  }
};

}  // namespace detail

template <class T>
class Promise {
  static_assert(!std::is_void_v<T> && !std::is_reference_v<T>, "Promise<T>: T must be a value");

 public:
  Promise() : s_(std::make_shared<detail::FutureState<T>>()) {}
  Future<T> get_future() { return Future<T>(s_); }
  // Runs the continuation, if one is attached, on this thread before returning.
  void set_value(T v) {
    s_->complete([&] { s_->value.emplace(std::move(v)); });
  }
  void set_exception(std::exception_ptr e) {
    s_->complete([&] { s_->error = std::move(e); });
  }

 private:
  std::shared_ptr<detail::FutureState<T>> s_;
};

template <class T>
class Future {
 public:
  Future() = default;
  bool valid() const { return s_ != nullptr; }
  bool ready() const {
    std::lock_guard lock(s_->mu);
    return s_->ready;
  }

  // Blocks until the value is there; rethrows an exception. Consumes the future.
  T get() {
    auto s = take();
    std::unique_lock lock(s->mu);
    s->cv.wait(lock, [&] { return s->ready; });
    if (s->error) std::rethrow_exception(s->error);
    return std::move(*s->value);
  }

  // f(T) -> R, run when the value arrives, on the thread that sets it (now, on this thread, if
  // it is already there). Returns the future of f's result. Consumes this future.
  template <class F>
  auto then(F f) -> Future<std::invoke_result_t<F, T>> {
    using R = std::invoke_result_t<F, T>;
    static_assert(!std::is_void_v<R>, "then(f): f must return a value");
    auto s = take();
    Promise<R> next;
    Future<R> result = next.get_future();
    // std::function needs a copyable callable: hold f by shared_ptr.
    auto fn = std::make_shared<F>(std::move(f));
    auto run = [s, fn, next]() mutable {
      if (s->error) {
        next.set_exception(s->error);
        return;
      }
      std::optional<R> r;
      try {
        r.emplace((*fn)(std::move(*s->value)));
      } catch (...) {
        next.set_exception(std::current_exception());
        return;
      }
      next.set_value(std::move(*r));
    };
    std::unique_lock lock(s->mu);
    if (s->ready) {
      lock.unlock();
      run();
    } else {
      s->continuation = std::move(run);
    }
    return result;
  }

 private:
  template <class>
  friend class Promise;
  explicit Future(std::shared_ptr<detail::FutureState<T>> s) : s_(std::move(s)) {}
  std::shared_ptr<detail::FutureState<T>> take() {
    if (!s_) throw std::logic_error("Future: no state (default-constructed or already consumed)");
    return std::move(s_);
  }

  std::shared_ptr<detail::FutureState<T>> s_;
};

template <class T>
Future<T> make_ready_future(T v) {
  Promise<T> p;
  Future<T> f = p.get_future();
  p.set_value(std::move(v));
  return f;
}

// The only then() std::future allows: a thread that blocks in get() and then calls f. Every
// pending continuation costs a whole thread; the contrast the experiment ch03/continuations
// measures.
template <class T, class F>
auto blocking_then(std::future<T> fut, F f) -> std::future<std::invoke_result_t<F, T>> {
  return std::async(std::launch::async,
                    [fut = std::move(fut), f = std::move(f)]() mutable { return f(fut.get()); });
}

}  // namespace concurdl::async_io
