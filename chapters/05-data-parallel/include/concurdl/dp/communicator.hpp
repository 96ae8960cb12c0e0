// The communicator: what data-parallel training (this chapter), tensor and pipeline parallelism
// (chapter 06) and parameter servers (chapter 07) need from "the other ranks", behind one
// interface with three backends:
//
//   threads  ranks are threads of one process over shared memory    run_threads(n, body)
//   mpi      ranks are processes under mpirun (one machine or many)  MpiCommunicator(comm)
//   nccl     one rank per GPU, NCCL's collectives, ids over MPI      NcclCommunicator(comm, dev)
//
// split(colour, key) cuts a communicator into groups, as MPI_Comm_split does: what 3D
// parallelism (chapter 06) builds its data-, tensor- and pipeline-parallel groups from.
//
// Two layers. Point-to-point (send / recv / isend / irecv) is all the hand-written collectives
// of algorithms.hpp use, so the lesson's naive, tree, halving-doubling and ring all-reduce run
// unchanged on every host-memory backend. The native collectives (broadcast, all_reduce,
// reduce_scatter, all_gather) are each backend's own implementation: MPI_Allreduce, NCCL, or a
// shared-memory algorithm for threads; the hand-written ones are measured against them.
//
// The contract, the same on every backend:
// - Data are floats; every reduction is a sum (gradients), except irecv_combine's, whose
//   combine function reads the floats' bytes as it pleases (16-bit gradients). Every rank calls a
//   collective with the same sizes, in the same order; tags keep unrelated point-to-point traffic
//   apart.
// - A receive takes exactly one message of exactly its size (a size mismatch is an error on
//   both MPI and threads, not a truncation). Messages from one sender with one tag arrive in the
//   order they were sent (MPI's non-overtaking rule); kAnySource takes the earliest match.
// - send() returns when `data` may be reused. It may or may not wait for the receive: threads
//   never waits (it copies into the receiver's posted buffer, or buffers the message), MPI waits
//   for large messages. Two ranks that must both send before they receive use isend/irecv.
// - isend/irecv return a Request; the buffer belongs to the communicator until wait() (or a
//   true test()). A Request destroyed before completion cancels or waits (never leaves a
//   dangling write into freed memory), so an exception cannot corrupt memory on its way out.
// - A failure is an exception, never exit(): arguments out of range are std::invalid_argument;
//   library failures LibraryError (CDL_MPI_CHECK, CDL_NCCL_CHECK); on the threads backend, a
//   rank that throws makes every other rank's waiting call throw PeerFailed("rank 1 failed:
//   ...") within milliseconds, and run_threads rethrows the first rank's own exception.
// - memory(): where the spans must live. host for threads and mpi; device for nccl (the spans
//   are then device pointers, never dereferenced on the host). The hand-written algorithms
//   need host memory.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace concurdl::dp {

// recv/irecv from whichever rank sends first (a parameter server's workers, chapter 07).
inline constexpr int kAnySource = -1;
// Tags run 0..kMaxTag: the smallest upper bound MPI guarantees (MPI_TAG_UB >= 32767).
inline constexpr int kMaxTag = 32767;
// The tag of the default all-to-all's messages (Communicator::do_all_to_all_v).
inline constexpr int kAllToAllTag = kMaxTag;

enum class MemorySpace { host, device };

// On the threads backend: thrown by a rank's communicator calls once another rank has failed.
class PeerFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A non-blocking operation in flight. Move-only; default-constructed: already complete.
class Request {
 public:
  // What a backend fills in.
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void wait() = 0;  // blocks until complete; throws on failure
    virtual bool test() = 0;  // true when complete (then wait() returns at once)
    // After completion: the rank the message came from (a receive), -1 for a send.
    virtual int source() const { return -1; }
    // Called by ~Request when neither wait() nor a true test() completed it: cancel the
    // operation if it has not started, else wait for it. Must not throw.
    virtual void abandon() noexcept = 0;
  };

  Request() = default;
  explicit Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)), done_(impl_ == nullptr) {}
  Request(Request&& other) noexcept : impl_(std::move(other.impl_)), done_(other.done_) {
    other.done_ = true;
  }
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      release();
      impl_ = std::move(other.impl_);
      done_ = other.done_;
      other.done_ = true;
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { release(); }

  void wait() {
    if (done_) return;
    impl_->wait();
    done_ = true;
  }
  bool test() {
    if (!done_ && impl_->test()) done_ = true;
    return done_;
  }
  int source() const { return impl_ ? impl_->source() : -1; }

 private:
  void release() noexcept {
    if (!done_ && impl_) impl_->abandon();
    impl_.reset();
    done_ = true;
  }
  std::unique_ptr<Impl> impl_;
  bool done_ = true;
};

// Waits for every request in order (the rest are abandoned by their destructors if one throws).
inline void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

// A receive's reduction other than float addition, as MPI_Op_create makes one: fn combines a
// message of `words` floats' bytes into `acc` (the same size), with `context` passed through
// (the 16-bit ring's: the format, and a widen-add-round of bfloat16 or binary16 pairs).
struct Combine {
  void (*fn)(float* acc, const float* message, std::size_t words, const void* context) = nullptr;
  const void* context = nullptr;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string_view name() const = 0;  // "threads", "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual MemorySpace memory() const { return MemorySpace::host; }
  virtual void barrier() = 0;

  // A communicator over the ranks that pass the same `colour` (>= 0), ranked by `key` (ties by
  // rank here), as MPI_Comm_split: collective, every rank of this one calls it, in the same
  // order as its other collectives. The new one is independent of this one and of its siblings:
  // its messages, tags and collectives never meet theirs. It must not outlive this one (on the
  // threads backend, the run_threads call). std::invalid_argument for a negative colour;
  // std::logic_error on a backend that cannot split (nccl).
  std::unique_ptr<Communicator> split(int colour, int key) {
    if (colour < 0)
      throw std::invalid_argument("split: colour " + std::to_string(colour) +
                                  " (need a colour >= 0)");
    return do_split(colour, key);
  }

  // Bytes this rank has handed to send, isend and sendrecv since construction: the traffic of
  // the hand-written collectives (algorithms.hpp), counted where it leaves. The native
  // collectives move their bytes inside the backend (MPI, NCCL, shared memory) and are not
  // counted. Safe to read from any thread.
  std::uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }

  // --- point to point ---
  void send(int dst, std::span<const float> data, int tag) {
    check_peer(dst, false, "send");
    check_tag(tag);
    count_sent(data.size_bytes());
    do_send(dst, data, tag);
  }
  // Returns the rank the message came from (the one asked for, or the sender for kAnySource).
  int recv(int src, std::span<float> data, int tag) {
    check_peer(src, true, "recv");
    check_tag(tag);
    return do_recv(src, data, tag);
  }
  Request isend(int dst, std::span<const float> data, int tag) {
    check_peer(dst, false, "isend");
    check_tag(tag);
    count_sent(data.size_bytes());
    return do_isend(dst, data, tag);
  }
  Request irecv(int src, std::span<float> data, int tag) {
    check_peer(src, true, "irecv");
    check_tag(tag);
    return do_irecv(src, data, tag);
  }
  // Sends to `dst` and receives from `src` at once (a ring step, a halving-doubling exchange):
  // never deadlocks, whatever the message size.
  void sendrecv(int dst, std::span<const float> out, int src, std::span<float> in, int tag) {
    check_peer(dst, false, "sendrecv");
    check_peer(src, false, "sendrecv");
    check_tag(tag);
    count_sent(out.size_bytes());
    do_sendrecv(dst, out, src, in, tag);
  }

  // --- receive and reduce: acc[i] += message[i], the step every reduction repeats ---
  // The message has exactly acc.size() floats. The default receives into scratch, then adds
  // (two passes over memory: the copy in, then the add). The threads backend adds straight from
  // the sender's buffer into `acc` (one pass, and `scratch` is never touched): a zero-copy
  // rendezvous. The ring all-reduce is written over these, so it runs on every backend and is
  // as fast as each can make it.
  // Non-blocking: `acc` (and `scratch`, at least acc.size() floats) belong to the communicator
  // until wait(); with the threads backend the add may be done by the sending thread.
  Request irecv_reduce(int src, std::span<float> acc, std::span<float> scratch, int tag) {
    check_peer(src, true, "irecv_reduce");
    check_tag(tag);
    if (scratch.size() < acc.size() && (uses_receive_scratch() || !scratch.empty()))
      throw std::invalid_argument("irecv_reduce: scratch has " + std::to_string(scratch.size()) +
                                  " floats, acc " + std::to_string(acc.size()));
    return do_irecv_reduce(src, acc, scratch.first(std::min(scratch.size(), acc.size())), tag);
  }
  // out[i] = in[i] + message[i]: a receive-and-add into another buffer, so that an out-of-place
  // reduction need not copy in to out first. `in` and `out` have the same size and are the
  // same span (then it is irecv_reduce) or do not overlap. The default copies in to out now and
  // then works as irecv_reduce; the threads backend's sender writes in + message into out in
  // one pass. `in` too belongs to the communicator until wait().
  Request irecv_add(int src, std::span<const float> in, std::span<float> out,
                    std::span<float> scratch, int tag) {
    check_peer(src, true, "irecv_add");
    check_tag(tag);
    if (in.size() != out.size())
      throw std::invalid_argument("irecv_add: in has " + std::to_string(in.size()) +
                                  " floats, out " + std::to_string(out.size()));
    if (scratch.size() < out.size() && (uses_receive_scratch() || !scratch.empty()))
      throw std::invalid_argument("irecv_add: scratch has " + std::to_string(scratch.size()) +
                                  " floats, out " + std::to_string(out.size()));
    if (in.data() != out.data()) check_disjoint(in, out, "irecv_add");
    return do_irecv_add(src, in, out, scratch.first(std::min(scratch.size(), out.size())), tag);
  }
  // acc = op(acc, message): irecv_reduce with another reduction, as an MPI user-defined op. The
  // default receives into scratch, then combines; the threads backend's sender combines from
  // its buffer into `acc` in one pass.
  Request irecv_combine(int src, std::span<float> acc, std::span<float> scratch, Combine op,
                        int tag) {
    check_peer(src, true, "irecv_combine");
    check_tag(tag);
    if (op.fn == nullptr) throw std::invalid_argument("irecv_combine: no combine function");
    if (scratch.size() < acc.size() && (uses_receive_scratch() || !scratch.empty()))
      throw std::invalid_argument("irecv_combine: scratch has " + std::to_string(scratch.size()) +
                                  " floats, acc " + std::to_string(acc.size()));
    return do_irecv_combine(src, acc, scratch.first(std::min(scratch.size(), acc.size())), op, tag);
  }
  // Whether irecv_reduce, irecv_add and irecv_combine use their scratch: a backend whose sender
  // adds into the destination (the threads backend) does not, and a caller may then pass an empty
  // one (a short one that is not empty is still an error).
  virtual bool uses_receive_scratch() const { return true; }
  // Blocking; the default's scratch is this thread's, kept between calls.
  int recv_reduce(int src, std::span<float> acc, int tag) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < acc.size()) scratch.resize(acc.size());
    Request r = irecv_reduce(src, acc, std::span<float>(scratch).first(acc.size()), tag);
    r.wait();
    return r.source();
  }

  // --- native collectives (the backend's own), sums over float ---
  // Every rank ends with root's `data`.
  void broadcast(std::span<float> data, int root) {
    check_peer(root, false, "broadcast root");
    do_broadcast(data, root);
  }
  // out = sum over ranks of in. `in` and `out` are the same span (in place) or do not overlap.
  void all_reduce(std::span<const float> in, std::span<float> out) {
    if (in.size() != out.size())
      throw std::invalid_argument("all_reduce: in has " + std::to_string(in.size()) +
                                  " floats, out " + std::to_string(out.size()));
    if (in.data() != out.data()) check_disjoint(in, out, "all_reduce");
    do_all_reduce(in, out);
  }
  void all_reduce(std::span<float> data) { all_reduce(data, data); }
  // Rank r's out = block r of the sum: in holds size() blocks of out.size() floats.
  void reduce_scatter(std::span<const float> in, std::span<float> out) {
    if (in.size() != out.size() * static_cast<std::size_t>(size()))
      throw std::invalid_argument("reduce_scatter: in must hold size() * out.size() floats");
    check_disjoint(in, out, "reduce_scatter");
    do_reduce_scatter(in, out);
  }
  // Block r of every rank's out = rank r's in: out holds size() blocks of in.size() floats.
  void all_gather(std::span<const float> in, std::span<float> out) {
    if (out.size() != in.size() * static_cast<std::size_t>(size()))
      throw std::invalid_argument("all_gather: out must hold size() * in.size() floats");
    check_disjoint(in, out, "all_gather");
    do_all_gather(in, out);
  }
  // All-to-all with a size per pair (MPI_Alltoallv): rank r's block j of `send` goes to rank j,
  // where it is block r of `recv`. `send` holds size() blocks of send_counts[j] floats one after
  // the other, `recv` size() blocks of recv_counts[j]; recv_counts[j] must be what rank j sends
  // here (all_to_all.hpp's exchange_counts finds it). send and recv do not overlap.
  void all_to_all_v(std::span<const float> send, std::span<const std::size_t> send_counts,
                    std::span<float> recv, std::span<const std::size_t> recv_counts) {
    const auto n = static_cast<std::size_t>(size());
    if (send_counts.size() != n || recv_counts.size() != n)
      throw std::invalid_argument("all_to_all_v: need size() send and receive counts");
    std::size_t out = 0, in = 0;
    for (std::size_t j = 0; j < n; ++j) out += send_counts[j], in += recv_counts[j];
    if (send.size() != out || recv.size() != in)
      throw std::invalid_argument("all_to_all_v: send has " + std::to_string(send.size()) +
                                  " floats for counts summing to " + std::to_string(out) +
                                  ", recv " + std::to_string(recv.size()) + " for " +
                                  std::to_string(in));
    check_disjoint(send, recv, "all_to_all_v");
    do_all_to_all_v(send, send_counts, recv, recv_counts);
  }
  // Equal blocks (MPI_Alltoall): send and recv hold size() blocks of send.size() / size().
  void all_to_all(std::span<const float> send, std::span<float> recv) {
    const auto n = static_cast<std::size_t>(size());
    if (send.size() != recv.size() || send.size() % n != 0)
      throw std::invalid_argument("all_to_all: send and recv must hold size() equal blocks");
    const std::vector<std::size_t> counts(n, send.size() / n);
    all_to_all_v(send, counts, recv, counts);
  }

 protected:
  virtual void do_send(int dst, std::span<const float> data, int tag) = 0;
  virtual int do_recv(int src, std::span<float> data, int tag) = 0;
  virtual Request do_isend(int dst, std::span<const float> data, int tag) = 0;
  virtual Request do_irecv(int src, std::span<float> data, int tag) = 0;
  virtual void do_sendrecv(int dst, std::span<const float> out, int src, std::span<float> in,
                           int tag) {
    Request r = do_irecv(src, in, tag);
    Request s = do_isend(dst, out, tag);
    r.wait();
    s.wait();
  }
  // Default: irecv into scratch; wait() (or a true test()) then adds scratch into acc.
  virtual Request do_irecv_reduce(int src, std::span<float> acc, std::span<float> scratch,
                                  int tag) {
    return do_irecv_combine(src, acc, scratch, Combine{&add_floats, nullptr}, tag);
  }
  // Default: irecv into scratch; wait() (or a true test()) then combines scratch into acc.
  virtual Request do_irecv_combine(int src, std::span<float> acc, std::span<float> scratch,
                                   Combine op, int tag) {
    class AddOnCompletion final : public Request::Impl {
     public:
      AddOnCompletion(Request recv, std::span<float> acc, std::span<const float> scratch,
                      Combine op)
          : recv_(std::move(recv)), acc_(acc), scratch_(scratch), op_(op) {}
      void wait() override {
        recv_.wait();
        add();
      }
      bool test() override {
        if (!recv_.test()) return false;
        add();
        return true;
      }
      int source() const override { return recv_.source(); }
      void abandon() noexcept override { recv_ = Request(); }  // its destructor cancels or waits

     private:
      void add() {
        if (added_) return;
        added_ = true;
        if (!acc_.empty()) op_.fn(acc_.data(), scratch_.data(), acc_.size(), op_.context);
      }
      Request recv_;
      std::span<float> acc_;
      std::span<const float> scratch_;
      Combine op_;
      bool added_ = false;
    };
    return Request(
        std::make_unique<AddOnCompletion>(do_irecv(src, scratch, tag), acc, scratch, op));
  }
  // The float sum, as a Combine.
  static void add_floats(float* acc, const float* message, std::size_t words, const void*) {
    float* __restrict a = acc;
    const float* __restrict b = message;
    for (std::size_t i = 0; i < words; ++i) a[i] += b[i];
  }
  // Default: copy in to out, then irecv_reduce into out.
  virtual Request do_irecv_add(int src, std::span<const float> in, std::span<float> out,
                               std::span<float> scratch, int tag) {
    if (in.data() != out.data() && !in.empty()) std::memcpy(out.data(), in.data(), in.size_bytes());
    return do_irecv_reduce(src, out, scratch, tag);
  }
  virtual void do_broadcast(std::span<float> data, int root) = 0;
  virtual void do_all_reduce(std::span<const float> in, std::span<float> out) = 0;
  virtual void do_reduce_scatter(std::span<const float> in, std::span<float> out) = 0;
  virtual void do_all_gather(std::span<const float> in, std::span<float> out) = 0;
  // The default, for host memory: every receive posted (from r - s at step s), then every send
  // (to r + s), then all waited for, with tag kAllToAllTag (MPICH's algorithm for medium
  // blocks). The threads and mpi backends override it (shared-memory copies, MPI_Alltoallv); a
  // backend on device memory without one of its own (nccl) refuses it.
  virtual void do_all_to_all_v(std::span<const float> send,
                               std::span<const std::size_t> send_counts, std::span<float> recv,
                               std::span<const std::size_t> recv_counts) {
    if (memory() != MemorySpace::host)
      throw std::logic_error("all_to_all_v: the " + std::string(name()) +
                             " backend has no all-to-all here");
    const int n = size(), r = rank();
    std::vector<std::size_t> send_at(static_cast<std::size_t>(n) + 1, 0), recv_at = send_at;
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
      send_at[j + 1] = send_at[j] + send_counts[j];
      recv_at[j + 1] = recv_at[j] + recv_counts[j];
    }
    auto self = static_cast<std::size_t>(r);
    std::copy_n(send.data() + send_at[self], send_counts[self], recv.data() + recv_at[self]);
    std::vector<Request> pending;
    for (int s = 1; s < n; ++s) {
      const auto from = static_cast<std::size_t>((r - s + n) % n);
      pending.push_back(irecv(static_cast<int>(from),
                              recv.subspan(recv_at[from], recv_counts[from]), kAllToAllTag));
    }
    for (int s = 1; s < n; ++s) {
      const auto to = static_cast<std::size_t>((r + s) % n);
      pending.push_back(
          isend(static_cast<int>(to), send.subspan(send_at[to], send_counts[to]), kAllToAllTag));
    }
    wait_all(pending);
  }
  virtual std::unique_ptr<Communicator> do_split(int /*colour*/, int /*key*/) {
    throw std::logic_error("split: the " + std::string(name()) +
                           " backend cannot split a communicator");
  }

 private:
  void count_sent(std::size_t bytes) { bytes_sent_.fetch_add(bytes, std::memory_order_relaxed); }
  std::atomic<std::uint64_t> bytes_sent_{0};
  void check_peer(int peer, bool any_ok, const char* what) const {
    if ((any_ok && peer == kAnySource) || (peer >= 0 && peer < size())) return;
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(peer) +
                                " is not in 0.." + std::to_string(size() - 1));
  }
  static void check_tag(int tag) {
    if (tag < 0 || tag > kMaxTag)
      throw std::invalid_argument("tag " + std::to_string(tag) + " is not in 0.." +
                                  std::to_string(kMaxTag));
  }
  static void check_disjoint(std::span<const float> a, std::span<const float> b, const char* what) {
    if (a.empty() || b.empty()) return;
    const std::less<const float*> before;
    if (before(a.data(), b.data() + b.size()) && before(b.data(), a.data() + a.size()))
      throw std::invalid_argument(std::string(what) + ": in and out overlap");
  }
};

}  // namespace concurdl::dp
