// What chapter 05's training experiments share (experiments_train.cpp defines it): the images
// they train on, how many steps a timed repetition takes, the ranks axis, and the peak resident
// memory a row records (peak_rss_bytes).
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "concurdl/dp/communicator.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/nn/dataset.hpp"

namespace concurdl::dp::train_trials {

inline constexpr std::size_t kImages = 6400;    // the first Fashion-MNIST training images
inline constexpr int kWarmSteps = 3;            // untimed steps before a repetition
inline constexpr std::size_t kSamples = 19200;  // per timed repetition, over all ranks
inline constexpr std::int64_t kMaxRanks = 256;  // threads of one process

// Timed steps of a repetition whose global batch is `global_batch` rows.
int steps_for(std::size_t global_batch);
// The first kImages training images, loaded once per run (the group's cache).
std::shared_ptr<const nn::Dataset> images(GroupCache& cache);
Axis ranks_axis(std::vector<std::string> values, std::vector<std::string> quick = {});

// The process's peak resident memory over the steps that follow (every rank a thread of it):
// rank 0 resets VmHWM between two barriers; every rank calls it. True on rank 0 when the kernel
// allowed the reset.
bool begin_resident_window(Communicator& comm);
// On rank 0 after the steps: peak_rss_bytes into s when the window began (left out otherwise).
void end_resident_window(bool began, Sample& s);
// A PyTorch peer's report (torch_peer.py): the largest of its processes' peak_rss_bytes (one
// number, or one per process), 0 when it did not say.
double peer_peak_rss(const nlohmann::json& report);

}  // namespace concurdl::dp::train_trials
