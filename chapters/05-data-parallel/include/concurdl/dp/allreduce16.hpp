// The ring all-reduce with 16-bit values on the wire: mixed-precision data parallelism sums its
// bfloat16 (or binary16) gradients in half the bytes of float32's.
//
// The ring of allreduce_ring (algorithms.hpp): n - 1 steps of reduce-scatter, in which each rank
// adds the partial sum it receives to its own block in float32 and rounds the result to 16 bits
// before sending it on, then n - 1 steps of all-gather. Every rank ends with the bits of the
// block's owner, so the replicas stay identical. A partial sum is rounded once per hop: n - 1
// roundings for each value, the price of sending it in 16 bits (a float32 sum rounded once at
// the end would need float32 on the wire). An infinity or NaN anywhere reaches every rank: the
// loss scaler's overflow check after it sees the same thing on all.
//
// As allreduce_ring does, it sends each block in segments (ring_segment_floats, counted in pairs
// of values), every receive posted before the sends, so that a segment summed goes on while the
// rest arrives; the receive is Communicator::irecv_combine with the widen-add-round
// (nn::add_16bit) as its reduction, which on the threads backend the sender applies from its
// own buffer into the receiver's block: one pass, no copy in between.
//
// The Communicator moves floats; a run of c 16-bit values travels as ceil(c / 2) floats' bytes
// (never read as floats). The blocks are cut on pairs of values (block_of over the pairs), so
// every block but the last starts on a float's boundary and holds whole pairs: it is sent from
// and received into `data` where it lies (when `data` starts on a float's boundary), and only a
// last block of odd size pads one value. bytes_sent counts 2 (n - 1) / n x 2 bytes per value,
// half of allreduce_ring's 2 (n - 1) / n x 4 (plus 2 bytes for an odd last block, and up to 2 a
// block for pairs that do not split evenly over the ranks).
#pragma once

#include <cstdint>
#include <span>

#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/nn/precision.hpp"

namespace concurdl::dp {

// In place: afterwards every rank's `data` holds the sum over the ranks (the same bits on every
// rank). `p` is bf16 or fp16 (fp32: std::invalid_argument: use allreduce_ring). Every rank calls
// it with the same size; opts.tag for all its messages. Host memory only.
void allreduce_ring_16bit(Communicator& comm, nn::Precision p, std::span<std::uint16_t> data,
                          const AlgoOptions& opts = {});

// Its two halves, for a step that works between them (the data-parallel trainer's sharded
// update: each rank updates the block it holds summed, then the ranks gather the result).
// The ring's block b of `count` values at n ranks: block_of over pairs of values.
Block block_16bit(std::size_t count, int n, int b);
// The reduce-scatter: afterwards this rank's block (rank + 1) mod n of `data` holds the sum over
// the ranks (the same bits allreduce_ring_16bit leaves there); returns that block. The other
// blocks hold partial sums.
Block reduce_scatter_ring_16bit(Communicator& comm, nn::Precision p, std::span<std::uint16_t> data,
                                const AlgoOptions& opts = {});
// The all-gather: rank r's block (r + 1) mod n is in place before; every block is everywhere
// after, each with its holder's bits.
void all_gather_ring_16bit(Communicator& comm, std::span<std::uint16_t> data,
                           const AlgoOptions& opts = {});

}  // namespace concurdl::dp
