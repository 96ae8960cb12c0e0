// Checkpoints: the model's parameters, the optimiser's velocity and where training was, in one
// versioned, checksummed file written atomically (temporary file, fsync, rename: a crash
// leaves the old checkpoint or none, never half of one).
//
// Layout (little-endian): magic "CDLCKPT1", u32 format version, u32 header length, header
// (text: "arch=784-256-128-10 epoch=3 step=2814 seed=1 ..."), u64 parameter count, parameters
// (float), velocity (float), u32 CRC-32 of every byte before it.
// Loading refuses, with a CheckpointError naming the file and what is wrong: a missing or
// truncated file, a foreign magic, an unsupported version, a checksum mismatch (corruption),
// and a checkpoint of another architecture ("checkpoint is for 784-128-10, the model is
// 784-256-128-10").
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>

#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::nn {

inline constexpr std::uint32_t kCheckpointVersion = 1;

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainState {
  std::uint64_t epoch = 0;  // epochs completed
  std::uint64_t step = 0;   // optimiser steps taken
  std::uint64_t seed = 0;
  // Who trained it, when several workers did (chapters 05 and 07): the mode ("sync",
  // "ps-async", ...) and the worker count; empty and 0 for a single trainer's checkpoint. Saved
  // in the header only when set.
  std::string mode;
  std::uint64_t workers = 0;
  // The mixture-of-experts block inside the MLP (MoeBlock::describe, moe_trainer.hpp) for a
  // MoE model's checkpoint; empty for a dense one. Saved in the header only when set, and
  // compared on load both ways: a dense checkpoint does not load into a MoE model, nor one of
  // another block.
  std::string moe;
};

void save_checkpoint(const std::filesystem::path& path, const Mlp& model, const Sgd& opt,
                     const TrainState& state);
// Loads into `model` and `opt` (which must have the checkpoint's architecture); returns the
// state. On any error nothing is changed and a CheckpointError is thrown. A trainer of several
// workers passes its mode and worker count: a checkpoint written by another mode or worker
// count is refused naming both ("checkpoint is of mode ps-async with 2 workers; this run is
// mode hogwild with 2 workers"); one without a mode (a single trainer's, or one written before
// modes existed) is accepted.
TrainState load_checkpoint(const std::filesystem::path& path, Mlp& model, Sgd& opt,
                           const std::string& mode = {}, std::uint64_t workers = 0);

// The same file for a model that is not one Mlp (an Mlp with a MoE block inside): `arch` is the
// header's arch (MlpSpec::describe()), params and velocity its flat concatenations (equal
// sizes), sgd the optimiser's settings the header names. state.moe, when set, goes in the header;
// on load `moe` must equal the checkpoint's (empty: a dense checkpoint), else CheckpointError
// naming both.
void save_checkpoint(const std::filesystem::path& path, const std::string& arch,
                     std::span<const float> params, std::span<const float> velocity,
                     const SgdOptions& sgd, const TrainState& state);
TrainState load_checkpoint(const std::filesystem::path& path, const std::string& arch,
                           std::span<float> params, std::span<float> velocity,
                           const std::string& mode = {}, std::uint64_t workers = 0,
                           const std::string& moe = {});

}  // namespace concurdl::nn
