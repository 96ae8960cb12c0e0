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

// The ring's block b of count values: block_of over pairs of values, so that every block starts
// on a pair's boundary (on a float's, when the data do) and holds whole pairs, but for a last
// value left over at the end.
Block block16(std::size_t count, int n, int b) {
  const Block w = block_of(words(count), n, b);
  const std::size_t begin = std::min(count, 2 * w.offset);
  const std::size_t end = std::min(count, 2 * (w.offset + w.count));
  return {begin, end - begin};
}

// Block b's segments of `seg` values (even; 0: the whole block), in order.
template <class F>
void for_segments(Block b, std::size_t seg, F&& f) {
  if (seg == 0) seg = b.count;
  for (std::size_t off = 0; off < b.count; off += seg)
    f(Block{b.offset + off, std::min(seg, b.count - off)});
}

}  // namespace

void allreduce_ring_16bit(Communicator& comm, nn::Precision p, std::span<std::uint16_t> data,
                          const AlgoOptions& opts) {
  if (p == nn::Precision::fp32)
    throw std::invalid_argument("allreduce_ring_16bit: fp32 is allreduce_ring's");
  if (comm.memory() != MemorySpace::host)
    throw std::invalid_argument("allreduce_ring_16bit: the " + std::string(comm.name()) +
                                " backend's buffers are not in host memory");
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = data.size();
  if (n == 1 || count == 0) return;
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  // Segments as the float32 ring cuts its blocks (ring_segment_floats), counted in pairs.
  const std::size_t seg = 2 * ring_segment_floats(words(block16(count, n, 0).count), opts);
  Scratch& buf = scratch();
  if (buf.in.size() < 2 * words(count)) buf.in.resize(2 * words(count));
  if (buf.out.size() < 2 * words(count)) buf.out.resize(2 * words(count));
  // A segment received into `in` at its own offset, as floats' bytes (read back as the 16-bit
  // values they are); one sent from `out` when it does not lie on a float's boundary.
  const auto scratch_of = [&](Block b) {
    return std::span<float>(reinterpret_cast<float*>(buf.in.data() + b.offset), words(b.count));
  };
  const auto wire = [&](Block b) {
    std::uint16_t* v = data.data() + b.offset;
    if (in_place(v, b.count)) return std::span<const float>(as_words(v, b.count));
    std::uint16_t* w = buf.out.data() + b.offset;
    std::memcpy(w, v, b.count * sizeof(std::uint16_t));
    if (b.count % 2 != 0) w[b.count] = 0;  // the pad of an odd last segment
    return std::span<const float>(reinterpret_cast<const float*>(w), words(b.count));
  };
  const Combine add{&add_16bit_words, &p};
  const std::size_t steps = static_cast<std::size_t>(n - 1);

  // Reduce-scatter: in step s, block (r - s) goes right and block (r - s - 1) comes from the
  // left and is added to this rank's own, widened, summed in float32 and rounded in one pass;
  // after n - 1 steps rank r holds the sum of block r + 1. Every receive is posted up front, so
  // that a sender finds it waiting (the threads backend then adds from the sender's buffer into
  // ours: no copy in between), and each segment goes on as soon as it is summed.
  std::vector<std::vector<Request>> recvs(steps);
  for (std::size_t s = 0; s < steps; ++s)
    for_segments(block16(count, n, mod(r - static_cast<int>(s) - 1, n)), seg, [&](Block b) {
      std::uint16_t* to = data.data() + b.offset;
      recvs[s].push_back(in_place(to, b.count) ? comm.irecv_combine(left, as_words(to, b.count),
                                                                    scratch_of(b), add, opts.tag)
                                               : comm.irecv(left, scratch_of(b), opts.tag));
    });
  std::vector<Request> sends;
  for_segments(block16(count, n, r), seg,
               [&](Block b) { sends.push_back(comm.isend(right, wire(b), opts.tag)); });
  for (std::size_t s = 0; s < steps; ++s) {
    std::size_t k = 0;
    for_segments(block16(count, n, mod(r - static_cast<int>(s) - 1, n)), seg, [&](Block b) {
      recvs[s][k++].wait();
      if (!in_place(data.data() + b.offset, b.count))
        nn::add_16bit(p, data.subspan(b.offset, b.count),
                      std::span<const std::uint16_t>(buf.in).subspan(b.offset, b.count));
      if (s + 1 < steps) sends.push_back(comm.isend(right, wire(b), opts.tag));
    });
  }
  wait_all(sends);
  sends.clear();

  // All-gather: in step s, block (r + 1 - s) goes right and block (r - s) arrives, in place
  // where it lies on a float's boundary, and goes on at the next step.
  for (auto& v : recvs) v.clear();
  for (std::size_t s = 0; s < steps; ++s)
    for_segments(block16(count, n, mod(r - static_cast<int>(s), n)), seg, [&](Block b) {
      std::uint16_t* to = data.data() + b.offset;
      recvs[s].push_back(comm.irecv(
          left, in_place(to, b.count) ? as_words(to, b.count) : scratch_of(b), opts.tag));
    });
  for_segments(block16(count, n, mod(r + 1, n)), seg,
               [&](Block b) { sends.push_back(comm.isend(right, wire(b), opts.tag)); });
  for (std::size_t s = 0; s < steps; ++s) {
    std::size_t k = 0;
    for_segments(block16(count, n, mod(r - static_cast<int>(s), n)), seg, [&](Block b) {
      recvs[s][k++].wait();
      std::uint16_t* to = data.data() + b.offset;
      if (!in_place(to, b.count) && b.count > 0)
        std::memcpy(to, buf.in.data() + b.offset, b.count * sizeof(std::uint16_t));
      if (s + 1 < steps) sends.push_back(comm.isend(right, wire(b), opts.tag));
    });
  }
  wait_all(sends);
}

}  // namespace concurdl::dp
