// The MPI backend: ranks are processes under mpirun (or srun), on one machine or many. Point to
// point is MPI_Send/MPI_Recv/MPI_Isend/MPI_Irecv on MPI_FLOAT; the native collectives are
// MPI_Bcast, MPI_Allreduce, MPI_Reduce_scatter_block and MPI_Allgather with MPI_SUM.
//
//   concurdl::ranks::init();                           // MPI_Init_thread, once per process
//   concurdl::dp::MpiCommunicator comm(MPI_COMM_WORLD);  // or concurdl::ranks::comm() in an
//   comm.all_reduce(grad);                             // experiment run with --ranks
//
// The communicator works on a duplicate of the one it is given (MPI_Comm_dup), so its tags
// never meet the harness's own traffic or another MpiCommunicator's; errors come back as codes
// (MPI_ERRORS_RETURN) and are thrown as LibraryError by CDL_MPI_CHECK. Only in a build with MPI
// (CONCURDL_HAVE_MPI).
#pragma once

#if CONCURDL_HAVE_MPI

#include "concurdl/core/ranks_mpi.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {

class MpiCommunicator final : public Communicator {
 public:
  // `comm` must be a valid communicator (not MPI_COMM_NULL) of an initialised MPI.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;

  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  MPI_Comm comm() const { return comm_; }  // the duplicate

 protected:
  void do_send(int dst, std::span<const float> data, int tag) override;
  int do_recv(int src, std::span<float> data, int tag) override;
  Request do_isend(int dst, std::span<const float> data, int tag) override;
  Request do_irecv(int src, std::span<float> data, int tag) override;
  void do_broadcast(std::span<float> data, int root) override;
  void do_all_reduce(std::span<const float> in, std::span<float> out) override;
  void do_reduce_scatter(std::span<const float> in, std::span<float> out) override;
  void do_all_gather(std::span<const float> in, std::span<float> out) override;
  void do_all_to_all_v(std::span<const float> send, std::span<const std::size_t> send_counts,
                       std::span<float> recv,
                       std::span<const std::size_t> recv_counts) override;  // MPI_Alltoallv
  std::unique_ptr<Communicator> do_split(int colour, int key) override;     // MPI_Comm_split

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace concurdl::dp

#endif  // CONCURDL_HAVE_MPI
