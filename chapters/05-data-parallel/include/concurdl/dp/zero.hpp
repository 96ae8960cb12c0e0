// Sharded data parallelism: ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward
// Training Trillion Parameter Models", SC 2020) and PyTorch's FSDP (Zhao et al., VLDB 2023), on
// the MLP of kernels/nn and the two halves of the ring all-reduce (algorithms.hpp).
//
// Plain data parallelism (stage 0) keeps on every rank the whole model state: parameters,
// gradients and optimizer state (here SGD's momentum), Ψ floats each. But after the
// all-reduce's reduce-scatter half, rank r holds the sum of block r only, and an all-gather
// brings the rest. ZeRO makes each rank the owner of one block of every layer (block_of(P_l,
// N, r): sizes that do not divide by N give the first P_l mod N ranks one more float):
//
//   stage  what a rank keeps between steps           a step's communication per layer
//   0      params Ψ, grads Ψ, momentum Ψ             all-reduce grads (= RS + AG)       2Ψ
//   1      params Ψ, grads Ψ, momentum Ψ/N           RS grads, update own block, AG params  2Ψ
//   2      params Ψ, grads Ψ/N, momentum Ψ/N         RS each layer's grads as backward
//                                                    finishes it, keep block r; AG params  2Ψ
//   3      params Ψ/N, grads Ψ/N, momentum Ψ/N       AG params before a layer's forward,
//          (FSDP)                                    again before its backward; RS grads   3Ψ
//
// (Traffic in floats a rank sends per step on a ring, times (N-1)/N.) Stage 2 holds a layer's
// whole gradient only from its backward until its reduce-scatter; stage 3 holds a layer's whole
// parameters only while the layer computes, and frees them after. With `overlap` a
// communication thread per rank runs the collectives in order while the compute thread goes
// on: a layer's reduce-scatter overlaps the backward of the layers below, and stage 3 gathers
// the next layer while this one computes (FSDP's prefetch). Without it, each collective runs
// on the compute thread when it is due.
//
// Every stage takes the same steps as DataParallelTrainer with the v4_ring all-reduce and one
// bucket per layer, bit for bit: the reduce-scatter adds every block in the same order as that
// all-reduce's first half, and SGD is element-wise, so updating only block r gives block r's
// bits. The tests hold every stage to it.
//
// Memory is counted, not assumed: every buffer the rank holds (the model's parameters and
// gradients, the momentum, the shards, the gathered layers, the activations and the batch) is
// made with the allocator of the rank's MemoryAccount, so memory() is what the buffers held,
// now and at the peak. Between epochs the writer (rank 0) alone holds the whole state it
// evaluates and saves, gathered layer by layer and freed at the next step; steps_memory() is
// what the epoch's steps held, without it. Bytes sent are counted by the communicator
// (Communicator::bytes_sent).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/memory.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/dp/data_parallel.hpp"
#include "concurdl/kernels/aligned.hpp"
#include "concurdl/nn/distributed_train.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/sgd.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::dp {

// --- memory, counted ---------------------------------------------------------------------------

// A rank's memory account (core/memory.hpp): the model's, the optimizer's and the trainer's
// buffers are all made with its allocator, so it counts what they hold as they are allocated and
// freed.
using MemoryLedger = MemoryAccount;

// A float buffer of one kind, counted in its ledger for as long as it holds its bytes.
class CountedBuffer {
 public:
  CountedBuffer(MemoryLedger& ledger, MemoryKind kind)
      : data_(kernels::LineAllocator<float>(&ledger, kind)) {}
  CountedBuffer(CountedBuffer&& other) noexcept = default;
  CountedBuffer& operator=(CountedBuffer&&) = delete;
  CountedBuffer(const CountedBuffer&) = delete;
  void allocate(std::size_t floats);  // zero-filled; frees what it held first
  void release();                     // frees it (no-op when empty)
  std::span<float> span() { return {data_.data(), data_.size()}; }
  std::span<const float> span() const { return {data_.data(), data_.size()}; }
  float* data() { return data_.data(); }
  std::size_t size() const { return data_.size(); }

 private:
  kernels::LineVector<float> data_;
};

// What ZeRO's accounting predicts for one rank (bytes), float32 state, SGD with momentum
// (K = 4 bytes of optimizer state per parameter): stage 0 holds 4Ψ + 4Ψ + 4Ψ; each stage
// divides one more term by N. Traffic: a ring moves (N-1)/N of every tensor it reduces or
// gathers, 2 tensors of Ψ a step for stages 0-2, 3 for stage 3.
struct ZeroModel {
  double parameters = 0, gradients = 0, optimizer = 0;
  double sent_per_step = 0;
  double total() const { return parameters + gradients + optimizer; }
};
ZeroModel zero_model(std::size_t psi, int ranks, int stage);

// --- the communication queue --------------------------------------------------------------------

// A rank's collectives in the order they are submitted: run at once on the caller, or, with a
// thread, on that thread while the caller goes on. Every rank must submit the same collectives
// in the same order (they match by order). A job that throws ends the queue: that wait, and
// every later one, rethrows its exception.
class CommQueue {
 public:
  CommQueue(bool own_thread, std::string track);
  ~CommQueue();  // lets the job running finish, drops the rest
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;
  using Ticket = std::size_t;
  Ticket submit(std::function<void()> job);
  void wait(Ticket t);  // until job t (and every one before it) is done
  void wait_all();

 private:
  void worker();
  const bool threaded_;
  std::string track_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  Ticket submitted_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

// --- the trainer ---------------------------------------------------------------------------------

// ZeRO-2's two steps on one layer, as the trainer runs them (exercise 5.3 writes its own):
//   zero_reduce_layer   after the layer's backward: reduce-scatter its whole gradient (the
//                       ring, so block r holds the sum over the ranks) and keep block r in
//                       `grad_shard` (block_of(whole.size(), N, r).count floats);
//   zero_update_layer   after every layer is reduced: SGD on block r of `params` (the layer's
//                       whole parameters) from `grad_shard` and `momentum` (block r's), then
//                       all-gather `params` so that every rank holds the whole layer again.
void zero_reduce_layer(Communicator& comm, std::span<float> whole, std::span<float> grad_shard,
                       const AlgoOptions& opts);
void zero_update_layer(Communicator& comm, std::span<float> params,
                       std::span<const float> grad_shard, std::span<float> momentum,
                       const nn::SgdOptions& sgd, const AlgoOptions& opts);

// Stage 2 with another implementation of the two steps above (exercise 5.3's); empty: the
// trainer's own.
struct Zero2Steps {
  std::function<void(Communicator&, std::span<float>, std::span<float>, const AlgoOptions&)> reduce;
  std::function<void(Communicator&, std::span<float>, std::span<const float>, std::span<float>,
                     const nn::SgdOptions&, const AlgoOptions&)>
      update;
};

struct ZeroOptions {
  int stage = 1;         // 0 (replicated, as DataParallelTrainer), 1, 2 or 3
  bool overlap = false;  // a communication thread per rank (reduce-scatter during backward,
                         // stage 3's gathers prefetched one layer ahead)
  AlgoOptions algo;      // the ring's tag and segments
  // As DataParallelOptions::after_compute: called after each step's forward and backward.
  std::function<void(int rank, double compute_s)> after_compute;
  Zero2Steps zero2;  // stage 2 only
};

// Stage-0..3 data-parallel training of one rank. Every rank of `comm` constructs one with the
// same config and data set and calls the same methods in the same order.
class ZeroTrainer final : public nn::RankTrainer {
 public:
  ZeroTrainer(Communicator& comm, nn::TrainConfig config, const nn::Dataset& train,
              ZeroOptions options = {});
  ~ZeroTrainer() override;

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  int stage() const { return options_.stage; }
  std::size_t global_batch() const { return config_.batch * static_cast<std::size_t>(size()); }
  std::size_t steps_per_epoch() const;
  std::size_t parameter_count() const { return offsets_.back(); }    // Ψ
  std::size_t shard_count() const { return shard_offsets_.back(); }  // floats rank() owns

  using StepResult = RankStepResult;  // this rank's share of one global step
  StepResult step();

  nn::EpochResult run_epoch(const std::function<void(const nn::StepProgress&)>& on_progress = {},
                            std::size_t report_every = 50) override;
  nn::EvalResult evaluate(const nn::Dataset& d) override;  // after run_epoch or construction
  void save(const std::filesystem::path& checkpoint) const override;
  void resume(const std::filesystem::path& checkpoint) override;
  const nn::TrainState& state() const override { return state_; }
  std::string describe() const override;
  std::map<std::string, double> epoch_metrics() const override;

  // The whole parameters, the same on every rank (a collective: every rank calls it).
  std::vector<float> gather_parameters();
  // The whole momentum as of the last run_epoch's end (or resume), on the writer (rank 0): what
  // a checkpoint holds. Empty on the other ranks from stage 1 on (they keep their shard only),
  // and on rank 0 once a step has run since.
  std::span<const float> momentum_at_epoch_end() const;
  // This rank's account: current() is what it holds now; peak() what it held at most since
  // construction or reset_peak(), including what a step holds for a while (a layer's gathered
  // parameters, a layer's whole gradient) and the writer's whole state between epochs.
  const MemoryLedger& memory() const { return ledger_; }
  MemoryLedger& memory() { return ledger_; }
  // The last run_epoch's steps, without what the epoch's end gathers: what the account held
  // after the last step (now) and at most during the steps (peak, per kind and all at once).
  struct StepsMemory {
    MemoryBytes now, peak;
    std::uint64_t peak_total = 0;
  };
  const StepsMemory& steps_memory() const { return steps_memory_; }
  // Bytes this rank's collectives sent during the steps taken since construction (the
  // communicator's count; the gathers of run_epoch's end are not a step's), and those steps.
  std::uint64_t step_bytes_sent() const { return step_bytes_sent_; }
  std::uint64_t steps_counted() const { return steps_counted_; }

 private:
  struct Layer {
    std::size_t offset = 0, count = 0;  // in the flat model
    Block mine;                         // this rank's block of it
    std::size_t shard_offset = 0;       // where that block sits in the shards
  };
  void start_epoch();
  void consolidate();        // the whole state for evaluate/save, on rank 0 (collective)
  void drop_consolidated();  // frees it
  CommQueue::Ticket gather_layer(std::size_t l);
  CommQueue::Ticket reduce_layer(std::size_t l);
  void update();

  Communicator& comm_;
  nn::TrainConfig config_;
  const nn::Dataset& train_;
  ZeroOptions options_;
  mutable MemoryLedger ledger_;  // mutable: save() counts the checkpoint's copy while it writes
  nn::Mlp model_;                // parameters released from stage 3 on, gradients from stage 2 on
  std::vector<std::size_t> offsets_, shard_offsets_;
  std::vector<Layer> layers_;
  CountedBuffer velocity_;                 // Ψ (stage 0) or the shard's momentum
  CountedBuffer param_shard_;              // stage 3: this rank's blocks of the parameters
  CountedBuffer grad_shard_;               // stages 2-3: this rank's blocks of the summed gradients
  std::vector<CountedBuffer> gathered_;    // stage 3: layer l's whole parameters, while needed
  std::vector<CountedBuffer> layer_grad_;  // stages 2-3: layer l's whole gradient, while needed
  float lr_;
  nn::TrainState state_;
  std::vector<std::uint32_t> order_;
  std::size_t step_in_epoch_ = 0;
  bool epoch_started_ = false;
  kernels::LineVector<float> batch_x_, dlogits_, delta_[2];
  std::vector<std::uint8_t> batch_y_;
  std::vector<nn::Activations> acts_;
  // The whole state between epochs (evaluate, save), on rank 0 only: stage 3's parameters,
  // stage 1-3's momentum; freed by the next step.
  std::unique_ptr<nn::Mlp> full_model_;
  kernels::LineVector<float> full_momentum_;
  StepsMemory steps_memory_;
  // Each rank's resident memory over the last run_epoch's steps, in MiB (start, peak), where a
  // rank is a process of its own (the MPI backend): the witness beside the account.
  std::vector<float> resident_mib_;
  std::uint64_t step_bytes_sent_ = 0, steps_counted_ = 0;
  std::unique_ptr<CommQueue> queue_;  // last: its thread stops first
};

}  // namespace concurdl::dp
