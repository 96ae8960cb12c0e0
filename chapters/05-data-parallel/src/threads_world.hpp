// The threads backend's shared state (threads_backend.cpp): each rank's inbox of posted receives
// and early messages, and the World of a communicator's ranks (their barrier, published buffers
// and the failure flag that wakes every waiting rank). Private to the backend.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp::threads_detail {

inline std::string tag_text(int src, int tag) {
  return (src == kAnySource ? std::string("any rank") : "rank " + std::to_string(src)) + " tag " +
         std::to_string(tag);
}

// A receive waiting for its message. The sender that matches it copies into `buf` outside the
// inbox lock (state copying), then marks it done; nobody else touches `buf` meanwhile. A
// reducing receive (irecv_reduce) has the sender add into `buf` instead of copying: the
// message goes from the sender's buffer into the sum in one pass, with no scratch in between.
struct RecvSlot {
  enum class State { posted, copying, done };
  int src;
  int tag;
  std::span<float> buf;
  bool reduce = false;
  // irecv_add out of place: buf = addend + message (addend is `in`, buf is `out`).
  const float* addend = nullptr;
  // irecv_combine: buf = combine(buf, message) instead of the sum.
  Combine combine;
  State state = State::posted;
  int from = -1;  // the sender, once matched
  // Set (release) right after `state` becomes done, so the receiver may spin on it for a few
  // microseconds before it sleeps on the inbox's condition variable.
  std::atomic<bool> complete{false};
};

// A message that arrived before its receive was posted.
struct Message {
  int src;
  int tag;
  std::vector<float> data;
};

struct alignas(64) Inbox {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::shared_ptr<RecvSlot>> posted;  // in posting order
  std::deque<Message> buffered;                  // in arrival order
  std::vector<std::vector<float>> pool;          // buffers of delivered messages, for reuse
};

// The ranks of one communicator. run_threads makes the root one; split makes a child for each
// colour, whose ranks are some of its parent's (members_: child rank -> parent rank). A child
// shares its root's fate: it has failed when the root has, a member has finished when that
// parent rank has, and the root wakes its children's waiters whenever it wakes its own.
class World {
 public:
  explicit World(int n, World* parent = nullptr, std::vector<int> members = {})
      : n_(n),
        parent_(parent),
        members_(std::move(members)),
        inboxes_(static_cast<std::size_t>(n)),
        finished_(static_cast<std::size_t>(n)) {
    for (auto& box : inboxes_) box = std::make_unique<Inbox>();
    for (auto& f : finished_) f.store(false);
    coll_in_.resize(static_cast<std::size_t>(n));
    coll_out_.resize(static_cast<std::size_t>(n));
    coll_count_.resize(static_cast<std::size_t>(n));
    coll_counts_.resize(static_cast<std::size_t>(n));
    split_colour_.resize(static_cast<std::size_t>(n));
    split_key_.resize(static_cast<std::size_t>(n));
    split_made_.resize(static_cast<std::size_t>(n));
    if (parent_ != nullptr) parent_->adopt(this);
  }
  ~World() {
    split_made_.clear();  // the children it still holds go while children_ is alive
    if (parent_ != nullptr) parent_->disown(this);
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int size() const { return n_; }
  // The ranks of the root world: the threads that share the machine's CPUs.
  int threads() const { return parent_ != nullptr ? parent_->threads() : n_; }
  Inbox& inbox(int rank) { return *inboxes_[static_cast<std::size_t>(rank)]; }

  // --- failure and completion ---

  bool failed() const {
    return parent_ != nullptr ? parent_->failed() : failed_.load(std::memory_order_acquire);
  }
  bool finished(int rank) const {
    if (parent_ != nullptr) return parent_->finished(members_[static_cast<std::size_t>(rank)]);
    return finished_[static_cast<std::size_t>(rank)].load(std::memory_order_acquire);
  }
  bool any_finished() const {
    if (parent_ == nullptr) return any_finished_.load(std::memory_order_acquire);
    for (int r = 0; r < n_; ++r)
      if (finished(r)) return true;
    return false;
  }
  bool all_others_finished(int rank) const {
    for (int r = 0; r < n_; ++r)
      if (r != rank && !finished(r)) return false;
    return true;
  }

  void fail(int rank, std::exception_ptr e) {
    {
      std::lock_guard lock(fail_m_);
      if (first_error_ == nullptr) {
        first_error_ = e;
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          what = ex.what();
        } catch (...) {
        }
        failure_ = "rank " + std::to_string(rank) + " failed: " + what;
        failed_.store(true, std::memory_order_release);
      }
    }
    wake_everyone();
  }
  void finish(int rank) {
    finished_[static_cast<std::size_t>(rank)].store(true, std::memory_order_release);
    any_finished_.store(true, std::memory_order_release);
    wake_everyone();
  }
  std::string failure() {
    if (parent_ != nullptr) return parent_->failure();
    std::lock_guard lock(fail_m_);
    return failure_;
  }
  std::exception_ptr first_error() {
    std::lock_guard lock(fail_m_);
    return first_error_;
  }
  [[noreturn]] void throw_failed() { throw PeerFailed(failure()); }

  // --- barrier (generation counting) ---

  // With `spin` > 0 a rank that is not the last first spins that long on the generation, the
  // lock released, before it sleeps: when the ranks arrive within microseconds of each other (a
  // native collective's two barriers), a condition variable's sleep and wake cost more than the
  // wait (the native all_reduce of 395 floats took 37-52 us at 2 ranks on a Zen 5 guest without
  // it). Only where every rank has a CPU of its own (the communicator's choice, as for its
  // receives): a spinning rank would otherwise keep the one it waits for off the core.
  void barrier(int rank, std::chrono::microseconds spin = {}) {
    std::unique_lock lock(bar_m_);
    if (failed()) throw_failed();
    const std::uint64_t gen = generation_.load(std::memory_order_relaxed);
    if (++arrived_ == n_) {
      arrived_ = 0;
      generation_.store(gen + 1, std::memory_order_release);
      bar_cv_.notify_all();
      return;
    }
    if (spin.count() > 0) {
      lock.unlock();
      const auto deadline = std::chrono::steady_clock::now() + spin;
      for (int i = 0; generation_.load(std::memory_order_acquire) == gen; ++i) {
        if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) break;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      lock.lock();
    }
    bar_cv_.wait(lock, [&] {
      return generation_.load(std::memory_order_relaxed) != gen || failed() || any_finished();
    });
    if (generation_.load(std::memory_order_relaxed) != gen) return;
    --arrived_;
    if (failed()) throw_failed();
    throw std::logic_error("rank " + std::to_string(rank) +
                           ": barrier: another rank returned without reaching it");
  }

  // --- the native collectives' published buffers (valid between two barriers) ---
  std::vector<const float*> coll_in_;
  std::vector<float*> coll_out_;
  std::vector<std::size_t> coll_count_;
  std::vector<const std::size_t*> coll_counts_;  // all_to_all_v's send counts, size() each
  // --- split's: each rank's colour and key, and the child world a group's first rank made ---
  std::vector<int> split_colour_, split_key_;
  std::vector<std::shared_ptr<World>> split_made_;

  void wake_everyone() {
    for (auto& box : inboxes_) {
      std::lock_guard lock(box->m);  // so no waiter misses the change between check and sleep
      box->cv.notify_all();
    }
    {
      std::lock_guard lock(bar_m_);
      bar_cv_.notify_all();
    }
    std::lock_guard lock(children_m_);
    for (World* child : children_) child->wake_everyone();
  }

 private:
  void adopt(World* child) {
    std::lock_guard lock(children_m_);
    children_.push_back(child);
  }
  void disown(World* child) {
    std::lock_guard lock(children_m_);
    children_.erase(std::find(children_.begin(), children_.end(), child));
  }

  int n_;
  World* parent_;
  std::vector<int> members_;
  std::mutex children_m_;
  std::vector<World*> children_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::vector<std::atomic<bool>> finished_;
  std::atomic<bool> any_finished_{false};
  std::atomic<bool> failed_{false};
  std::mutex fail_m_;
  std::exception_ptr first_error_;
  std::string failure_;
  std::mutex bar_m_;
  std::condition_variable bar_cv_;
  int arrived_ = 0;
  std::atomic<std::uint64_t> generation_ = 0;  // written under bar_m_, read spinning without it
};

// What a matched sender (or a buffered message) does to the receiver's buffer.
inline void deliver(const RecvSlot& slot, std::span<const float> data) {
  if (data.empty()) return;
  if (!slot.reduce) {
    std::memcpy(slot.buf.data(), data.data(), data.size_bytes());
    return;
  }
  float* __restrict acc = slot.buf.data();
  const float* __restrict x = data.data();
  if (slot.combine.fn != nullptr) {
    slot.combine.fn(acc, x, data.size(), slot.combine.context);
    return;
  }
  if (slot.addend != nullptr) {
    const float* __restrict y = slot.addend;
    for (std::size_t i = 0; i < data.size(); ++i) acc[i] = y[i] + x[i];
    return;
  }
  for (std::size_t i = 0; i < data.size(); ++i) acc[i] += x[i];
}

inline bool matches(const RecvSlot& slot, int src, int tag) {
  return (slot.src == kAnySource || slot.src == src) && slot.tag == tag;
}

}  // namespace concurdl::dp::threads_detail
