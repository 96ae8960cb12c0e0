// All-to-all by hand (all_to_all.hpp): pairwise exchange, Bruck's algorithm, the counts'
// exchange.
#include "concurdl/dp/all_to_all.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

namespace concurdl::dp {

namespace {

std::size_t block_size(const Communicator& comm, std::span<const float> send, std::span<float> recv,
                       const char* what) {
  const auto n = static_cast<std::size_t>(comm.size());
  if (send.size() != recv.size() || send.size() % n != 0)
    throw std::invalid_argument(std::string(what) +
                                ": send and recv must hold size() equal blocks");
  return send.size() / n;
}

// Where each block starts: offsets[j] = the sum of counts[0..j).
std::vector<std::size_t> offsets(std::span<const std::size_t> counts) {
  std::vector<std::size_t> at(counts.size() + 1, 0);
  for (std::size_t j = 0; j < counts.size(); ++j) at[j + 1] = at[j] + counts[j];
  return at;
}

}  // namespace

std::vector<std::size_t> exchange_counts(Communicator& comm,
                                         std::span<const std::size_t> send_counts,
                                         const AlgoOptions& opts) {
  require_host(comm, "exchange_counts");
  const auto n = static_cast<std::size_t>(comm.size());
  if (send_counts.size() != n) throw std::invalid_argument("exchange_counts: need size() counts");
  // Each count as two floats of 22 bits, both exact in a float's 24-bit significand.
  constexpr std::size_t kLow = std::size_t{1} << 22;
  std::vector<float> out(2 * n), in(2 * n);
  for (std::size_t j = 0; j < n; ++j) {
    if (send_counts[j] >= kLow * kLow)
      throw std::invalid_argument("exchange_counts: a count of " + std::to_string(send_counts[j]) +
                                  " floats is past 2^44");
    out[2 * j] = static_cast<float>(send_counts[j] / kLow);
    out[2 * j + 1] = static_cast<float>(send_counts[j] % kLow);
  }
  all_to_all_pairwise(comm, out, in, opts);
  std::vector<std::size_t> counts(n);
  for (std::size_t j = 0; j < n; ++j)
    counts[j] =
        static_cast<std::size_t>(in[2 * j]) * kLow + static_cast<std::size_t>(in[2 * j + 1]);
  return counts;
}

void all_to_all_v_pairwise(Communicator& comm, std::span<const float> send,
                           std::span<const std::size_t> send_counts, std::span<float> recv,
                           std::span<const std::size_t> recv_counts, const AlgoOptions& opts) {
  require_host(comm, "all_to_all_v_pairwise");
  const int n = comm.size(), r = comm.rank();
  if (send_counts.size() != static_cast<std::size_t>(n) ||
      recv_counts.size() != static_cast<std::size_t>(n))
    throw std::invalid_argument("all_to_all_v_pairwise: need size() send and receive counts");
  const std::vector<std::size_t> s_at = offsets(send_counts), r_at = offsets(recv_counts);
  if (send.size() != s_at.back() || recv.size() != r_at.back())
    throw std::invalid_argument("all_to_all_v_pairwise: buffers and counts disagree");
  const auto me = static_cast<std::size_t>(r);
  std::copy_n(send.data() + s_at[me], send_counts[me], recv.data() + r_at[me]);
  // Step s: to r + s, from r - s (Thakur et al.'s schedule for any n; for a power of two they
  // pair r with r XOR s, at the same cost). Each pair's messages meet in the same step.
  for (int s = 1; s < n; ++s) {
    const auto to = static_cast<std::size_t>((r + s) % n);
    const auto from = static_cast<std::size_t>((r - s + n) % n);
    comm.sendrecv(static_cast<int>(to), send.subspan(s_at[to], send_counts[to]),
                  static_cast<int>(from), recv.subspan(r_at[from], recv_counts[from]), opts.tag);
  }
}

void all_to_all_pairwise(Communicator& comm, std::span<const float> send, std::span<float> recv,
                         const AlgoOptions& opts) {
  const std::size_t b = block_size(comm, send, recv, "all_to_all_pairwise");
  const std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), b);
  all_to_all_v_pairwise(comm, send, counts, recv, counts, opts);
}

void all_to_all_bruck(Communicator& comm, std::span<const float> send, std::span<float> recv,
                      const AlgoOptions& opts) {
  require_host(comm, "all_to_all_bruck");
  const int n = comm.size(), r = comm.rank();
  const std::size_t b = block_size(comm, send, recv, "all_to_all_bruck");
  const auto un = static_cast<std::size_t>(n);
  // Phase 1, the rotation: block i of `work` is the block for rank r + i. The scratch is this
  // thread's, kept between calls (as the all-reduces' is): no page faults in a timed loop.
  thread_local std::vector<float> work, out, in;
  work.resize(send.size());
  for (std::size_t i = 0; i < un; ++i)
    std::copy_n(send.data() + ((static_cast<std::size_t>(r) + i) % un) * b, b, work.data() + i * b);
  // Phase 2: at bit k, the blocks whose index has the bit go k places on, packed in one
  // message; what arrives from r - k takes their places. After every bit, block i holds the
  // block rank r - i sent to this one.
  for (int k = 1; k < n; k <<= 1) {
    out.clear();
    for (std::size_t i = 0; i < un; ++i)
      if ((i & static_cast<std::size_t>(k)) != 0)
        out.insert(out.end(), work.begin() + static_cast<std::ptrdiff_t>(i * b),
                   work.begin() + static_cast<std::ptrdiff_t>((i + 1) * b));
    in.resize(out.size());
    comm.sendrecv((r + k) % n, out, (r - k + n) % n, in, opts.tag);
    std::size_t at = 0;
    for (std::size_t i = 0; i < un; ++i)
      if ((i & static_cast<std::size_t>(k)) != 0) {
        std::copy_n(in.data() + at, b, work.data() + i * b);
        at += b;
      }
  }
  // Phase 3, a rotation with a reversal (block i came from rank r - i): rank j's block is
  // block r - j.
  for (std::size_t j = 0; j < un; ++j)
    std::copy_n(work.data() + ((static_cast<std::size_t>(r) + un - j) % un) * b, b,
                recv.data() + j * b);
}

void all_to_all_native(Communicator& comm, std::span<const float> send, std::span<float> recv,
                       const AlgoOptions&) {
  comm.all_to_all(send, recv);
}

AllToAllTraffic pairwise_traffic(int ranks, double floats_per_rank) {
  const double n = ranks;
  return {n - 1, (n - 1) / n * floats_per_rank};
}

AllToAllTraffic bruck_traffic(int ranks, double floats_per_rank) {
  AllToAllTraffic t;
  const double block = floats_per_rank / ranks;
  for (int k = 1; k < ranks; k <<= 1) {
    t.messages += 1;
    for (int i = 0; i < ranks; ++i)
      if ((i & k) != 0) t.floats += block;
  }
  return t;
}

}  // namespace concurdl::dp
