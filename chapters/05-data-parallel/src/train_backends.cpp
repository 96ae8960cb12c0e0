// The data-parallel backends of `concurdl train --ranks N --backend NAME` (distributed_train.hpp),
// which train_registration.cpp registers with the program:
//   threads  N rank threads in this process (run_threads), one compute thread each
//   mpi      this process is one of N ranks under mpirun (the command launched it)
//   nccl     not for this trainer: it keeps the MLP on the CPU (a clear usage error)
#include "concurdl/dp/train_backends.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/dp/mpi_backend.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/dp/zero.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::dp {

namespace {

DataParallelOptions options_of(const nn::DistributedOptions& o) {
  DataParallelOptions d;
  if (!(o.bucket_mb < 0)) {
    if (!std::isfinite(o.bucket_mb) || o.bucket_mb > 1024)
      throw UsageError(
          fmt::format("--bucket-mb: '{}' is not allowed (need 0 <= MiB <= 1024)", o.bucket_mb));
    d.bucket_bytes = static_cast<std::size_t>(std::llround(o.bucket_mb * 1024.0 * 1024.0));
  }
  d.overlap = o.overlap;
  d.shard_update = o.shard_update;
  if (!o.stragglers.empty() || o.fail_worker >= 0) {
    if (o.fail_worker >= o.ranks)
      throw UsageError(
          fmt::format("--fail-worker {}: there are only {} ranks", o.fail_worker, o.ranks));
    // Only the failing rank touches its step count.
    auto steps = std::make_shared<std::uint64_t>(0);
    d.after_compute = [o, steps](int rank, double compute_s) {
      nn::straggle(o.straggler(rank), compute_s);
      if (rank == o.fail_worker && o.fails(rank, (*steps)++))
        throw std::runtime_error(
            fmt::format("rank {} failed after {} steps (--fail-worker)", rank, o.fail_after));
    };
  }
  if (o.zero > 3) throw UsageError(fmt::format("--zero {}: the stages are 0, 1, 2 and 3", o.zero));
  d.algorithm = o.allreduce;
  find_allreduce(d.algorithm);  // a UsageError naming the known ones
  return d;
}

// The rank's trainer: ZeRO's with --zero, else plain data parallelism.
std::unique_ptr<nn::RankTrainer> make_trainer(Communicator& comm, const nn::DistributedOptions& o,
                                              const nn::TrainConfig& c, const nn::Dataset& train,
                                              const DataParallelOptions& opt) {
  if (o.zero < 0) return std::make_unique<DataParallelTrainer>(comm, c, train, opt);
  ZeroOptions z;
  z.stage = o.zero;
  z.overlap = opt.overlap;
  z.after_compute = opt.after_compute;
  return std::make_unique<ZeroTrainer>(comm, c, train, std::move(z));
}

void run_on_threads(const nn::DistributedOptions& o, const nn::TrainConfig& c,
                    const RankTrainerFactory& make, const nn::RankLoop& loop) {
  // The compute-thread count is process-wide (OpenBLAS's too): each rank thread runs its GEMMs
  // on itself alone, so N ranks use N cores.
  kernels::ComputeThreadsScope one(1);
  nn::TrainConfig config = c;
  config.threads = 0;  // leave the setting above alone
  run_threads(o.ranks, [&](Communicator& comm) {
    trace::set_track(fmt::format("rank {}", comm.rank()));
    const std::unique_ptr<nn::RankTrainer> t = make(comm, config);
    loop(*t);
  });
}

#if CONCURDL_HAVE_MPI
void run_on_mpi(const nn::DistributedOptions& o, const nn::TrainConfig& c,
                const RankTrainerFactory& make, const nn::RankLoop& loop) {
  ranks::init();
  if (ranks::world_size() != o.ranks)
    throw UsageError(
        fmt::format("--ranks {}: this MPI launch has {} rank(s)", o.ranks, ranks::world_size()));
  if (c.threads > 0) kernels::set_compute_threads(c.threads);
  int code = 0;
  std::string what;
  {
    MpiCommunicator comm(MPI_COMM_WORLD);
    try {
      const std::unique_ptr<nn::RankTrainer> t = make(comm, c);
      loop(*t);
      comm.barrier();
      return;
    } catch (const UsageError& e) {
      code = 2;
      what = e.what();
    } catch (const std::exception& e) {
      code = 1;
      what = e.what();
    }
  }
  // The other ranks may be waiting in a collective for this one: MPI_Finalize would hang, so
  // the whole launch ends here, with this rank's message.
  std::fprintf(stderr, "concurdl: rank %d: %s\n", ranks::world_rank(), what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
}
#endif

// The data-parallel trainer of the sync backends, over every rank.
void run_data_parallel(const nn::DistributedOptions& o, const nn::TrainConfig& c,
                       const nn::Dataset& train, const nn::RankLoop& loop) {
  const DataParallelOptions opt = options_of(o);
  run_ranks(
      o, c,
      [&](Communicator& comm, const nn::TrainConfig& config) {
        return make_trainer(comm, o, config, train, opt);
      },
      loop);
}

}  // namespace

void run_ranks(const nn::DistributedOptions& o, const nn::TrainConfig& c,
               const RankTrainerFactory& make, const nn::RankLoop& loop) {
  if (o.backend == "threads") return run_on_threads(o, c, make, loop);
#if CONCURDL_HAVE_MPI
  if (o.backend == "mpi") return run_on_mpi(o, c, make, loop);
#endif
  throw UsageError(
      fmt::format("--backend {}: ranks run as threads or MPI processes only", o.backend));
}

std::vector<nn::DistributedBackend> train_backends() {
  std::vector<nn::DistributedBackend> out;
  out.push_back(
      {.name = "threads",
       .what = "ranks are threads of this process (shared memory), one compute thread each",
       .missing = [] { return std::string(); },
       .check = [](const nn::DistributedOptions& o,
                   const nn::TrainConfig&) { (void)options_of(o); },
       .run = &run_data_parallel});
  out.push_back(
      {.name = "mpi",
       .what = "ranks are processes under mpirun (launched for you), MpiCommunicator",
       .missing = []() -> std::string {
         if (!CONCURDL_HAVE_MPI)
           return "--backend mpi: this concurdl was built without MPI (apt-get install "
                  "libopenmpi-dev openmpi-bin, then configure again)";
         return "";
       },
       .check = [](const nn::DistributedOptions& o,
                   const nn::TrainConfig&) { (void)options_of(o); },
       .mpi_launch = true,
       .run = [](const nn::DistributedOptions& o, const nn::TrainConfig& c, const nn::Dataset& d,
                 const nn::RankLoop& loop) { run_data_parallel(o, c, d, loop); }});
  out.push_back(
      {.name = "nccl",
       .what = "one rank per GPU with NCCL: not for this trainer, which keeps the MLP on the CPU",
       .missing = []() -> std::string {
         if (!CONCURDL_HAVE_NCCL)
           return "--backend nccl: this concurdl was built without NCCL (needs CUDA, NCCL and "
                  "MPI when configuring)";
         return "--backend nccl: needs the model on a GPU, and this data-parallel trainer "
                "runs the MLP on the CPU; use --backend threads or mpi";
       },
       .run =
           [](const nn::DistributedOptions&, const nn::TrainConfig&, const nn::Dataset&,
              const nn::RankLoop&) {
             throw UsageError("--backend nccl: needs the model on a GPU (not implemented)");
           }});
  return out;
}

}  // namespace concurdl::dp
