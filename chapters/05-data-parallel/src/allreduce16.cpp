// The 16-bit ring all-reduce (allreduce16.hpp).
#include "concurdl/dp/allreduce16.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace concurdl::dp {

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }
std::size_t words(std::size_t values) { return (values + 1) / 2; }

// The floats' bytes a block of c 16-bit values travels as: the values themselves when they
// start on a float's boundary and are even in number (most blocks: no copy), else a copy with a
// zero pad in `wire`. The Communicator copies bytes and never reads them as floats.
std::span<const float> on_the_wire(const std::uint16_t* v, std::size_t c,
                                   std::vector<std::uint16_t>& wire) {
  if (c % 2 == 0 && reinterpret_cast<std::uintptr_t>(v) % alignof(float) == 0)
    return {reinterpret_cast<const float*>(v), c / 2};
  wire.assign(2 * words(c), 0);
  if (c > 0) std::memcpy(wire.data(), v, c * sizeof(std::uint16_t));
  return {reinterpret_cast<const float*>(wire.data()), words(c)};
}

// A rank's buffers, kept between calls (each rank is one thread, under either backend): a
// fresh allocation per call would be paged in on every step.
struct Scratch {
  std::vector<std::uint16_t> out, in;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
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
  const std::size_t most = block_of(count, n, 0).count;
  Scratch& buf = scratch();
  if (buf.in.size() < 2 * words(most)) buf.in.resize(2 * words(most));
  // Received halves land in `in` as floats' bytes and are read back as the 16-bit values they are.
  const auto in_words = [&](std::size_t c) {
    return std::span<float>(reinterpret_cast<float*>(buf.in.data()), words(c));
  };
  // Reduce-scatter: in step s, block (r - s) goes right and block (r - s - 1) comes from the
  // left and is added to this rank's own, widened, summed in float32 and rounded in one pass;
  // after n - 1 steps rank r holds the sum of block r + 1.
  for (int s = 0; s < n - 1; ++s) {
    const Block send = block_of(count, n, mod(r - s, n));
    const Block recv = block_of(count, n, mod(r - s - 1, n));
    Request sent =
        comm.isend(right, on_the_wire(data.data() + send.offset, send.count, buf.out), opts.tag);
    comm.recv(left, in_words(recv.count), opts.tag);
    nn::add_16bit(p, data.subspan(recv.offset, recv.count),
                  std::span<const std::uint16_t>(buf.in).first(recv.count));
    sent.wait();
  }
  // All-gather: in step s, block (r + 1 - s) goes right and block (r - s) arrives, in place
  // (straight into `data` when it starts on a float's boundary and is even in number).
  for (int s = 0; s < n - 1; ++s) {
    const Block send = block_of(count, n, mod(r + 1 - s, n));
    const Block recv = block_of(count, n, mod(r - s, n));
    Request sent =
        comm.isend(right, on_the_wire(data.data() + send.offset, send.count, buf.out), opts.tag);
    std::uint16_t* to = data.data() + recv.offset;
    if (recv.count % 2 == 0 && reinterpret_cast<std::uintptr_t>(to) % alignof(float) == 0) {
      comm.recv(left, std::span<float>(reinterpret_cast<float*>(to), recv.count / 2), opts.tag);
    } else {
      comm.recv(left, in_words(recv.count), opts.tag);
      if (recv.count > 0) std::memcpy(to, buf.in.data(), recv.count * sizeof(std::uint16_t));
    }
    sent.wait();
  }
}

}  // namespace concurdl::dp
