// What chapter 05's training experiments share (experiments_train.cpp defines it): the images
// they train on, how many steps a timed repetition takes, and the ranks axis.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

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

}  // namespace concurdl::dp::train_trials
