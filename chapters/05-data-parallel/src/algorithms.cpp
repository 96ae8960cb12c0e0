// The hand-written collectives of algorithms.hpp, over Communicator::send/recv/isend/irecv only.
// Read top to bottom: v1 naive, v2 tree, v3 halving-doubling, v4 ring, each with its building
// blocks just above it.
#include "concurdl/dp/algorithms.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/kernels/aligned.hpp"

namespace concurdl::dp {
namespace {

// Scratch space for received data, one per thread (a rank of the threads backend is a thread),
// kept between calls so that a timed loop does not measure page faults of fresh allocations.
std::span<float> scratch(std::size_t count) {
  thread_local std::vector<float> buf;
  if (buf.size() < count) buf.resize(count);
  return {buf.data(), count};
}

// A call's scratch: counted in opts.memory for the call only, when given; else the thread's.
// None where the backend does not use it (the threads backend adds as the message arrives).
struct CallScratch {
  CallScratch(std::size_t count, const AlgoOptions& opts, const Communicator& comm)
      : owned(kernels::LineAllocator<float>(opts.memory, MemoryKind::communication)) {
    if (!comm.uses_receive_scratch()) return;
    if (opts.memory == nullptr) {
      span = scratch(count);
      return;
    }
    owned.resize(count);
    span = {owned.data(), count};
  }
  kernels::LineVector<float> owned;
  std::span<float> span;
};

// Out of place: copy in to out once, then work in place on out.
std::span<float> start(Communicator& comm, std::span<const float> in, std::span<float> out,
                       const char* what) {
  require_host(comm, what);
  if (in.size() != out.size())
    throw std::invalid_argument(std::string(what) + ": in and out differ in size");
  if (in.data() != out.data() && !in.empty()) std::memcpy(out.data(), in.data(), in.size_bytes());
  return out;
}

int mod(int a, int n) { return ((a % n) + n) % n; }

std::span<float> sub(std::span<float> s, Block b) { return s.subspan(b.offset, b.count); }

// A segment of the receive scratch, which is empty on a backend that adds in place (it is never
// read there; a subspan of an empty span would offset a null pointer).
std::span<float> scratch_sub(std::span<float> s, Block b) { return s.empty() ? s : sub(s, b); }

}  // namespace

void require_host(const Communicator& comm, const char* what) {
  if (comm.memory() != MemorySpace::host)
    throw std::invalid_argument(std::string(what) +
                                ": the hand-written collectives work on host "
                                "memory; the " +
                                std::string(comm.name()) + " backend has only its native ones");
}

void add_into(std::span<float> acc, std::span<const float> x) {
  float* __restrict a = acc.data();
  const float* __restrict b = x.data();
  const std::size_t n = std::min(acc.size(), x.size());
  for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
}

// --- v1: naive ---------------------------------------------------------------------------------

// Rank 0 receives every vector in turn, sums, and sends the sum to every rank in turn: all
// traffic goes through one rank, one message at a time.
void allreduce_naive(Communicator& comm, std::span<const float> in, std::span<float> out,
                     const AlgoOptions& opts) {
  std::span<float> data = start(comm, in, out, "allreduce_naive");
  const int n = comm.size(), r = comm.rank();
  if (n == 1 || data.empty()) return;
  if (r == 0) {
    for (int src = 1; src < n; ++src) comm.recv_reduce(src, data, opts.tag);
    for (int dst = 1; dst < n; ++dst) comm.send(dst, data, opts.tag);
  } else {
    comm.send(0, data, opts.tag);
    comm.recv(0, data, opts.tag);
  }
}

// --- v2: binomial tree ---------------------------------------------------------------------------

// Ranks relative to root: v = (r - root) mod n. In round k (mask = 2^k) a rank whose bit k is set
// sends its partial sum to v - mask and is done; the others receive from v + mask, if it exists.
void reduce_tree(Communicator& comm, std::span<float> data, int root, const AlgoOptions& opts) {
  require_host(comm, "reduce_tree");
  const int n = comm.size();
  if (n == 1 || data.empty()) return;
  const int v = mod(comm.rank() - root, n);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      comm.send(mod(v - mask + root, n), data, opts.tag);
      return;
    }
    if (v + mask < n) comm.recv_reduce(mod(v + mask + root, n), data, opts.tag);
  }
}

// The same tree run backwards: a rank receives once (from v minus its lowest set bit), then sends
// to v + mask for every smaller mask.
void broadcast_tree(Communicator& comm, std::span<float> data, int root, const AlgoOptions& opts) {
  require_host(comm, "broadcast_tree");
  const int n = comm.size();
  if (n == 1 || data.empty()) return;
  const int v = mod(comm.rank() - root, n);
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      comm.recv(mod(v - mask + root, n), data, opts.tag);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n) comm.send(mod(v + mask + root, n), data, opts.tag);
}

void allreduce_tree(Communicator& comm, std::span<const float> in, std::span<float> out,
                    const AlgoOptions& opts) {
  std::span<float> data = start(comm, in, out, "allreduce_tree");
  reduce_tree(comm, data, 0, opts);
  broadcast_tree(comm, data, 0, opts);
}

// --- v3: recursive halving and doubling (Rabenseifner) -----------------------------------------

// On p = 2^k ranks: halving rounds exchange half of the current range with the partner at
// distance p/2, p/4, ..., 1 and keep summing the other half, until each rank holds its one
// block (1/p of the vector) fully summed; doubling rounds exchange at distance 1, 2, ..., p/2 and
// double the range each time. The 2·rem ranks beyond p fold first: each even one of them sends
// its vector to the odd one above it and sits out; at the end it gets the result back.
void allreduce_halving_doubling(Communicator& comm, std::span<const float> in, std::span<float> out,
                                const AlgoOptions& opts) {
  std::span<float> data = start(comm, in, out, "allreduce_halving_doubling");
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = data.size();
  if (n == 1 || count == 0) return;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  CallScratch call_scratch(count, opts, comm);
  std::span<float> tmp = call_scratch.span;

  // Fold: rank r < 2·rem is even (sits out) or odd (takes its even neighbour's vector).
  int v = -1;  // rank among the p that take part
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      comm.send(r + 1, data, opts.tag);
    } else {
      comm.recv_reduce(r - 1, data, opts.tag);
      v = r / 2;
    }
  } else {
    v = r - rem;
  }
  auto real = [rem](int u) { return u < rem ? 2 * u + 1 : u + rem; };
  // Blocks [lo, hi) of p as one span of data.
  auto range = [&](int lo, int hi) {
    const Block a = block_of(count, p, lo);
    const Block b = block_of(count, p, hi - 1);
    return data.subspan(a.offset, b.offset + b.count - a.offset);
  };

  if (v >= 0) {
    // Reduce-scatter by recursive halving: keep the half whose blocks share our bit.
    int lo = 0, hi = p;
    for (int mask = p / 2; mask >= 1; mask >>= 1) {
      const int partner = real(v ^ mask);
      const int mid = (lo + hi) / 2;
      const bool upper = (v & mask) != 0;
      std::span<float> keep = upper ? range(mid, hi) : range(lo, mid);
      std::span<float> give = upper ? range(lo, mid) : range(mid, hi);
      // Receive-and-add into the half we keep while the partner's half goes out; the halves
      // do not overlap, so the partner may add into ours while we send it theirs.
      Request in = comm.irecv_reduce(partner, keep, tmp, opts.tag);
      Request out = comm.isend(partner, give, opts.tag);
      in.wait();
      out.wait();
      if (upper)
        lo = mid;
      else
        hi = mid;
    }
    // All-gather by recursive doubling: our aligned group of `mask` blocks for the partner's.
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner_v = v ^ mask;
      const int mine = v & ~(mask - 1), theirs = partner_v & ~(mask - 1);
      comm.sendrecv(real(partner_v), range(mine, mine + mask), real(partner_v),
                    range(theirs, theirs + mask), opts.tag);
    }
  }

  // Unfold: the odd ranks give the result back to their even neighbours.
  if (r < 2 * rem) {
    if (r % 2 == 1)
      comm.send(r - 1, data, opts.tag);
    else
      comm.recv(r + 1, data, opts.tag);
  }
}

// --- v4: ring ------------------------------------------------------------------------------------

// n-1 steps. In step s rank r sends block (r-s-1) to its right neighbour, receives block (r-s-2)
// from its left one and adds it to its own; after the last step block r holds the full sum.
// Every receive is a receive-and-add (irecv_reduce) posted up front: step s's goes into block
// (r-s-2), which this rank does not touch until it has arrived, so on the threads backend the
// left neighbour adds straight into it from its own buffer (one pass over memory, no scratch);
// elsewhere it arrives in scratch (at the same offsets) and is added on wait(). Pipelining: a
// segment summed in step s goes on to the right (step s+1) at once, while the rest of the block
// is still arriving.
//
// Out of place (`in` is not `data`), in is never copied to data: each receive is an irecv_add
// (data = in + message; on the threads backend the sender writes it in one pass, elsewhere in is
// copied to data when the receive is posted), and step 0's block goes out straight from `in`
// (data's copy of it is written by the all-gather).
namespace {
void reduce_scatter_ring_from(Communicator& comm, std::span<const float> in, std::span<float> data,
                              const AlgoOptions& opts) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = data.size();
  if (n == 1 || count == 0) return;
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  CallScratch call_scratch(count, opts, comm);
  std::span<float> tmp = call_scratch.span;
  auto block = [&](int s, int which) { return block_of(count, n, mod(r - s - which, n)); };
  const std::size_t seg_floats = ring_segment_floats(block_of(count, n, 0).count, opts);

  std::vector<std::vector<Request>> recvs(static_cast<std::size_t>(n - 1));
  for (int s = 0; s < n - 1; ++s)
    for_segments(block(s, 2), seg_floats, [&](Block seg) {
      recvs[static_cast<std::size_t>(s)].push_back(
          comm.irecv_add(left, in.subspan(seg.offset, seg.count), sub(data, seg),
                         scratch_sub(tmp, seg), opts.tag));
    });
  std::vector<Request> sends;
  for_segments(block(0, 1), seg_floats, [&](Block seg) {
    sends.push_back(comm.isend(right, in.subspan(seg.offset, seg.count), opts.tag));
  });
  for (int s = 0; s < n - 1; ++s) {
    std::size_t k = 0;
    for_segments(block(s, 2), seg_floats, [&](Block seg) {
      recvs[static_cast<std::size_t>(s)][k++].wait();
      if (s + 1 < n - 1) sends.push_back(comm.isend(right, sub(data, seg), opts.tag));
    });
  }
  wait_all(sends);
}
}  // namespace

void reduce_scatter_ring(Communicator& comm, std::span<float> data, const AlgoOptions& opts) {
  require_host(comm, "reduce_scatter_ring");
  reduce_scatter_ring_from(comm, data, data, opts);
}

// n-1 steps. In step s rank r sends block (r-s) to the right and receives block (r-s-1) from the
// left straight into place; a segment received is forwarded at once. Every receive goes to its
// own place in data, so all of them are posted up front.
void all_gather_ring(Communicator& comm, std::span<float> data, const AlgoOptions& opts) {
  require_host(comm, "all_gather_ring");
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = data.size();
  if (n == 1 || count == 0) return;
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  const std::size_t seg_floats = ring_segment_floats(block_of(count, n, 0).count, opts);
  std::vector<std::vector<Request>> recvs(static_cast<std::size_t>(n - 1));
  for (int s = 0; s < n - 1; ++s)
    for_segments(block_of(count, n, mod(r - s - 1, n)), seg_floats, [&](Block seg) {
      recvs[static_cast<std::size_t>(s)].push_back(comm.irecv(left, sub(data, seg), opts.tag));
    });
  std::vector<Request> sends;
  for_segments(block_of(count, n, r), seg_floats,
               [&](Block seg) { sends.push_back(comm.isend(right, sub(data, seg), opts.tag)); });
  for (int s = 0; s < n - 1; ++s) {
    std::size_t k = 0;
    for_segments(block_of(count, n, mod(r - s - 1, n)), seg_floats, [&](Block seg) {
      recvs[static_cast<std::size_t>(s)][k++].wait();
      if (s + 1 < n - 1) sends.push_back(comm.isend(right, sub(data, seg), opts.tag));
    });
  }
  wait_all(sends);
}

void allreduce_ring(Communicator& comm, std::span<const float> in, std::span<float> out,
                    const AlgoOptions& opts) {
  require_host(comm, "allreduce_ring");
  if (in.size() != out.size())
    throw std::invalid_argument("allreduce_ring: in and out differ in size");
  if (comm.size() == 1) {
    if (in.data() != out.data() && !in.empty()) std::memcpy(out.data(), in.data(), in.size_bytes());
    return;
  }
  reduce_scatter_ring_from(comm, in, out, opts);  // never copies in to out
  all_gather_ring(comm, out, opts);
}

// --- the backend's own ---------------------------------------------------------------------------

void allreduce_native(Communicator& comm, std::span<const float> in, std::span<float> out,
                      const AlgoOptions&) {
  comm.all_reduce(in, out);
}

HostGroups host_groups(Communicator& world, int host) {
  if (host < 0)
    throw std::invalid_argument("host_groups: host " + std::to_string(host) + " (need >= 0)");
  HostGroups g;
  g.local = world.split(host, world.rank());
  // Every host the same size: the counts are compared where every rank sees them.
  std::vector<float> mine(static_cast<std::size_t>(world.size()), 0.0f);
  if (g.local->rank() == 0)
    mine[static_cast<std::size_t>(world.rank())] = static_cast<float>(g.local->size());
  world.all_reduce(mine);
  int size = 0;
  for (const float c : mine)
    if (c > 0) {
      if (size != 0 && static_cast<int>(c) != size)
        throw std::invalid_argument("host_groups: hosts of " + std::to_string(size) + " and " +
                                    std::to_string(static_cast<int>(c)) +
                                    " ranks (every host needs the same number)");
      size = static_cast<int>(c);
    }
  g.cross = world.split(g.local->rank(), host);
  return g;
}

void allreduce_hierarchical(HostGroups& groups, std::span<const float> in, std::span<float> out,
                            AllReduceFn cross_algorithm, const AlgoOptions& opts) {
  if (in.size() != out.size())
    throw std::invalid_argument("allreduce_hierarchical: in and out differ in size");
  if (in.data() != out.data() && !in.empty()) std::copy(in.begin(), in.end(), out.begin());
  Communicator& local = *groups.local;
  reduce_scatter_ring(local, out, opts);
  const Block b = block_of(out.size(), local.size(), local.rank());
  const std::span<float> mine = out.subspan(b.offset, b.count);
  (cross_algorithm != nullptr ? cross_algorithm : &allreduce_ring)(*groups.cross, mine, mine, opts);
  all_gather_ring(local, out, opts);
}

}  // namespace concurdl::dp
