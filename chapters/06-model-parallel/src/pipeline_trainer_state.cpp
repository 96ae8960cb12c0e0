// PipelineTrainer between epochs (pipeline_trainer.hpp): the stages' layers and momentum put
// together (from this process's stages, or gathered to the writer when each stage is a rank's),
// for evaluation, parameters() and checkpoints, and a checkpoint read back into the stages.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "pipeline_stage.hpp"

namespace concurdl::mp {

void PipelineTrainer::require_writer(const char* what) const {
  if (!writer())
    throw std::logic_error(fmt::format(
        "PipelineTrainer::{}: the whole model is put together on rank 0 only (this is rank {})",
        what, rank()));
}

void PipelineTrainer::assemble(std::span<float> params, std::span<float> velocity) const {
  if (world_ != nullptr) {  // the writer's gathered copy
    std::copy(whole_params_.begin(), whole_params_.end(), params.begin());
    if (!velocity.empty())
      std::copy(whole_velocity_.begin(), whole_velocity_.end(), velocity.begin());
    return;
  }
  for (const auto& st : stages_) {
    for (std::size_t c = 0; c < st->spans.size(); ++c) {
      const auto lo = static_cast<std::ptrdiff_t>(st->spans[c].first);
      std::copy(st->own[c].params.begin(), st->own[c].params.end(), params.begin() + lo);
      if (!velocity.empty())
        std::copy(st->opt[c].velocity().begin(), st->opt[c].velocity().end(),
                  velocity.begin() + lo);
    }
  }
}

void PipelineTrainer::gather_to_writer() {
  // Two messages a chunk, parameters then momentum; every message of the steps has been
  // received by now (each step ended in an all-reduce), so small tags cannot meet one of them.
  dp::Communicator& comm = *world_;
  const Stage& mine = *stages_.front();
  if (!writer()) {
    for (std::size_t c = 0; c < mine.spans.size(); ++c) {
      comm.send(0, mine.own[c].params, static_cast<int>(2 * c));
      comm.send(0, mine.opt[c].velocity(), static_cast<int>(2 * c + 1));
    }
    return;
  }
  whole_params_.assign(offsets_.back(), 0.0f);
  whole_velocity_.assign(offsets_.back(), 0.0f);
  for (int s = 0; s < options_.stages; ++s) {
    const auto spans = spans_of(s);
    for (std::size_t c = 0; c < spans.size(); ++c) {
      const auto [lo, hi] = spans[c];
      const std::span<float> p = std::span<float>(whole_params_).subspan(lo, hi - lo);
      const std::span<float> v = std::span<float>(whole_velocity_).subspan(lo, hi - lo);
      if (s == mine.index) {
        std::copy(mine.own[c].params.begin(), mine.own[c].params.end(), p.begin());
        std::copy(mine.opt[c].velocity().begin(), mine.opt[c].velocity().end(), v.begin());
      } else {
        comm.recv(s, p, static_cast<int>(2 * c));
        comm.recv(s, v, static_cast<int>(2 * c + 1));
      }
    }
  }
}

std::vector<float> PipelineTrainer::parameters() const {
  require_writer("parameters");
  std::vector<float> p(offsets_.back());
  assemble(p, {});
  return p;
}

nn::EvalResult PipelineTrainer::evaluate(const nn::Dataset& d) {
  require_writer("evaluate");
  kernels::ComputeThreadsScope one(1);  // one compute thread per worker
  if (world_ == nullptr) {
    assemble(eval_model_->parameters(), {});
    return eval_model_->evaluate(d.x.data(), d.y.data(), d.n);
  }
  nn::Mlp model(config_.spec, config_.seed, config_.gemm);  // for this evaluation only
  assemble(model.parameters(), {});
  return model.evaluate(d.x.data(), d.y.data(), d.n);
}

void PipelineTrainer::save(const std::filesystem::path& checkpoint) const {
  require_writer("save");
  nn::Mlp model(config_.spec, config_.seed, config_.gemm);
  nn::Sgd opt(model.parameters().size(), config_.sgd);
  assemble(model.parameters(), opt.velocity());
  nn::save_checkpoint(checkpoint, model, opt, state_);
}

void PipelineTrainer::resume(const std::filesystem::path& checkpoint) {
  nn::Mlp model(config_.spec, config_.seed, config_.gemm);
  nn::Sgd opt(model.parameters().size(), config_.sgd);
  nn::TrainState loaded = nn::load_checkpoint(checkpoint, model, opt, "pipeline",
                                              static_cast<std::uint64_t>(options_.stages));
  const auto p = model.parameters();
  const auto v = opt.velocity();
  for (auto& st : stages_) {
    for (std::size_t c = 0; c < st->spans.size(); ++c) {
      const auto lo = static_cast<std::ptrdiff_t>(st->spans[c].first);
      const auto hi = static_cast<std::ptrdiff_t>(st->spans[c].second);
      std::copy(p.begin() + lo, p.begin() + hi, st->own[c].params.begin());
      std::copy(v.begin() + lo, v.begin() + hi, st->opt[c].velocity().begin());
    }
  }
  if (world_ != nullptr && writer()) {  // the writer's whole copy is the checkpoint's
    whole_params_.assign(p.begin(), p.end());
    whole_velocity_.assign(v.begin(), v.end());
  }
  loaded.mode = "pipeline";
  loaded.workers = static_cast<std::uint64_t>(options_.stages);
  state_ = loaded;
}

}  // namespace concurdl::mp
