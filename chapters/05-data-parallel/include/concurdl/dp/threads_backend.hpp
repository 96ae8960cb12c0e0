// The threads backend: ranks are threads of one process, messages are copies in shared memory.
// It runs everywhere, needs no launcher, and is the fast path on one machine.
//
//   concurdl::dp::run_threads(4, [](concurdl::dp::Communicator& comm) {
//     std::vector<float> grad = ...;
//     comm.all_reduce(grad);  // or concurdl::dp::allreduce_ring(comm, grad, grad, {})
//   });
//
// Point to point: each rank has an inbox (a mutex, a condition variable, the receives posted to
// it and the messages that arrived before their receive). A send that finds its receive posted
// copies straight into the receiver's buffer (one copy, outside the lock); otherwise it copies
// the message into a pooled buffer and returns (two copies in all, but send never blocks). A
// large message (64 KiB and up) first waits a little for its receive (no longer than the extra
// copy would take, at most 100 us, and only when no more ranks than CPUs): ranks that leave a
// barrier together are a wake-up apart, and buffering there halved the ring's bandwidth.
// A waiting receive spins up to 5 us (same condition) before it sleeps on the condition variable,
// and so does a rank waiting in a barrier (the native collectives' two a call).
// CONCURDL_THREADS_SPIN=0 turns every spin off (a diagnostic: what the spinning costs or saves;
// a run's provenance records the variable).
// A receive-and-add (irecv_reduce) works the same way with an add for the copy: the sender adds
// its data into the receiver's buffer, so a ring step reads and writes memory once.
// The native collectives publish every rank's buffers and work on them in place: all_reduce has
// each rank sum its 1/n slice over every rank's input and write it into every rank's output
// (each byte read once and written n times, with two barriers), like a shared-memory MPI.
//
// Failure: a rank's exception marks the world failed and wakes everyone; every rank waiting in
// recv, wait, barrier or a collective throws PeerFailed("rank R failed: <what>"). A rank that
// returns while another waits for a message it never sent, or at a barrier it will never reach,
// makes that rank throw too (a deadlock in the program becomes an error, not a hang).
#pragma once

#include <functional>

#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {

// Starts `ranks` threads, runs body(comm) on each with its rank's communicator, and joins them.
// If any rank threw, rethrows the exception of the rank that failed first (the others, woken
// by it, throw PeerFailed and are not reported). ranks < 1: std::invalid_argument.
void run_threads(int ranks, const std::function<void(Communicator&)>& body);

// Whether the threads backend's ranks spin (above) in a world of `ranks`: no more ranks than
// CPUs, unless CONCURDL_THREADS_SPIN is 0. Another value than 0 or 1: std::invalid_argument
// naming it.
bool threads_spin(int ranks);

}  // namespace concurdl::dp
