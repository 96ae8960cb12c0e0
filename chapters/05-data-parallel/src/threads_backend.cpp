// The threads backend (threads_backend.hpp): a communicator over the inboxes and the World of
// threads_world.hpp, point to point and the native collectives on published buffers.
#include "concurdl/dp/threads_backend.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "threads_world.hpp"

namespace concurdl::dp {
namespace {

using namespace threads_detail;

class ThreadsRecv;

class ThreadsCommunicator final : public Communicator {
 public:
  ThreadsCommunicator(World& world, int rank) : world_(world), rank_(rank) {}
  // A split's: it keeps its (child) world alive.
  ThreadsCommunicator(std::shared_ptr<World> world, int rank)
      : owned_(std::move(world)), world_(*owned_), rank_(rank) {}

  std::string_view name() const override { return "threads"; }
  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }
  void barrier() override { world_.barrier(rank_, spin_ ? kSpin : std::chrono::microseconds{}); }

  // Waits (on this rank's inbox) until `slot` is done. On failure, or when no rank that could
  // still send it is left, withdraws the slot and throws; a copy in progress is waited for first
  // so that nobody writes into a buffer that is being unwound.
  // First it spins for at most kSpin (when every rank has a CPU of its own): a segment of a
  // ring step usually lands within microseconds, and a condition-variable sleep and wake costs
  // more than that. Never longer: ranks may outnumber the CPUs, and a spinning rank would then
  // keep its neighbour, the sender, off the core.
  void wait_slot(const std::shared_ptr<RecvSlot>& slot) {
    if (spin_ && spin_until_complete(*slot)) return;
    Inbox& box = world_.inbox(rank_);
    std::unique_lock lock(box.m);
    auto orphaned = [&] {
      return slot->src == kAnySource ? world_.all_others_finished(rank_)
                                     : world_.finished(slot->src);
    };
    box.cv.wait(lock, [&] {
      return slot->state == RecvSlot::State::done ||
             (slot->state == RecvSlot::State::posted && (world_.failed() || orphaned()));
    });
    if (slot->state == RecvSlot::State::done) return;
    withdraw(box, slot);
    if (world_.failed()) world_.throw_failed();
    throw std::logic_error("rank " + std::to_string(rank_) + ": recv from " +
                           tag_text(slot->src, slot->tag) +
                           ": the sender returned without sending it");
  }

  // Called with the inbox locked: takes a posted slot out of the queue.
  static void withdraw(Inbox& box, const std::shared_ptr<RecvSlot>& slot) {
    auto it = std::find(box.posted.begin(), box.posted.end(), slot);
    if (it != box.posted.end()) box.posted.erase(it);
  }

  // Posts a receive, or completes it at once from a buffered message. `completed` says which:
  // once posted, the slot's state belongs to the inbox lock (a sender may be changing it).
  std::shared_ptr<RecvSlot> post(int src, std::span<float> data, int tag, bool reduce,
                                 bool& completed, const float* addend = nullptr,
                                 Combine combine = {}) {
    completed = false;
    auto slot = std::make_shared<RecvSlot>();
    slot->src = src;
    slot->tag = tag;
    slot->buf = data;
    slot->reduce = reduce;
    slot->addend = addend;
    slot->combine = combine;
    Inbox& box = world_.inbox(rank_);
    std::vector<float> payload;
    {
      std::lock_guard lock(box.m);
      if (world_.failed()) world_.throw_failed();
      auto it = std::find_if(box.buffered.begin(), box.buffered.end(), [&](const Message& m) {
        return (src == kAnySource || m.src == src) && m.tag == tag;
      });
      if (it == box.buffered.end()) {
        box.posted.push_back(slot);
        return slot;
      }
      slot->from = it->src;
      payload = std::move(it->data);
      box.buffered.erase(it);
    }
    if (payload.size() != data.size())
      throw std::length_error("rank " + std::to_string(rank_) + ": recv from " +
                              tag_text(src, tag) + " of " + std::to_string(data.size()) +
                              " floats, but the message has " + std::to_string(payload.size()));
    deliver(*slot, payload);
    slot->state = RecvSlot::State::done;
    completed = true;
    std::lock_guard lock(box.m);
    if (box.pool.size() < 8) box.pool.push_back(std::move(payload));
    return slot;
  }

 protected:
  void do_send(int dst, std::span<const float> data, int tag) override {
    Inbox& box = world_.inbox(dst);
    std::unique_lock lock(box.m);
    if (world_.failed()) world_.throw_failed();
    auto find_posted = [&] {
      return std::find_if(box.posted.begin(), box.posted.end(),
                          [&](const auto& s) { return matches(*s, rank_, tag); });
    };
    auto it = find_posted();
    // A large message whose receive is not posted yet would be copied twice (into a buffer,
    // then out of it), and the receiver would then do the add the sender could have done. The
    // receiver is usually only a wake-up behind (a ring's ranks leave the same barrier), so
    // wait for its receive, with the lock released, before buffering: never longer than the
    // extra copy would take (bytes at 10 GB/s, at most kSendSpinMax), and only where every rank
    // has a CPU. Send still never blocks for long, and cannot deadlock.
    if (it == box.posted.end() && spin_ && dst != rank_ && data.size() >= kSpinSendFloats) {
      const auto wait = std::min<std::chrono::nanoseconds>(
          kSendSpinMax, std::chrono::nanoseconds(data.size_bytes() / 10));
      const auto deadline = std::chrono::steady_clock::now() + wait;
      while (it == box.posted.end() && std::chrono::steady_clock::now() < deadline) {
        lock.unlock();
        for (int i = 0; i < 64; ++i) cpu_relax();
        lock.lock();
        if (world_.failed()) world_.throw_failed();
        it = find_posted();
      }
    }
    if (it != box.posted.end()) {
      // The receive is waiting: copy straight into its buffer, outside the lock.
      std::shared_ptr<RecvSlot> slot = *it;
      if (slot->buf.size() != data.size())
        throw std::length_error("rank " + std::to_string(rank_) + ": send to rank " +
                                std::to_string(dst) + " tag " + std::to_string(tag) + " of " +
                                std::to_string(data.size()) + " floats, but the receive takes " +
                                std::to_string(slot->buf.size()));
      box.posted.erase(it);
      slot->state = RecvSlot::State::copying;
      slot->from = rank_;
      lock.unlock();
      deliver(*slot, data);
      lock.lock();
      slot->state = RecvSlot::State::done;
      slot->complete.store(true, std::memory_order_release);
      lock.unlock();
      box.cv.notify_all();
      return;
    }
    // No receive yet: buffer the message (in a reused buffer when there is one).
    std::vector<float> payload;
    if (!box.pool.empty()) {
      payload = std::move(box.pool.back());
      box.pool.pop_back();
    }
    payload.assign(data.begin(), data.end());
    box.buffered.push_back(Message{rank_, tag, std::move(payload)});
  }

  int do_recv(int src, std::span<float> data, int tag) override {
    bool completed = false;
    std::shared_ptr<RecvSlot> slot = post(src, data, tag, /*reduce=*/false, completed);
    if (!completed) wait_slot(slot);
    return slot->from;  // set before `done`, read after it under the lock (or by this thread)
  }

  // Sends complete at once: the message is delivered or buffered before do_send returns.
  Request do_isend(int dst, std::span<const float> data, int tag) override {
    do_send(dst, data, tag);
    return Request();
  }

  Request do_irecv(int src, std::span<float> data, int tag) override {
    return post_request(src, data, tag, /*reduce=*/false);
  }
  // The sender adds into `acc` (or, if its message came first, it is added from the buffer):
  // `scratch` is not needed.
  bool uses_receive_scratch() const override { return false; }
  Request do_irecv_reduce(int src, std::span<float> acc, std::span<float>, int tag) override {
    return post_request(src, acc, tag, /*reduce=*/true);
  }
  // The same, with the sender writing in + message into out (no copy of in to out first).
  Request do_irecv_add(int src, std::span<const float> in, std::span<float> out, std::span<float>,
                       int tag) override {
    return post_request(src, out, tag, /*reduce=*/true,
                        in.data() == out.data() ? nullptr : in.data());
  }
  // The same with another reduction, which the sender applies in place of the sum.
  Request do_irecv_combine(int src, std::span<float> acc, std::span<float>, Combine op,
                           int tag) override {
    return post_request(src, acc, tag, /*reduce=*/true, nullptr, op);
  }
  Request post_request(int src, std::span<float> data, int tag, bool reduce,
                       const float* addend = nullptr, Combine combine = {});

  void do_broadcast(std::span<float> data, int root) override {
    publish(data, data);
    check_counts("broadcast");
    if (rank_ != root && !data.empty())
      std::memcpy(data.data(), world_.coll_out_[static_cast<std::size_t>(root)], data.size_bytes());
    barrier();  // root's buffer is read until everyone is here
  }

  // Rank r sums slice r of every rank's input, block by block, and writes the block into every
  // rank's output. In place works: only rank r touches slice r, and it reads a block from every
  // input before writing it anywhere.
  void do_all_reduce(std::span<const float> in, std::span<float> out) override {
    publish(in, out);
    check_counts("all_reduce");
    const int n = size();
    const std::size_t count = in.size();
    const std::size_t begin = count * static_cast<std::size_t>(rank_) / n;
    const std::size_t end = count * static_cast<std::size_t>(rank_ + 1) / n;
    constexpr std::size_t kBlock = 2048;  // 8 KiB: stays in L1 while it is summed and written
    float acc[kBlock];
    for (std::size_t b = begin; b < end; b += kBlock) {
      const std::size_t len = std::min(kBlock, end - b);
      const float* first = world_.coll_in_[0] + b;
      for (std::size_t i = 0; i < len; ++i) acc[i] = first[i];
      for (int r = 1; r < n; ++r) {
        const float* src = world_.coll_in_[static_cast<std::size_t>(r)] + b;
        for (std::size_t i = 0; i < len; ++i) acc[i] += src[i];
      }
      for (int r = 0; r < n; ++r)
        std::memcpy(world_.coll_out_[static_cast<std::size_t>(r)] + b, acc, len * sizeof(float));
    }
    barrier();
  }

  void do_reduce_scatter(std::span<const float> in, std::span<float> out) override {
    publish(in, out);
    check_counts("reduce_scatter");
    const std::size_t c = out.size();
    const std::size_t off = c * static_cast<std::size_t>(rank_);
    for (std::size_t i = 0; i < c; ++i) out[i] = world_.coll_in_[0][off + i];
    for (int r = 1; r < size(); ++r) {
      const float* src = world_.coll_in_[static_cast<std::size_t>(r)] + off;
      for (std::size_t i = 0; i < c; ++i) out[i] += src[i];
    }
    barrier();
  }

  void do_all_gather(std::span<const float> in, std::span<float> out) override {
    publish(in, out);
    check_counts("all_gather");
    const std::size_t c = in.size();
    if (c > 0)
      for (int r = 0; r < size(); ++r)
        std::memcpy(out.data() + c * static_cast<std::size_t>(r),
                    world_.coll_in_[static_cast<std::size_t>(r)], c * sizeof(float));
    barrier();
  }

  // Every rank publishes its send buffer and counts; each copies its block out of every
  // sender's buffer (one pass, no message), then a barrier keeps the buffers until all are done.
  void do_all_to_all_v(std::span<const float> send, std::span<const std::size_t> send_counts,
                       std::span<float> recv, std::span<const std::size_t> recv_counts) override {
    const auto me = static_cast<std::size_t>(rank_);
    world_.coll_counts_[me] = send_counts.data();
    publish(send, recv);
    const auto n = static_cast<std::size_t>(size());
    std::size_t at = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t* theirs = world_.coll_counts_[j];
      std::size_t from = 0;
      for (std::size_t k = 0; k < me; ++k) from += theirs[k];
      if (theirs[me] != recv_counts[j]) {
        // The message is made before the barrier: past it, rank j may have returned and freed
        // its counts.
        const std::string what = "all_to_all_v: rank " + std::to_string(j) + " sends " +
                                 std::to_string(theirs[me]) + " floats to rank " +
                                 std::to_string(me) + ", which expects " +
                                 std::to_string(recv_counts[j]);
        barrier();  // the others may still read this rank's buffer
        throw std::invalid_argument(what);
      }
      if (recv_counts[j] > 0)
        std::memcpy(recv.data() + at, world_.coll_in_[j] + from, recv_counts[j] * sizeof(float));
      at += recv_counts[j];
    }
    barrier();
  }

  // Every rank publishes its colour and key; each group's first rank (by key, then rank) makes
  // the group's world and publishes it; every member takes it; a last barrier keeps the slots
  // until everyone has read them.
  std::unique_ptr<Communicator> do_split(int colour, int key) override {
    const auto me = static_cast<std::size_t>(rank_);
    world_.split_colour_[me] = colour;
    world_.split_key_[me] = key;
    world_.split_made_[me].reset();
    barrier();
    std::vector<int> members;  // parent ranks of my colour, in the new order
    for (int r = 0; r < size(); ++r)
      if (world_.split_colour_[static_cast<std::size_t>(r)] == colour) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return world_.split_key_[static_cast<std::size_t>(a)] <
             world_.split_key_[static_cast<std::size_t>(b)];
    });
    const int mine =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    const auto first = static_cast<std::size_t>(members.front());
    if (mine == 0)
      world_.split_made_[me] =
          std::make_shared<World>(static_cast<int>(members.size()), &world_, members);
    barrier();
    std::shared_ptr<World> child = world_.split_made_[first];
    barrier();
    return std::make_unique<ThreadsCommunicator>(std::move(child), mine);
  }

 private:
  // Every rank's buffers where the others can see them, then a barrier.
  void publish(std::span<const float> in, std::span<float> out) {
    const auto r = static_cast<std::size_t>(rank_);
    world_.coll_in_[r] = in.data();
    world_.coll_out_[r] = out.data();
    world_.coll_count_[r] = in.size();
    barrier();
  }
  // Every rank sees every count, so all of them throw together (nobody is left waiting).
  void check_counts(const char* what) {
    for (int r = 1; r < size(); ++r)
      if (world_.coll_count_[static_cast<std::size_t>(r)] != world_.coll_count_[0])
        throw std::invalid_argument(
            std::string(what) + ": rank 0 passed " + std::to_string(world_.coll_count_[0]) +
            " floats, rank " + std::to_string(r) + " " +
            std::to_string(world_.coll_count_[static_cast<std::size_t>(r)]));
  }

  static constexpr auto kSpin = std::chrono::microseconds(5);
  static constexpr std::size_t kSpinSendFloats = std::size_t{1} << 14;  // 64 KiB
  static constexpr auto kSendSpinMax = std::chrono::microseconds(100);

  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  static bool spin_until_complete(const RecvSlot& slot) {
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0;; ++i) {
      if (slot.complete.load(std::memory_order_acquire)) return true;
      if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) return false;
      cpu_relax();
    }
  }

  std::shared_ptr<World> owned_;  // a split's world (null for run_threads's)
  World& world_;
  int rank_;
  // Spin before sleeping only when the ranks are not oversubscribed.
  bool spin_ = threads_spin(world_.threads());
};

class ThreadsRecv final : public Request::Impl {
 public:
  ThreadsRecv(ThreadsCommunicator& comm, Inbox& box, std::shared_ptr<RecvSlot> slot)
      : comm_(comm), box_(box), slot_(std::move(slot)) {}
  void wait() override { comm_.wait_slot(slot_); }
  bool test() override {
    std::lock_guard lock(box_.m);
    return slot_->state == RecvSlot::State::done;
  }
  int source() const override { return slot_->from; }
  void abandon() noexcept override {
    std::unique_lock lock(box_.m);
    if (slot_->state == RecvSlot::State::posted) {
      ThreadsCommunicator::withdraw(box_, slot_);
      return;
    }
    box_.cv.wait(lock, [&] { return slot_->state == RecvSlot::State::done; });
  }

 private:
  ThreadsCommunicator& comm_;
  Inbox& box_;
  std::shared_ptr<RecvSlot> slot_;
};

Request ThreadsCommunicator::post_request(int src, std::span<float> data, int tag, bool reduce,
                                          const float* addend, Combine combine) {
  bool completed = false;
  std::shared_ptr<RecvSlot> slot = post(src, data, tag, reduce, completed, addend, combine);
  if (completed) {
    // Completed from a buffered message; a request that only reports the source.
    struct Done final : Request::Impl {
      int from;
      explicit Done(int f) : from(f) {}
      void wait() override {}
      bool test() override { return true; }
      int source() const override { return from; }
      void abandon() noexcept override {}
    };
    return Request(std::make_unique<Done>(slot->from));
  }
  return Request(std::make_unique<ThreadsRecv>(*this, world_.inbox(rank_), std::move(slot)));
}

}  // namespace

bool threads_spin(int ranks) {
  if (const char* v = std::getenv("CONCURDL_THREADS_SPIN"); v != nullptr) {
    const std::string value(v);
    if (value == "0") return false;
    if (value != "1")
      throw std::invalid_argument("CONCURDL_THREADS_SPIN: '" + value +
                                  "' is not 0 (never spin) or 1 (spin where every rank has a CPU)");
  }
  return static_cast<unsigned>(ranks) <= std::thread::hardware_concurrency();
}

void run_threads(int ranks, const std::function<void(Communicator&)>& body) {
  if (ranks < 1)
    throw std::invalid_argument("run_threads: ranks = " + std::to_string(ranks) +
                                ", must be at least 1");
  World world(ranks);
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&world, &body, r] {
        ThreadsCommunicator comm(world, r);
        try {
          body(comm);
          world.finish(r);
        } catch (...) {
          world.fail(r, std::current_exception());
        }
      });
  }
  if (std::exception_ptr e = world.first_error()) std::rethrow_exception(e);
}

}  // namespace concurdl::dp
