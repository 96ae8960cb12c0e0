// The asynchronous engine (async_engine.hpp).
#include "concurdl/df/async_engine.hpp"

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include "concurdl/core/hardware.hpp"
#include "concurdl/core/trace.hpp"

namespace concurdl::df {

namespace {

// How long a side that has nothing to do keeps looking before it sleeps: longer than the gap
// between two ops of a busy front end, shorter than keeping a core from others for long.
constexpr auto kSpin = std::chrono::microseconds(50);

// Spins (pause, then yield) until ready() or kSpin passed; says which.
template <class F>
bool spin_until(F ready) {
  const auto give_up = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 0;; ++i) {
    if (ready()) return true;
    if (i < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > give_up) return ready();
    }
  }
}

}  // namespace

AsyncEngine::AsyncEngine(kernels::GemmVersion gemm)
    : gemm_(gemm),
      chunks_(std::make_unique<std::atomic<Slot*>[]>(kMaxChunks)),
      worker_([this] { back_end(); }) {}

AsyncEngine::~AsyncEngine() {
  stopping_.store(true);
  { std::lock_guard lock(sleep_mu_); }
  work_.notify_one();
  worker_.join();  // the back end finishes the queue first
  for (std::size_t c = 0; c < chunks_made_; ++c) delete[] chunks_[c].load();
}

AsyncEngine::Slot& AsyncEngine::slot(std::size_t id) const {
  return chunks_[id >> kChunkBits].load(std::memory_order_acquire)[id & (kChunk - 1)];
}

AsyncEngine::Future AsyncEngine::issue(Node node) {
  std::size_t id = 0;
  {
    std::lock_guard lock(front_mu_);
    id = issued_.load(std::memory_order_relaxed);
    for (const NodeId i : node.inputs)
      if (i >= id)
        throw std::invalid_argument(fmt::format("'{}': input {} not issued", node.name, i));
    if (id >> kChunkBits >= kMaxChunks)
      throw std::length_error(fmt::format("AsyncEngine: more than {} ops", kMaxChunks * kChunk));
    if ((id >> kChunkBits) == chunks_made_) {  // kept across reset(): made once
      chunks_[chunks_made_].store(new Slot[kChunk], std::memory_order_release);
      ++chunks_made_;
    }
    if (node.name.empty()) node.name = fmt::format("{} {}", op_name(node.op), id);
    Slot& s = slot(id);  // after a reset, a slot used before: its value's buffer is reused
    s.node = std::move(node);
    s.error = nullptr;
    issued_.store(id + 1);  // seq_cst: then read whether the back end sleeps
  }
  if (back_end_sleeps_.load()) {
    { std::lock_guard lock(sleep_mu_); }
    work_.notify_one();
  }
  return Future(this, id);
}

AsyncEngine::Future AsyncEngine::input(Tensor t) {
  Node n;
  n.op = Op::input;
  n.constant = std::move(t);
  return issue(std::move(n));
}

AsyncEngine::Future AsyncEngine::variable(std::size_t rows, std::size_t cols, const float* data) {
  if (data == nullptr) throw std::invalid_argument("AsyncEngine::variable: no data");
  Node n;
  n.op = Op::variable;
  n.constant.rows = rows;
  n.constant.cols = cols;
  n.external = data;
  return issue(std::move(n));
}

AsyncEngine::Future AsyncEngine::op(Op op, std::vector<Future> inputs, float alpha) {
  if (op == Op::input || op == Op::variable || op == Op::fused || op == Op::custom)
    throw std::invalid_argument(fmt::format("AsyncEngine::op: {} has its own call", op_name(op)));
  Node n;
  n.op = op;
  n.alpha = alpha;
  for (const Future& f : inputs) {
    if (f.engine_ != this)
      throw std::invalid_argument(fmt::format("{}: an input from another engine", op_name(op)));
    n.inputs.push_back(f.id_);
  }
  return issue(std::move(n));
}

AsyncEngine::Future AsyncEngine::custom(std::string name, std::vector<Future> inputs,
                                        std::function<Tensor(std::span<const Tensor* const>)> fn) {
  Node n;
  n.op = Op::custom;
  n.name = std::move(name);
  n.fn = std::move(fn);
  for (const Future& f : inputs) {
    if (f.engine_ != this)
      throw std::invalid_argument(fmt::format("{}: an input from another engine", n.name));
    n.inputs.push_back(f.id_);
  }
  return issue(std::move(n));
}

void AsyncEngine::back_end() {
  std::vector<const Tensor*> in;
  for (;;) {
    // done_ before issued_: reset() stores issued_ = 0 before done_ = 0, so a back end that
    // reads the new done_ reads the new issued_ too, and never runs a slot twice.
    std::size_t next = 0;
    const auto queued = [&] {
      next = done_.load();
      return issued_.load() > next || stopping_.load();
    };
    if (!spin_until(queued)) {
      std::unique_lock lock(sleep_mu_);
      back_end_sleeps_.store(true);  // then re-read issued_ (in queued): see the members
      work_.wait(lock, queued);
      back_end_sleeps_.store(false);
    }
    if (issued_.load() == next) return;  // stopping, and nothing left
    Slot& s = slot(next);
    in.clear();
    for (const NodeId i : s.node.inputs) {
      const Slot& from = slot(i);
      if (from.error && !s.error) s.error = from.error;  // a failed input fails the op
      in.push_back(&from.value);
    }
    if (!s.error) {
      try {
        trace::Span span(trace::recording() ? s.node.name : std::string(), op_name(s.node.op));
        evaluate_node(s.node, gemm_, in, s.value);
      } catch (...) {
        s.error = std::current_exception();
      }
    }
    done_.store(next + 1);  // seq_cst: then read whether anyone waits
    if (waiters_.load() > 0) {
      { std::lock_guard lock(sleep_mu_); }
      ran_.notify_all();
    }
  }
}

void AsyncEngine::wait_for(std::size_t id) const {
  if (id >= issued_.load()) throw std::invalid_argument(fmt::format("no op {}", id));
  const auto ran = [&] { return done_.load() > id; };
  if (spin_until(ran)) return;
  std::unique_lock lock(sleep_mu_);
  waiters_.fetch_add(1);  // then re-read done_ (in ran)
  ran_.wait(lock, ran);
  waiters_.fetch_sub(1);
}

void AsyncEngine::Future::wait() const {
  if (engine_ == nullptr) throw std::logic_error("AsyncEngine::Future: empty");
  engine_->wait_for(id_);
  const Slot& s = engine_->slot(id_);  // done_ (acquire) passed it: its value and error are final
  if (s.error) std::rethrow_exception(s.error);
}

const Tensor& AsyncEngine::Future::value() const {
  wait();
  return engine_->slot(id_).value;
}

bool AsyncEngine::Future::ready() const {
  return engine_ != nullptr && engine_->done_.load() > id_;
}

void AsyncEngine::wait_all() {
  std::lock_guard lock(front_mu_);
  const std::size_t upto = issued_.load();
  if (upto == 0) return;
  wait_for(upto - 1);
  std::exception_ptr first;
  for (std::size_t i = reported_; i < upto && !first; ++i)
    if (slot(i).error) first = slot(i).error;
  reported_ = upto;
  if (first) std::rethrow_exception(first);
}

std::size_t AsyncEngine::issued() const { return issued_.load(); }

void AsyncEngine::reset() {
  std::lock_guard lock(front_mu_);
  const std::size_t upto = issued_.load();
  if (upto > 0) wait_for(upto - 1);
  // The back end has run everything and only reads the counts now.
  issued_.store(0);
  done_.store(0);
  reported_ = 0;
}

}  // namespace concurdl::df
