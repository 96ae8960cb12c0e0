// PipelineTrainer's stage (pipeline_trainer.hpp): what one stage holds. Internal to the
// chapter's library (pipeline_trainer.cpp runs the epochs, pipeline_trainer_state.cpp puts the
// stages' layers together for evaluation and checkpoints); not an installed header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "concurdl/core/memory.hpp"
#include "concurdl/kernels/aligned.hpp"
#include "concurdl/mp/pipeline.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/nn/mlp.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::mp {

// One stage: its own layers' parameters and gradients (the model's layers bound to them; the
// other layers' are not held), the SGD state of those layers, and its share of the epoch's
// figures.
struct PipelineTrainer::Stage {
  // Stage `index`: its chunks' spans of the flat parameter buffer, [lo, hi) each, and their
  // layers.
  Stage(const nn::TrainConfig& c, int index, std::vector<std::pair<std::size_t, std::size_t>> spans,
        const std::vector<std::pair<std::size_t, std::size_t>>& layers)
      : index(index),
        model(c.spec, c.seed, c.gemm, &memory),
        spans(std::move(spans)),
        x(kernels::LineAllocator<float>(&memory, MemoryKind::activations)) {
    const auto& off = model.layer_offsets();
    own.reserve(this->spans.size());  // the layers point into them: no reallocation
    for (std::size_t k = 0; k < this->spans.size(); ++k) {
      const auto [lo, hi] = this->spans[k];
      opt.emplace_back(hi - lo, c.sgd, &memory);
      Chunk& ch = own.emplace_back(Chunk{kernels::LineVector<float>(kernels::LineAllocator<float>(
                                             &memory, MemoryKind::parameters)),
                                         kernels::LineVector<float>(kernels::LineAllocator<float>(
                                             &memory, MemoryKind::gradients))});
      const auto p = model.parameters();
      ch.params.assign(p.begin() + static_cast<std::ptrdiff_t>(lo),
                       p.begin() + static_cast<std::ptrdiff_t>(hi));
      ch.grads.assign(hi - lo, 0.0f);
    }
    model.release_parameters();  // the whole model's flat buffers go; each stage keeps its own
    model.release_gradients();
    for (std::size_t k = 0; k < this->spans.size(); ++k)
      for (std::size_t l = layers[k].first; l < layers[k].second; ++l) {
        model.bind_layer_parameters(l, own[k].params.data() + (off[l] - this->spans[k].first));
        model.bind_layer_gradients(l, own[k].grads.data() + (off[l] - this->spans[k].first));
      }
  }
  ~Stage() {
    for (std::size_t l = 0; l < model.layers(); ++l) {
      model.bind_layer_parameters(l, nullptr);
      model.bind_layer_gradients(l, nullptr);
    }
  }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  int index;
  MemoryAccount memory;  // every buffer of the stage: its layers, optimizer, batch, steps
  nn::Mlp model;
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // per chunk: [lo, hi)
  struct Chunk {
    kernels::LineVector<float> params, grads;  // the chunk's span of the flat buffers
  };
  std::vector<Chunk> own;        // per chunk
  std::vector<nn::Sgd> opt;      // per chunk: over its span
  kernels::LineVector<float> x;  // stage 0: the batch's inputs
  std::vector<std::uint8_t> y;   // the last stage: its labels
  PipelineWorkspace ws;          // a step's buffers
  double loss_sum = 0, busy = 0, step_time = 0;
  std::size_t correct = 0, peak = 0, peak_bytes = 0;
  MemoryBytes step_peak;  // per kind, the most one step's buffers held
};

}  // namespace concurdl::mp
