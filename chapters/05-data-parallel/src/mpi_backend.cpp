// The MPI backend (mpi_backend.hpp): thin wrappers that check counts and return codes.
#include "concurdl/dp/mpi_backend.hpp"

#if CONCURDL_HAVE_MPI

#include <climits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"

namespace concurdl::dp {
namespace {

// MPI counts are int: a larger message would need a derived datatype.
int count_of(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument("mpi backend: " + std::to_string(n) +
                                " floats do not fit an MPI count (at most INT_MAX)");
  return static_cast<int>(n);
}

// MPI accepts a message shorter than the receive; the communicator's contract does not.
void check_received(const MPI_Status& status, std::size_t expected) {
  int got = 0;
  CDL_MPI_CHECK(MPI_Get_count(&status, MPI_FLOAT, &got));
  if (static_cast<std::size_t>(got) != expected)
    throw std::length_error("mpi backend: recv from rank " + std::to_string(status.MPI_SOURCE) +
                            " tag " + std::to_string(status.MPI_TAG) + " of " +
                            std::to_string(expected) + " floats, but the message has " +
                            std::to_string(got));
}

class MpiRequest final : public Request::Impl {
 public:
  MpiRequest(MPI_Request req, bool is_recv, std::size_t expected)
      : req_(req), is_recv_(is_recv), expected_(expected) {}
  void wait() override {
    MPI_Status status;
    CDL_MPI_CHECK(MPI_Wait(&req_, &status));
    finish(status);
  }
  bool test() override {
    int flag = 0;
    MPI_Status status;
    CDL_MPI_CHECK(MPI_Test(&req_, &flag, &status));
    if (flag) finish(status);
    return flag != 0;
  }
  int source() const override { return source_; }
  void abandon() noexcept override {
    if (req_ == MPI_REQUEST_NULL) return;
    if (is_recv_) MPI_Cancel(&req_);  // a receive not yet matched is withdrawn
    MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }

 private:
  void finish(const MPI_Status& status) {
    if (!is_recv_) return;
    source_ = status.MPI_SOURCE;
    check_received(status, expected_);
  }
  MPI_Request req_;
  bool is_recv_;
  std::size_t expected_;
  int source_ = -1;
};

int mpi_source(int src) { return src == kAnySource ? MPI_ANY_SOURCE : src; }

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) {
  int initialized = 0;
  CDL_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) throw std::logic_error("MpiCommunicator: MPI is not initialised (ranks::init)");
  if (comm == MPI_COMM_NULL) throw std::invalid_argument("MpiCommunicator: MPI_COMM_NULL");
  CDL_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  CDL_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  CDL_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::barrier() { CDL_MPI_CHECK(MPI_Barrier(comm_)); }

void MpiCommunicator::do_send(int dst, std::span<const float> data, int tag) {
  CDL_MPI_CHECK(MPI_Send(data.data(), count_of(data.size()), MPI_FLOAT, dst, tag, comm_));
}

int MpiCommunicator::do_recv(int src, std::span<float> data, int tag) {
  MPI_Status status;
  CDL_MPI_CHECK(MPI_Recv(data.data(), count_of(data.size()), MPI_FLOAT, mpi_source(src), tag, comm_,
                         &status));
  check_received(status, data.size());
  return status.MPI_SOURCE;
}

Request MpiCommunicator::do_isend(int dst, std::span<const float> data, int tag) {
  MPI_Request req;
  CDL_MPI_CHECK(MPI_Isend(data.data(), count_of(data.size()), MPI_FLOAT, dst, tag, comm_, &req));
  return Request(std::make_unique<MpiRequest>(req, false, data.size()));
}

Request MpiCommunicator::do_irecv(int src, std::span<float> data, int tag) {
  MPI_Request req;
  CDL_MPI_CHECK(
      MPI_Irecv(data.data(), count_of(data.size()), MPI_FLOAT, mpi_source(src), tag, comm_, &req));
  return Request(std::make_unique<MpiRequest>(req, true, data.size()));
}

void MpiCommunicator::do_broadcast(std::span<float> data, int root) {
  CDL_MPI_CHECK(MPI_Bcast(data.data(), count_of(data.size()), MPI_FLOAT, root, comm_));
}

void MpiCommunicator::do_all_reduce(std::span<const float> in, std::span<float> out) {
  const void* send = in.data() == out.data() ? MPI_IN_PLACE : in.data();
  CDL_MPI_CHECK(MPI_Allreduce(send, out.data(), count_of(out.size()), MPI_FLOAT, MPI_SUM, comm_));
}

void MpiCommunicator::do_reduce_scatter(std::span<const float> in, std::span<float> out) {
  count_of(in.size());
  CDL_MPI_CHECK(MPI_Reduce_scatter_block(in.data(), out.data(), count_of(out.size()), MPI_FLOAT,
                                         MPI_SUM, comm_));
}

void MpiCommunicator::do_all_gather(std::span<const float> in, std::span<float> out) {
  count_of(out.size());
  CDL_MPI_CHECK(MPI_Allgather(in.data(), count_of(in.size()), MPI_FLOAT, out.data(),
                              count_of(in.size()), MPI_FLOAT, comm_));
}

void MpiCommunicator::do_all_to_all_v(std::span<const float> send,
                                      std::span<const std::size_t> send_counts,
                                      std::span<float> recv,
                                      std::span<const std::size_t> recv_counts) {
  const auto n = send_counts.size();
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  std::size_t s_at = 0, r_at = 0;
  for (std::size_t j = 0; j < n; ++j) {
    sc[j] = count_of(send_counts[j]);
    rc[j] = count_of(recv_counts[j]);
    sd[j] = count_of(s_at);
    rd[j] = count_of(r_at);
    s_at += send_counts[j];
    r_at += recv_counts[j];
  }
  CDL_MPI_CHECK(MPI_Alltoallv(send.data(), sc.data(), sd.data(), MPI_FLOAT, recv.data(), rc.data(),
                              rd.data(), MPI_FLOAT, comm_));
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int colour, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  CDL_MPI_CHECK(MPI_Comm_split(comm_, colour, key, &part));
  auto sub = std::make_unique<MpiCommunicator>(part);  // works on a duplicate of it
  MPI_Comm_free(&part);
  return sub;
}

}  // namespace concurdl::dp

#endif  // CONCURDL_HAVE_MPI
