// An asynchronous engine, as MXNet's (and D2L's "asynchronous computation") front end works and
// as a CUDA stream does: an op call only records the op and queues it for a back-end thread,
// returning a Future at once; the back end runs the ops in the order they were issued (each op
// names only ops issued before it, so that order respects every dependency); wait() and value()
// are the only points where the front end waits for the back end.
//
//   AsyncEngine e;
//   auto x = e.input(Tensor::filled(64, 64, 1.0f));
//   auto w = e.input(Tensor::filled(64, 64, 0.5f));
//   auto y = e.relu(e.matmul(x, w));    // returns at once: nothing has necessarily run yet
//   const Tensor& v = y.value();         // waits for y (and so for everything before it)
//
// A front end that spends time per op (an interpreter deciding what to call: Python's, in a
// framework) then overlaps with the kernels: with the front end's cost o and the kernel's c per
// op, N ops take about N (o + c) eagerly and about N max(o, c) asynchronously.
//
// An op that throws fails its Future and every Future computed from it: value() rethrows the
// exception (the first op's), wait_all() rethrows it, and the engine goes on with the ops that
// do not depend on it. The destructor runs what is queued, then joins the back end.
//
// Threads: one front-end thread issues ops, waits and resets; any thread may wait on a Future.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "concurdl/df/graph.hpp"

namespace concurdl::df {

class AsyncEngine {
 public:
  class Future {
   public:
    Future() = default;
    // Blocks until the op ran; rethrows what it (or an op it depends on) threw.
    void wait() const;
    // The op's value, after wait(): valid as long as the engine.
    const Tensor& value() const;
    bool ready() const;  // ran (or failed) already: does not wait
    std::size_t id() const { return id_; }

   private:
    friend class AsyncEngine;
    Future(AsyncEngine* e, std::size_t id) : engine_(e), id_(id) {}
    AsyncEngine* engine_ = nullptr;
    std::size_t id_ = 0;
  };

  explicit AsyncEngine(kernels::GemmVersion gemm = kernels::GemmVersion::openblas);
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  Future input(Tensor t);
  // A value read from `data` (rows x cols floats) when the op runs, not copied at the call:
  // parameters, a batch. The memory must hold it until the op ran.
  Future variable(std::size_t rows, std::size_t cols, const float* data);
  // Any op of graph.hpp but input, fused and custom (std::invalid_argument), on Futures of this
  // engine (else std::invalid_argument).
  Future op(Op op, std::vector<Future> inputs, float alpha = 0);
  Future matmul(Future a, Future b) { return op(Op::matmul, {a, b}); }
  Future add(Future a, Future b) { return op(Op::add, {a, b}); }
  Future relu(Future a) { return op(Op::relu, {a}); }
  Future scale(Future a, float alpha) { return op(Op::scale, {a}, alpha); }
  // An op the tests need: any function of the inputs (one that throws, one that sleeps).
  Future custom(std::string name, std::vector<Future> inputs,
                std::function<Tensor(std::span<const Tensor* const>)> fn);

  // Waits for every op issued so far; rethrows the first exception an op threw since the last
  // wait_all() (and forgets it).
  void wait_all();
  std::size_t issued() const;
  // Waits for every op, then forgets them all (their Futures must not be used again; failures
  // not yet reported by wait_all() are dropped) and keeps their buffers for the next ops: an
  // engine reset between steps allocates nothing once it has seen a step, which is what a
  // framework's caching allocator buys it (fresh buffers fault in pages, microseconds each).
  void reset();

 private:
  struct Slot {
    Node node;
    Tensor value;
    std::exception_ptr error;  // the op's, or the first failed input's
  };
  // Slots live in chunks that never move: the front end appends while the back end reads
  // earlier slots, without a lock between them. Chunk c holds slots [c K, (c + 1) K).
  static constexpr std::size_t kChunkBits = 12, kChunk = std::size_t{1} << kChunkBits;
  static constexpr std::size_t kMaxChunks = 4096;  // 16M ops per engine
  Future issue(Node node);
  void back_end();
  void wait_for(std::size_t id) const;
  Slot& slot(std::size_t id) const;

  kernels::GemmVersion gemm_;
  std::unique_ptr<std::atomic<Slot*>[]> chunks_;
  // The handshake, without a lock while both sides are busy. The front end fills slot i, then
  // publishes issued_ = i + 1 (release); the back end reads issued_ (acquire), runs slot
  // done_, then publishes done_ + 1 (release), after which waiters read the slot's value and
  // error. Each side spins briefly before it sleeps; the other wakes it only when it sleeps
  // (seq_cst on the flags and counts: a sleeper publishes that it sleeps, then re-reads the
  // count; a publisher publishes the count, then reads the flag; one of them sees the other).
  std::atomic<std::size_t> issued_{0};
  std::atomic<std::size_t> done_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> back_end_sleeps_{false};
  mutable std::atomic<int> waiters_{0};
  mutable std::mutex sleep_mu_;
  mutable std::condition_variable work_;  // the back end sleeps here
  mutable std::condition_variable ran_;   // waiters sleep here
  std::mutex front_mu_;                   // issue() and wait_all() among front-end threads
  std::size_t reported_ = 0;              // guarded by front_mu_
  std::size_t chunks_made_ = 0;           // guarded by front_mu_
  std::thread worker_;                    // last: started after everything it reads exists
};

}  // namespace concurdl::df
