// The 16-bit ring all-reduce (allreduce16.hpp).
#include "concurdl/dp/allreduce16.hpp"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace concurdl::dp {

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }
std::size_t words(std::size_t values) { return (values + 1) / 2; }

// c 16-bit values into the bytes of ceil(c / 2) floats (a zero pad), and back.
void pack(const std::uint16_t* v, std::size_t c, std::vector<float>& wire) {
  wire.resize(words(c));
  if (c == 0) return;  // an empty block (fewer values than ranks): nothing to copy
  if (c % 2 != 0) wire.back() = 0.0f;
  std::memcpy(wire.data(), v, c * sizeof(std::uint16_t));
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
  std::vector<float> out, in(words(most)), mine(most), theirs(most);
  std::vector<std::uint16_t> got(most);
  // Reduce-scatter: in step s, block (r - s) goes right and block (r - s - 1) comes from the
  // left and is added to this rank's own; after n - 1 steps rank r holds the sum of block r + 1.
  for (int s = 0; s < n - 1; ++s) {
    const Block send = block_of(count, n, mod(r - s, n));
    const Block recv = block_of(count, n, mod(r - s - 1, n));
    pack(data.data() + send.offset, send.count, out);
    Request sent = comm.isend(right, out, opts.tag);
    comm.recv(left, std::span<float>(in).first(words(recv.count)), opts.tag);
    if (recv.count > 0) std::memcpy(got.data(), in.data(), recv.count * sizeof(std::uint16_t));
    const std::span<std::uint16_t> block = data.subspan(recv.offset, recv.count);
    nn::from_16bit(p, block, std::span<float>(mine).first(recv.count));
    nn::from_16bit(p, std::span<const std::uint16_t>(got).first(recv.count),
                   std::span<float>(theirs).first(recv.count));
    for (std::size_t i = 0; i < recv.count; ++i) mine[i] += theirs[i];
    nn::to_16bit(p, std::span<const float>(mine).first(recv.count), block);
    sent.wait();
  }
  // All-gather: in step s, block (r + 1 - s) goes right and block (r - s) arrives, in place.
  for (int s = 0; s < n - 1; ++s) {
    const Block send = block_of(count, n, mod(r + 1 - s, n));
    const Block recv = block_of(count, n, mod(r - s, n));
    pack(data.data() + send.offset, send.count, out);
    Request sent = comm.isend(right, out, opts.tag);
    comm.recv(left, std::span<float>(in).first(words(recv.count)), opts.tag);
    if (recv.count > 0)
      std::memcpy(data.data() + recv.offset, in.data(), recv.count * sizeof(std::uint16_t));
    sent.wait();
  }
}

}  // namespace concurdl::dp
