// All-to-all written by hand over a Communicator's send/recv: rank r's block j goes to rank j,
// where it lands as block r. It is the collective of expert parallelism (tokens to the rank
// that holds their expert, and back) and of a distributed transpose. Unlike an all-reduce it
// reduces nothing: each rank keeps 1/n of its data and must send the rest, so at least
// (n - 1)/n of its N floats leave a rank whatever the algorithm; the algorithms differ in how
// many messages carry them and how often a float is forwarded. With α the cost of a message and
// β of a float, a rank's time is about:
//
//   pairwise  n - 1 steps; at step s rank r sends its block for r + s and receives rank r - s's
//             block for it: (n - 1)α + (n - 1)/n · Nβ (Thakur, Rabenseifner, Gropp 2005: their
//             schedule for any n; for a power of two they pair r with r XOR s, at the same cost)
//   bruck     ⌈log2 n⌉ steps; after a local rotation, at step k rank r sends to r + 2^k every
//             block whose index has bit k set (about half of them), and a final rotation with a
//             reversal puts rank j's block at j: ⌈log2 n⌉α + ⌈log2 n⌉/2 · Nβ (n a power of two);
//             a float is forwarded up to ⌈log2 n⌉ times (Bruck et al. 1997, IEEE TPDS 8(11))
//   native    the backend's own: shared-memory copies (threads), MPI_Alltoallv (mpi)
//
// Pairwise moves every float once and suits large blocks; Bruck sends ⌈log2 n⌉/2 · n/(n - 1)
// times pairwise's bytes (4/3 at 4 ranks) in ⌈log2 n⌉ messages instead of n - 1, and suits small
// ones. MPICH chooses among three by the block per destination and n: Bruck for blocks of at most
// 256 bytes at 8 ranks or more, every receive and send posted at once up to 32 KiB (what
// Communicator's default all_to_all_v does), pairwise above.
//
// Sizes: the variable form (all_to_all_v, as MPI_Alltoallv and PyTorch's all_to_all_single with
// split sizes) takes a count per destination; a rank learns what it will receive by exchanging
// the counts first (exchange_counts: each count as two floats of 22 bits). Bruck needs equal
// blocks. Bus bandwidth as nccl-tests defines it for all-to-all (src/alltoall.cu,
// AlltoAllGetBw): algbw = the bytes a rank sends, its own block included, over the time, busbw =
// algbw · (n - 1)/n, the bytes that must leave the rank per second. All of these work on host
// memory (std::invalid_argument on another backend).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {

// What every rank sends to this one, given what this one sends to each (send_counts[j] floats
// to rank j): an all-to-all of the counts (each count exact up to 2^44). Collective.
std::vector<std::size_t> exchange_counts(Communicator& comm,
                                         std::span<const std::size_t> send_counts,
                                         const AlgoOptions& opts = {});

// Variable blocks: `send` holds size() blocks of send_counts[j] floats one after the other,
// `recv` size() blocks of recv_counts[j]; recv_counts[j] must be what rank j sends here.
void all_to_all_v_pairwise(Communicator& comm, std::span<const float> send,
                           std::span<const std::size_t> send_counts, std::span<float> recv,
                           std::span<const std::size_t> recv_counts, const AlgoOptions& opts = {});

// --- equal blocks: send and recv hold size() blocks of send.size() / size() floats ---
void all_to_all_pairwise(Communicator& comm, std::span<const float> send, std::span<float> recv,
                         const AlgoOptions& opts = {});
void all_to_all_bruck(Communicator& comm, std::span<const float> send, std::span<float> recv,
                      const AlgoOptions& opts = {});
void all_to_all_native(Communicator& comm, std::span<const float> send, std::span<float> recv,
                       const AlgoOptions& opts = {});

using AllToAllFn = void (*)(Communicator&, std::span<const float>, std::span<float>,
                            const AlgoOptions&);

// The messages and floats one rank sends in one all-to-all of N floats a rank (the α–β model's
// counts): pairwise n - 1 and (n - 1)/n N; Bruck ⌈log2 n⌉ and the blocks whose rotated index has
// each bit set, summed over the bits.
struct AllToAllTraffic {
  double messages = 0;
  double floats = 0;
};
AllToAllTraffic pairwise_traffic(int ranks, double floats_per_rank);
AllToAllTraffic bruck_traffic(int ranks, double floats_per_rank);

// --- the table ---
struct AllToAllVariant : VariantInfo {
  AllToAllFn run;
  bool hand_written = true;  // over send/recv (false: the backend's own)
};

inline constexpr AllToAllVariant kAllToAllRows[] = {
    {{"pairwise",
      "n - 1 exchanges, the block for rank r + s sent while rank r - s's arrives: every float "
      "crosses once, one message per peer"},
     &all_to_all_pairwise},
    {{"bruck",
      "Bruck's: after a local rotation, log2(n) exchanges with rank r + 2^k of the blocks whose "
      "index has bit k set; log2(n) messages instead of n - 1, each float forwarded up to "
      "log2(n) times"},
     &all_to_all_bruck},
    {{"native",
      "the backend's own: copies out of the senders' buffers (threads), MPI_Alltoallv (mpi); the "
      "peer the hand-written ones are measured against"},
     &all_to_all_native,
     false},
};
inline constexpr VariantTable kAllToAllVariants{kAllToAllRows, "algorithm"};

}  // namespace concurdl::dp
