// The NCCL backend (nccl_backend.hpp): an NCCL communicator over MPI-launched processes.
#include "concurdl/dp/nccl_backend.hpp"

#if CONCURDL_HAVE_NCCL && CONCURDL_HAVE_MPI

#include <memory>
#include <stdexcept>
#include <string>

#include "concurdl/core/errors.hpp"

namespace concurdl::dp {
namespace {

// An enqueued send or receive: done when the event recorded after it has fired.
class NcclRequest final : public Request::Impl {
 public:
  NcclRequest(cudaStream_t stream, int source) : source_(source) {
    CDL_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    CDL_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~NcclRequest() override { cudaEventDestroy(event_); }
  void wait() override { CDL_CUDA_CHECK(cudaEventSynchronize(event_)); }
  bool test() override {
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    CDL_CUDA_CHECK(rc);
    return true;
  }
  int source() const override { return source_; }
  void abandon() noexcept override { cudaEventSynchronize(event_); }

 private:
  cudaEvent_t event_ = nullptr;
  int source_;
};

int local_rank(MPI_Comm comm) {
  MPI_Comm node;
  CDL_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int r = 0;
  MPI_Comm_rank(node, &r);
  MPI_Comm_free(&node);
  return r;
}

void no_any_source(int src) {
  if (src == kAnySource) throw std::invalid_argument("nccl backend: no kAnySource in NCCL");
}

}  // namespace

std::string nccl_unavailable() {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(rc);
  if (n == 0) return "no CUDA device";
  return "";
}

NcclCommunicator::NcclCommunicator(MPI_Comm bootstrap, int device) {
  if (bootstrap == MPI_COMM_NULL) throw std::invalid_argument("NcclCommunicator: MPI_COMM_NULL");
  CDL_MPI_CHECK(MPI_Comm_dup(bootstrap, &bootstrap_));
  MPI_Comm_set_errhandler(bootstrap_, MPI_ERRORS_RETURN);
  CDL_MPI_CHECK(MPI_Comm_rank(bootstrap_, &rank_));
  CDL_MPI_CHECK(MPI_Comm_size(bootstrap_, &size_));
  // Every rank agrees before anyone blocks in ncclCommInitRank: a rank without a device would
  // otherwise leave the others waiting there.
  int devices = 0;
  const int ok_here = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 ? 1 : 0;
  int ok_all = 0;
  CDL_MPI_CHECK(MPI_Allreduce(&ok_here, &ok_all, 1, MPI_INT, MPI_MIN, bootstrap_));
  if (!ok_all) {
    MPI_Comm_free(&bootstrap_);
    throw LibraryError("CUDA", 0,
                       "NcclCommunicator: a rank has no CUDA device (" +
                           (ok_here ? std::string("another rank") : nccl_unavailable()) + ")");
  }
  device_ = device >= 0 ? device : local_rank(bootstrap_) % devices;
  CDL_CUDA_CHECK(cudaSetDevice(device_));
  CDL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ncclUniqueId id;
  if (rank_ == 0) CDL_NCCL_CHECK(ncclGetUniqueId(&id));
  CDL_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap_));
  CDL_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (bootstrap_ != MPI_COMM_NULL) MPI_Comm_free(&bootstrap_);
}

void NcclCommunicator::sync() { CDL_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void NcclCommunicator::barrier() {
  sync();
  CDL_MPI_CHECK(MPI_Barrier(bootstrap_));
}

void NcclCommunicator::do_send(int dst, std::span<const float> data, int) {
  CDL_NCCL_CHECK(ncclSend(data.data(), data.size(), ncclFloat, dst, comm_, stream_));
  sync();
}

int NcclCommunicator::do_recv(int src, std::span<float> data, int) {
  no_any_source(src);
  CDL_NCCL_CHECK(ncclRecv(data.data(), data.size(), ncclFloat, src, comm_, stream_));
  sync();
  return src;
}

Request NcclCommunicator::do_isend(int dst, std::span<const float> data, int) {
  CDL_NCCL_CHECK(ncclSend(data.data(), data.size(), ncclFloat, dst, comm_, stream_));
  return Request(std::make_unique<NcclRequest>(stream_, -1));
}

Request NcclCommunicator::do_irecv(int src, std::span<float> data, int) {
  no_any_source(src);
  CDL_NCCL_CHECK(ncclRecv(data.data(), data.size(), ncclFloat, src, comm_, stream_));
  return Request(std::make_unique<NcclRequest>(stream_, src));
}

void NcclCommunicator::do_sendrecv(int dst, std::span<const float> out, int src,
                                   std::span<float> in, int) {
  CDL_NCCL_CHECK(ncclGroupStart());
  CDL_NCCL_CHECK(ncclSend(out.data(), out.size(), ncclFloat, dst, comm_, stream_));
  CDL_NCCL_CHECK(ncclRecv(in.data(), in.size(), ncclFloat, src, comm_, stream_));
  CDL_NCCL_CHECK(ncclGroupEnd());
  sync();
}

void NcclCommunicator::do_broadcast(std::span<float> data, int root) {
  CDL_NCCL_CHECK(
      ncclBroadcast(data.data(), data.data(), data.size(), ncclFloat, root, comm_, stream_));
  sync();
}

void NcclCommunicator::do_all_reduce(std::span<const float> in, std::span<float> out) {
  CDL_NCCL_CHECK(
      ncclAllReduce(in.data(), out.data(), out.size(), ncclFloat, ncclSum, comm_, stream_));
  sync();
}

void NcclCommunicator::do_reduce_scatter(std::span<const float> in, std::span<float> out) {
  CDL_NCCL_CHECK(
      ncclReduceScatter(in.data(), out.data(), out.size(), ncclFloat, ncclSum, comm_, stream_));
  sync();
}

void NcclCommunicator::do_all_gather(std::span<const float> in, std::span<float> out) {
  CDL_NCCL_CHECK(ncclAllGather(in.data(), out.data(), in.size(), ncclFloat, comm_, stream_));
  sync();
}

}  // namespace concurdl::dp

#endif
