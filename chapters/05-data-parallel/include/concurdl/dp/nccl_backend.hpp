// The NCCL backend: one rank per GPU, NCCL's collectives on device memory. The processes are
// started by mpirun as for the mpi backend; rank 0 makes the NCCL id and MPI broadcasts it (as
// nccl-tests and llm.c do).
//
//   concurdl::dp::NcclCommunicator comm(MPI_COMM_WORLD);  // GPU = local rank mod device count
//   float* grad = ...;                                     // cudaMalloc'd
//   comm.all_reduce({grad, n});                            // blocks until the GPU is done
//
// Every span is device memory (memory() == device). Each call is enqueued on the
// communicator's CUDA stream and, except isend/irecv, waits for it: the call returns when the
// data are there, as on the other backends. NCCL has no tags (they are checked, then ignored):
// messages between two ranks match in the order they were issued. NCCL's send and recv block
// the GPU stream until the peer's matching call, so isend/irecv, which are enqueued in order
// on one stream, deadlock when both sides send first: use sendrecv (one NCCL group) there.
// No kAnySource. The hand-written collectives need host memory and refuse this backend.
// Only in a build with CUDA, NCCL and MPI (CONCURDL_HAVE_NCCL && CONCURDL_HAVE_MPI).
#pragma once

#if CONCURDL_HAVE_NCCL && CONCURDL_HAVE_MPI

#include <cuda_runtime.h>
#include <nccl.h>

#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap` (every rank of it calls it). device < 0: the local rank on
  // this node modulo the number of devices. Throws LibraryError without a usable GPU.
  explicit NcclCommunicator(MPI_Comm bootstrap, int device = -1);
  ~NcclCommunicator() override;

  std::string_view name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemorySpace memory() const override { return MemorySpace::device; }
  void barrier() override;
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

 protected:
  void do_send(int dst, std::span<const float> data, int tag) override;
  int do_recv(int src, std::span<float> data, int tag) override;
  Request do_isend(int dst, std::span<const float> data, int tag) override;
  Request do_irecv(int src, std::span<float> data, int tag) override;
  void do_sendrecv(int dst, std::span<const float> out, int src, std::span<float> in,
                   int tag) override;
  void do_broadcast(std::span<float> data, int root) override;
  void do_all_reduce(std::span<const float> in, std::span<float> out) override;
  void do_reduce_scatter(std::span<const float> in, std::span<float> out) override;
  void do_all_gather(std::span<const float> in, std::span<float> out) override;

 private:
  void sync();
  MPI_Comm bootstrap_ = MPI_COMM_NULL;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
};

// Whether this process can use a CUDA device: "" if so, else why not ("no CUDA device: ...").
std::string nccl_unavailable();

}  // namespace concurdl::dp

#endif
