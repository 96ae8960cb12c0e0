// The 16-bit ring all-reduce (allreduce16.hpp).
#include "concurdl/dp/allreduce16.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace concurdl::dp {

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }
std::size_t words(std::size_t values) { return (values + 1) / 2; }

// Where a block of c values at v can be received or summed in place: they start on a float's
// boundary and are even in number (most blocks).
bool in_place(const std::uint16_t* v, std::size_t c) {
  return c % 2 == 0 && reinterpret_cast<std::uintptr_t>(v) % alignof(float) == 0;
}

// The receive's reduction (Communicator::irecv_combine): a message of 16-bit values added into
// the block it belongs to, widened, summed in float32 and rounded in one pass (nn::add_16bit),
// on the threads backend by the sender, straight from its buffer.
void add_16bit_words(float* acc, const float* message, std::size_t n, const void* context) {
  const nn::Precision p = *static_cast<const nn::Precision*>(context);
  nn::add_16bit(
      p, std::span<std::uint16_t>(reinterpret_cast<std::uint16_t*>(acc), 2 * n),
      std::span<const std::uint16_t>(reinterpret_cast<const std::uint16_t*>(message), 2 * n));
}

std::span<float> as_words(std::uint16_t* v, std::size_t c) {
  return {reinterpret_cast<float*>(v), c / 2};
}

// A rank's buffers, kept between calls (each rank is one thread, under either backend): a
// fresh allocation per call would be paged in on every step. Each segment in flight has its own
// region, at its own offset: `in` for a message that cannot land in place, `out` for one that
// cannot leave from where it lies.
struct Scratch {
  std::vector<std::uint16_t> out, in;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// What both halves of the ring set up: the ranks' places, the segments, the scratch and the
// views of a segment as floats' bytes (received into `in` at its own offset, or sent from
// `out` when it does not lie on a float's boundary).
struct Ring16 {
  Ring16(Communicator& c, std::span<std::uint16_t> d, const AlgoOptions& o, const char* what)
      : comm(c), data(d), opts(o), n(c.size()), r(c.rank()) {
    if (comm.memory() != MemorySpace::host)
      throw std::invalid_argument(std::string(what) + ": the " + std::string(comm.name()) +
                                  " backend's buffers are not in host memory");
    right = (r + 1) % n;
    left = (r - 1 + n) % n;
    count = data.size();
    steps = static_cast<std::size_t>(n - 1);
    // Segments as the float32 ring cuts its blocks (ring_segment_floats), counted in pairs.
    seg = 2 * ring_segment_floats(words(block_16bit(count, n, 0).count), opts);
    Scratch& s = scratch();
    if (s.in.size() < 2 * words(count)) s.in.resize(2 * words(count));
    if (s.out.size() < 2 * words(count)) s.out.resize(2 * words(count));
    in = s.in.data();
    out = s.out.data();
  }
  Block block(int b) const { return block_16bit(count, n, mod(b, n)); }
  std::span<float> scratch_of(Block b) const {
    return {reinterpret_cast<float*>(in + b.offset), words(b.count)};
  }
  std::span<const float> wire(Block b) const {
    std::uint16_t* v = data.data() + b.offset;
    if (in_place(v, b.count)) return as_words(v, b.count);
    std::uint16_t* w = out + b.offset;
    std::memcpy(w, v, b.count * sizeof(std::uint16_t));
    if (b.count % 2 != 0) w[b.count] = 0;  // the pad of an odd last block
    return {reinterpret_cast<const float*>(w), words(b.count)};
  }
  Communicator& comm;
  std::span<std::uint16_t> data;
  const AlgoOptions& opts;
  int n, r, right = 0, left = 0;
  std::size_t count = 0, steps = 0, seg = 0;
  std::uint16_t *in = nullptr, *out = nullptr;
};

void check_format(nn::Precision p, const char* what) {
  if (p == nn::Precision::fp32)
    throw std::invalid_argument(std::string(what) + ": fp32 is the float32 ring's");
}

}  // namespace

Block block_16bit(std::size_t count, int n, int b) {
  const Block w = block_of(words(count), n, b);
  const std::size_t begin = std::min(count, 2 * w.offset);
  const std::size_t end = std::min(count, 2 * (w.offset + w.count));
  return {begin, end - begin};
}

Block reduce_scatter_ring_16bit(Communicator& comm, nn::Precision p, std::span<std::uint16_t> data,
                                const AlgoOptions& opts) {
  check_format(p, "reduce_scatter_ring_16bit");
  Ring16 g(comm, data, opts, "reduce_scatter_ring_16bit");
  const Block mine = g.block(g.r + 1);
  if (g.n == 1 || g.count == 0) return mine;
  const Combine add{&add_16bit_words, &p};
  // In step s, block (r - s) goes right and block (r - s - 1) comes from the left and is added
  // to this rank's own, widened, summed in float32 and rounded in one pass; after n - 1 steps
  // rank r holds the sum of block r + 1. Every receive is posted up front, so that a sender
  // finds it waiting (the threads backend then adds from the sender's buffer into ours: no copy
  // in between), and each segment goes on as soon as it is summed.
  std::vector<std::vector<Request>> recvs(g.steps);
  for (std::size_t s = 0; s < g.steps; ++s)
    for_segments(g.block(g.r - static_cast<int>(s) - 1), g.seg, [&](Block b) {
      std::uint16_t* to = data.data() + b.offset;
      recvs[s].push_back(in_place(to, b.count) ? comm.irecv_combine(g.left, as_words(to, b.count),
                                                                    g.scratch_of(b), add, opts.tag)
                                               : comm.irecv(g.left, g.scratch_of(b), opts.tag));
    });
  std::vector<Request> sends;
  for_segments(g.block(g.r), g.seg,
               [&](Block b) { sends.push_back(comm.isend(g.right, g.wire(b), opts.tag)); });
  for (std::size_t s = 0; s < g.steps; ++s) {
    std::size_t k = 0;
    for_segments(g.block(g.r - static_cast<int>(s) - 1), g.seg, [&](Block b) {
      recvs[s][k++].wait();
      if (!in_place(data.data() + b.offset, b.count))
        nn::add_16bit(p, data.subspan(b.offset, b.count),
                      std::span<const std::uint16_t>(g.in + b.offset, b.count));
      if (s + 1 < g.steps) sends.push_back(comm.isend(g.right, g.wire(b), opts.tag));
    });
  }
  wait_all(sends);
  return mine;
}

void all_gather_ring_16bit(Communicator& comm, std::span<std::uint16_t> data,
                           const AlgoOptions& opts) {
  Ring16 g(comm, data, opts, "all_gather_ring_16bit");
  if (g.n == 1 || g.count == 0) return;
  // In step s, block (r + 1 - s) goes right and block (r - s) arrives, in place where it lies
  // on a float's boundary, and goes on at the next step.
  std::vector<std::vector<Request>> recvs(g.steps);
  for (std::size_t s = 0; s < g.steps; ++s)
    for_segments(g.block(g.r - static_cast<int>(s)), g.seg, [&](Block b) {
      std::uint16_t* to = data.data() + b.offset;
      recvs[s].push_back(comm.irecv(
          g.left, in_place(to, b.count) ? as_words(to, b.count) : g.scratch_of(b), opts.tag));
    });
  std::vector<Request> sends;
  for_segments(g.block(g.r + 1), g.seg,
               [&](Block b) { sends.push_back(comm.isend(g.right, g.wire(b), opts.tag)); });
  for (std::size_t s = 0; s < g.steps; ++s) {
    std::size_t k = 0;
    for_segments(g.block(g.r - static_cast<int>(s)), g.seg, [&](Block b) {
      recvs[s][k++].wait();
      std::uint16_t* to = data.data() + b.offset;
      if (!in_place(to, b.count) && b.count > 0)
        std::memcpy(to, g.in + b.offset, b.count * sizeof(std::uint16_t));
      if (s + 1 < g.steps) sends.push_back(comm.isend(g.right, g.wire(b), opts.tag));
    });
  }
  wait_all(sends);
}

void allreduce_ring_16bit(Communicator& comm, nn::Precision p, std::span<std::uint16_t> data,
                          const AlgoOptions& opts) {
  check_format(p, "allreduce_ring_16bit");
  if (comm.memory() != MemorySpace::host)
    throw std::invalid_argument("allreduce_ring_16bit: the " + std::string(comm.name()) +
                                " backend's buffers are not in host memory");
  if (comm.size() == 1 || data.empty()) return;
  reduce_scatter_ring_16bit(comm, p, data, opts);
  all_gather_ring_16bit(comm, data, opts);
}

}  // namespace concurdl::dp
