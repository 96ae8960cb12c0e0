// All-reduce written by hand over a Communicator's send/recv, simplest first. Every one is a free
// function with the same signature, so the table below drives the tests, the experiments and
// the lesson's list; they run on every host-memory backend (threads, mpi) unchanged.
//
// With n ranks, N floats, α the cost of one message and β the cost of one float on the wire,
// each rank's time is roughly (the lesson derives these):
//
//   v1_naive             every rank sends to 0, 0 sums and sends back   2(n-1)·(α + Nβ) at root
//   v2_tree              binomial tree: reduce to 0, broadcast from 0   2·log2(n)·(α + Nβ)
//   v3_halving_doubling  Rabenseifner: reduce-scatter by recursive      2·log2(n)·α + 2Nβ
//                        halving, all-gather by recursive doubling
//   v4_ring              ring reduce-scatter + ring all-gather,         2(n-1)·α + 2Nβ(n-1)/n
//                        segmented and pipelined
//   native               the backend's own (shared-memory slices, MPI_Allreduce, NCCL)
//
// Every "receive and add" is Communicator::recv_reduce / irecv_reduce: on the threads backend the
// sender adds straight into the receiver's buffer (no copy through scratch), elsewhere the
// message lands in scratch and is added after it arrives.
//
// The ring's pieces are exported on their own, over one buffer split into n blocks (block_of:
// sizes that do not divide by n give the first N mod n blocks one more float):
//   reduce_scatter_ring  afterwards rank r's block r holds the sum of every rank's block r;
//   all_gather_ring      rank r's block r is in place before; every block is everywhere after.
// Chapter 06 gathers activations with all_gather_ring; chapter 07 broadcasts with
// broadcast_tree. Tags: each call uses opts.tag for all its messages (they are told apart by
// their order), so concurrent point-to-point traffic of the caller's must use other tags.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>

#include "concurdl/core/memory.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {

// AlgoOptions::segment_floats's default: the ring chooses (ring_segment_floats).
inline constexpr std::size_t kAutoSegment = ~std::size_t{0};

struct AlgoOptions {
  int tag = 1000;
  // The ring sends each block in segments of this many floats (0: one message per block) so
  // that a segment received and summed can go on to the next rank while the rest arrives.
  // kAutoSegment: chosen from the block's size (ring_segment_floats).
  std::size_t segment_floats = kAutoSegment;
  // Where the collective's scratch (the ring's and halving-doubling's received blocks, one whole
  // vector) is counted, as communication: with an account it is allocated for the call and
  // freed after it; without, each thread keeps one between calls (no page faults in a timed loop).
  MemoryAccount* memory = nullptr;
};

// The segment the ring uses for blocks of `block_floats`: opts.segment_floats, or with
// kAutoSegment an eighth of the block, at least 64 Ki floats (256 KiB) and at most 1 Mi floats
// (4 MiB). Eight segments a step keep the pipeline full; fewer, larger segments than a fixed
// 256 KiB cost fewer waits (each one a possible sleep and wake) on large messages.
constexpr std::size_t ring_segment_floats(std::size_t block_floats, const AlgoOptions& opts) {
  if (opts.segment_floats != kAutoSegment) return opts.segment_floats;
  constexpr std::size_t lo = std::size_t{1} << 16, hi = std::size_t{1} << 20;
  const std::size_t s = block_floats / 8;
  return s < lo ? lo : (s > hi ? hi : s);
}

// Block i of `count` floats split into `parts` blocks.
struct Block {
  std::size_t offset = 0;
  std::size_t count = 0;
};
constexpr Block block_of(std::size_t count, int parts, int i) {
  const auto p = static_cast<std::size_t>(parts);
  const auto k = static_cast<std::size_t>(i);
  const std::size_t base = count / p, extra = count % p;
  return {k * base + (k < extra ? k : extra), base + (k < extra ? 1 : 0)};
}

// The segments of block b, in order: pieces of at most `seg` elements (seg 0: the block whole);
// an empty block has none, on the sender's side and the receiver's alike. The float32 ring cuts
// its blocks with it, the 16-bit ring (allreduce16.hpp) its blocks of pairs.
template <class F>
void for_segments(Block b, std::size_t seg, F&& f) {
  if (seg == 0) seg = b.count;
  for (std::size_t off = 0; off < b.count; off += seg)
    f(Block{b.offset + off, std::min(seg, b.count - off)});
}

// std::invalid_argument naming `what` unless comm's memory is the host's: every hand-written
// collective (these, all_to_all.hpp's) works on host memory; a device backend has only its own.
void require_host(const Communicator& comm, const char* what);

// acc[i] += x[i] (the local step of every reduction).
void add_into(std::span<float> acc, std::span<const float> x);

// --- all-reduce: out = sum over ranks of in; `in` may be `out` (in place) ---
void allreduce_naive(Communicator& comm, std::span<const float> in, std::span<float> out,
                     const AlgoOptions& opts = {});
void allreduce_tree(Communicator& comm, std::span<const float> in, std::span<float> out,
                    const AlgoOptions& opts = {});
void allreduce_halving_doubling(Communicator& comm, std::span<const float> in, std::span<float> out,
                                const AlgoOptions& opts = {});
void allreduce_ring(Communicator& comm, std::span<const float> in, std::span<float> out,
                    const AlgoOptions& opts = {});
void allreduce_native(Communicator& comm, std::span<const float> in, std::span<float> out,
                      const AlgoOptions& opts = {});

// --- the building blocks, in place on one buffer ---
void reduce_scatter_ring(Communicator& comm, std::span<float> data, const AlgoOptions& opts = {});
void all_gather_ring(Communicator& comm, std::span<float> data, const AlgoOptions& opts = {});
// Binomial trees rooted at `root`: reduce leaves the sum on root (other ranks' data are partial
// sums afterwards); broadcast copies root's data everywhere.
void reduce_tree(Communicator& comm, std::span<float> data, int root, const AlgoOptions& opts = {});
void broadcast_tree(Communicator& comm, std::span<float> data, int root,
                    const AlgoOptions& opts = {});

using AllReduceFn = void (*)(Communicator&, std::span<const float>, std::span<float>,
                             const AlgoOptions&);

// --- across hosts ---
// A rank's two groups on a cluster of hosts (machines, or GPUs of a node): `local`, the ranks of
// its host, and `cross`, the ranks of the other hosts with its place on theirs. Every host must
// have the same number of ranks (std::invalid_argument naming the hosts' counts otherwise).
// Collective over `world`: every rank passes the host it is on (0 .. hosts - 1).
struct HostGroups {
  std::unique_ptr<Communicator> local, cross;
};
HostGroups host_groups(Communicator& world, int host);

// Hierarchical all-reduce, in the phases of Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE:
// reduce-scatter within each host (ring), all-reduce each rank's block with the same block of
// every other host (`cross`, by `cross_algorithm`), all-gather within each host. With k ranks a
// host and H hosts, a rank sends 2(H - 1)/H · N/k floats between hosts, where a flat ring over
// all n = Hk ranks sends 2(n - 1)/n · N through whichever link it crosses. Where every rank has
// a link of its own, each carries (Hk - 1)/(H - 1) ≥ k times less than the flat ring's; where a
// host's k ranks share one, the host's link saves only (k - 1)/(Hk - 1) of the flat ring's
// bytes, which goes to 0 as H grows. Either way the ring steps fall from 2(Hk - 1) to 2(k - 1)
// inside hosts plus 2(H - 1) across them. `in` may be `out`.
void allreduce_hierarchical(HostGroups& groups, std::span<const float> in, std::span<float> out,
                            AllReduceFn cross_algorithm = nullptr, const AlgoOptions& opts = {});

// --- the table ---
struct AllReduceVariant : VariantInfo {
  AllReduceFn run;
  bool hand_written = true;  // over send/recv (false: the backend's own)
};

inline constexpr AllReduceVariant kAllReduceRows[] = {
    {{"v1_naive",
      "every rank sends its vector to rank 0, which sums and sends the result back: rank 0's "
      "link carries 2(n-1) vectors, so time grows linearly with ranks"},
     &allreduce_naive},
    {{"v2_tree",
      "binomial tree: reduce to 0 then broadcast, log2(n) rounds each; fewer rounds, but every "
      "round still moves the whole vector"},
     &allreduce_tree},
    {{"v3_halving_doubling",
      "Rabenseifner: recursive halving reduce-scatter then recursive doubling all-gather; log2(n) "
      "rounds and 2N(n-1)/n floats per rank (extra ranks of a non-power of two fold in first)"},
     &allreduce_halving_doubling},
    {{"v4_ring",
      "ring reduce-scatter then ring all-gather, pipelined in segments: 2(n-1) steps, each rank "
      "sends 2N(n-1)/n floats to one neighbour; bandwidth-optimal, latency grows with n"},
     &allreduce_ring},
    {{"native",
      "the backend's own: shared-memory slices (threads), MPI_Allreduce (mpi), NCCL (nccl); the "
      "peer the hand-written ones are measured against"},
     &allreduce_native,
     false},
};
inline constexpr VariantTable kAllReduceVariants{kAllReduceRows, "algorithm"};

}  // namespace concurdl::dp
