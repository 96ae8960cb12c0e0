// The records `concurdl train` writes (experiment "kernels/train", declared with its figures in
// experiments_train.cpp): one record per evaluation of the test set, at epoch 0 (before any
// step) and after every epoch.
//   params   arch, batch, lr, momentum, weight_decay, threads, seed, gemm, precision,
//            train_samples, epoch
//   metric   test_accuracy (fraction, higher is better), one sample
//   derived  test_loss, train_loss, train_accuracy (the epoch's running means), elapsed_s
//            (training time of this run so far, evaluation excluded), samples_per_s (the
//            epoch's), step (optimiser steps in all); with --precision bf16 or fp16,
//            skipped_steps (the epoch's steps skipped for non-finite gradients) and, for
//            fp16, loss_scale (the dynamic scale at the epoch's end)
//   with --moe-experts: the param moe (the block, MoeBlock::describe), and derived
//            moe_dropped_fraction, moe_imbalance, moe_aux_loss (over the epoch) and
//            moe_share_e0 .. (each expert's share of the last step's choices)
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "concurdl/harness/records.hpp"
#include "concurdl/nn/trainer.hpp"

namespace concurdl::nn {

inline constexpr const char* kTrainExperiment = "kernels/train";

// The most epochs `concurdl train --epochs` reaches, and so the largest "epoch" of a record.
inline constexpr std::int64_t kMaxTrainEpochs = 1'000'000;

struct TrainRecordContext {
  TrainConfig config;
  std::size_t train_samples = 0, test_samples = 0;
  std::string moe;  // MoeBlock::describe of a --moe-experts run; empty for a dense one
};

// `epoch` evaluations done so far; `r` is the epoch just trained (nullptr for epoch 0).
Record curve_record(const TrainRecordContext& c, std::size_t epoch, const EvalResult& test,
                    const EpochResult* r, double elapsed_s, std::uint64_t step);

nlohmann::json training_provenance(const TrainRecordContext& c, const std::filesystem::path& data,
                                   const std::string& resumed_from, const std::string& checkpoint);

// --trace's files (train_trace.cpp): RUN/trace.json, every span the run recorded since
// trace::Recorder::global().start() (it stops the recording), and figures/timeline.{svg,png},
// a Gantt chart of two steps after the first. Warnings on stderr; a line naming the files
// unless quiet.
void write_train_trace(const std::filesystem::path& run_dir, const RunFile& f, bool quiet);

}  // namespace concurdl::nn
