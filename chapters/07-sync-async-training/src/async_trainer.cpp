// The asynchronous training modes (async_trainer.hpp): one worker thread per worker, per epoch.
#include "concurdl/asgd/async_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "concurdl/asgd/hogwild.hpp"
#include "concurdl/core/clock.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/checkpoint.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::asgd {

namespace {
using Clock = std::chrono::steady_clock;
// A worker's injected failure (--fail-worker): an ordinary exception, as a crash in its
// compute would be.
class WorkerFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace

bool is_async_mode(const std::string& name) {
  const ModeRow* r = kModes.lookup(name);
  return r != nullptr && r->mode != Mode::sync;
}

// One worker's replica and scratch, kept across epochs.
struct AsyncTrainer::Worker {
  Worker(const nn::TrainConfig& c, std::size_t dim)
      : model(c.spec, c.seed, c.gemm), opt(model.parameters().size(), c.sgd) {
    x.resize(c.batch * dim);
    y.resize(c.batch);
  }
  nn::Mlp model;
  nn::Sgd opt;  // local-sgd's own optimiser (the other modes update elsewhere)
  std::vector<float> x;
  std::vector<std::uint8_t> y;
  std::uint64_t steps = 0;  // in all, across epochs (for --fail-worker)
  // This epoch's share.
  double loss_sum = 0;
  std::size_t correct = 0, rows = 0, batches = 0;
  std::string error;

  // Gathers batch k of the epoch's permutation (nn::gather_batch: from the images' bytes where
  // the data set keeps them); returns its rows.
  std::size_t gather(const std::vector<std::uint32_t>& order, const nn::Dataset& d,
                     std::size_t batch, std::size_t k) {
    const std::size_t first = k * batch, rows_k = std::min(batch, d.n - first);
    nn::gather_batch(d, order.data() + first, rows_k, x.data(), y.data());
    return rows_k;
  }
  // Forward and backward on the gathered batch (the gradient lands in model.gradients()).
  void compute(std::size_t rows_k) {
    std::size_t c = 0;
    const float loss = model.forward_backward(x.data(), y.data(), rows_k, &c);
    loss_sum += static_cast<double>(loss) * static_cast<double>(rows_k);
    correct += c;
    rows += rows_k;
    ++batches;
  }
};

struct AsyncTrainer::EpochSums {
  std::size_t steps = 0;             // batches in the epoch
  std::atomic<std::size_t> next{0};  // the next batch to take
};

AsyncTrainer::AsyncTrainer(nn::TrainConfig config, const nn::Dataset& train, AsyncOptions options)
    : config_(std::move(config)), train_(train), options_(std::move(options)) {
  if (!is_async_mode(options_.mode))
    throw std::invalid_argument("AsyncTrainer: unknown mode '" + options_.mode + "'");
  const ModeRow& row = *kModes.lookup(options_.mode);
  mode_ = row.mode;
  if (options_.workers < 1 || options_.workers > kMaxWorkers)
    throw std::invalid_argument(fmt::format("AsyncTrainer: workers must be in 1..{}", kMaxWorkers));
  if (config_.batch == 0) throw std::invalid_argument("AsyncTrainer: batch size 0");
  if (options_.staleness < 0) throw std::invalid_argument("AsyncTrainer: staleness < 0");
  if (options_.local_steps < 1) throw std::invalid_argument("AsyncTrainer: local_steps < 1");
  if (options_.servers < 1) throw std::invalid_argument("AsyncTrainer: servers < 1");
  if (train_.dim != config_.spec.widths.front() || train_.x.size() != train_.n * train_.dim ||
      train_.y.size() != train_.n || train_.n == 0)
    throw std::invalid_argument("AsyncTrainer: the data set does not fit the model " +
                                config_.spec.describe());
  for (int w = 0; w < options_.workers; ++w)
    workers_.push_back(std::make_unique<Worker>(config_, train_.dim));
  eval_model_ = std::make_unique<nn::Mlp>(config_.spec, config_.seed, config_.gemm);
  const std::span<const float> initial = workers_[0]->model.parameters();
  if (row.parameter_server) {
    server_ = std::make_unique<ParameterServer>(initial, config_.sgd, options_.servers);
  } else if (mode_ == Mode::hogwild) {
    shared_params_.assign(initial.begin(), initial.end());
    shared_vel_.assign(initial.size(), 0.0f);
  }
  lost_.assign(workers_.size(), false);
  batches_.assign(workers_.size(), 0);
  state_.seed = config_.seed;
  state_.mode = options_.mode;
  state_.workers = static_cast<std::uint64_t>(options_.workers);
}

AsyncTrainer::~AsyncTrainer() = default;

std::string AsyncTrainer::describe() const {
  std::string extra;
  if (mode_ == Mode::ps_ssp) extra = fmt::format(", staleness bound {}", options_.staleness);
  if (mode_ == Mode::local_sgd) extra = fmt::format(", average every {}", options_.local_steps);
  if (server_ && options_.servers > 1) extra += fmt::format(", {} server shards", options_.servers);
  for (const auto& [w, f] : options_.stragglers)
    extra += fmt::format(", worker {} {}x slower", w, f);
  return fmt::format("mode {}, {} worker{} (threads), batch {} per push{}", options_.mode,
                     options_.workers, options_.workers == 1 ? "" : "s", config_.batch, extra);
}

void AsyncTrainer::check_failure(int w, std::uint64_t steps) const {
  if (options_.fails(w, steps))
    throw WorkerFailed(fmt::format("worker {} failed after {} steps (--fail-worker)", w, steps));
}

nn::EpochResult AsyncTrainer::run_epoch(
    const std::function<void(const nn::StepProgress&)>& on_progress, std::size_t) {
  kernels::ComputeThreadsScope one(1);  // one compute thread per worker
  const float lr = config_.lr_decay != 1.0f ? nn::epoch_lr(config_, state_.epoch) : config_.sgd.lr;
  nn::epoch_permutation(train_.n, state_.seed, state_.epoch, order_);
  for (auto& w : workers_) {
    w->loss_sum = 0;
    w->correct = w->rows = w->batches = 0;
    w->error.clear();
  }
  staleness_.reset();
  EpochSums sums;
  sums.steps = (train_.n + config_.batch - 1) / config_.batch;
  const auto start = Clock::now();
  if (mode_ == Mode::hogwild)
    run_hogwild(sums, lr);
  else if (mode_ == Mode::local_sgd)
    run_local_sgd(sums, lr);
  else
    run_ps(sums, lr);

  nn::EpochResult r;
  r.seconds = seconds_since(start);
  double loss = 0;
  std::size_t correct = 0, steps = 0;
  std::string first_error;
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    const Worker& k = *workers_[w];
    loss += k.loss_sum;
    correct += k.correct;
    r.samples += k.rows;
    steps += k.batches;
    batches_[w] = k.batches;
    if (!k.error.empty()) {
      lost_[w] = true;
      if (first_error.empty()) first_error = k.error;
    }
  }
  if (std::all_of(lost_.begin(), lost_.end(), [](bool b) { return b; }))
    throw std::runtime_error("every worker failed; the first: " + first_error);
  if (r.samples > 0) {
    r.loss = loss / static_cast<double>(r.samples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.samples);
  }
  state_.step +=
      mode_ == Mode::local_sgd ? (sums.steps + workers_.size() - 1) / workers_.size() : steps;
  ++state_.epoch;
  report_epoch(on_progress, state_, sums.steps, r);
  return r;
}

// ps-async and ps-ssp: pull, compute, push, as long as there are batches.
void AsyncTrainer::run_ps(EpochSums& sums, float lr) {
  server_->set_lr(lr);
  const bool ssp = mode_ == Mode::ps_ssp;
  SspClock clock(static_cast<int>(workers_.size()), static_cast<std::uint64_t>(options_.staleness));
  for (std::size_t w = 0; w < workers_.size(); ++w)
    if (lost_[w]) clock.leave(static_cast<int>(w));
  {
    std::vector<std::jthread> threads;
    for (std::size_t w = 0; w < workers_.size(); ++w) {
      if (lost_[w]) continue;
      threads.emplace_back([this, w, ssp, &clock, &sums] {
        Worker& k = *workers_[w];
        const int id = static_cast<int>(w);
        try {
          for (;;) {
            if (ssp) clock.wait_turn(id);
            check_failure(id, k.steps);  // before taking a batch: a failed worker loses none
            const std::size_t b = sums.next.fetch_add(1, std::memory_order_relaxed);
            if (b >= sums.steps) break;
            const auto t0 = Clock::now();
            const std::uint64_t v = server_->pull(k.model.parameters());
            k.compute(k.gather(order_, train_, config_.batch, b));
            nn::straggle(options_.straggler(id), seconds_since(t0));
            staleness_.add(server_->push(k.model.gradients(), v));
            ++k.steps;
            if (ssp) clock.advance(id);
          }
        } catch (const std::exception& e) {
          k.error = e.what();
        }
        clock.leave(id);
      });
    }
  }  // joined
  ssp_waits_ = clock.waits();
  ssp_max_lead_ = clock.max_lead();
}

// hogwild: read the shared copy, compute, update it in place; no lock anywhere.
void AsyncTrainer::run_hogwild(EpochSums& sums, float lr) {
  nn::SgdOptions sgd = config_.sgd;
  sgd.lr = lr;
  std::atomic<std::uint64_t> updates{0};
  std::vector<std::jthread> threads;
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    if (lost_[w]) continue;
    threads.emplace_back([this, w, sgd, &updates, &sums] {
      Worker& k = *workers_[w];
      const int id = static_cast<int>(w);
      try {
        for (;;) {
          check_failure(id, k.steps);
          const std::size_t b = sums.next.fetch_add(1, std::memory_order_relaxed);
          if (b >= sums.steps) break;
          const auto t0 = Clock::now();
          const std::uint64_t seen = updates.load(std::memory_order_relaxed);
          hogwild_read(shared_params_, k.model.parameters());
          k.compute(k.gather(order_, train_, config_.batch, b));
          nn::straggle(options_.straggler(id), seconds_since(t0));
          hogwild_step(shared_params_, shared_vel_, k.model.gradients(), sgd);
          staleness_.add(updates.fetch_add(1, std::memory_order_relaxed) - seen);
          ++k.steps;
        }
      } catch (const std::exception& e) {
        k.error = e.what();
      }
    });
  }
}

// local-sgd: batch k goes to worker k mod N; every H rounds (and at the epoch's end) the
// replicas are averaged with an all-reduce over the threads communicator of chapter 05.
void AsyncTrainer::run_local_sgd(EpochSums& sums, float lr) {
  const int n = static_cast<int>(workers_.size());
  const std::size_t rounds = (sums.steps + workers_.size() - 1) / workers_.size();
  const auto h = static_cast<std::size_t>(options_.local_steps);
  dp::run_threads(n, [&](dp::Communicator& comm) {
    const int id = comm.rank();
    Worker& k = *workers_[static_cast<std::size_t>(id)];
    k.opt.set_lr(lr);
    for (std::size_t r = 0; r < rounds; ++r) {
      const std::size_t b = r * workers_.size() + static_cast<std::size_t>(id);
      if (b < sums.steps) {
        check_failure(id, k.steps);
        const auto t0 = Clock::now();
        k.compute(k.gather(order_, train_, config_.batch, b));
        nn::straggle(options_.straggler(id), seconds_since(t0));
        k.opt.step(k.model.parameters(), k.model.gradients());
        ++k.steps;
      }
      if ((r + 1) % h == 0 || r + 1 == rounds) {
        const std::span<float> p = k.model.parameters();
        comm.all_reduce(p);
        const float scale = 1.0f / static_cast<float>(n);
        for (float& x : p) x *= scale;
      }
    }
  });
  staleness_.reset();  // no stale gradients: each replica steps on its own parameters
}

std::vector<float> AsyncTrainer::parameters() const {
  if (server_) {
    std::vector<float> p(server_->size()), v(server_->size());
    server_->read_state(p, v);
    return p;
  }
  if (mode_ == Mode::hogwild) return shared_params_;
  const auto p = workers_[0]->model.parameters();  // local-sgd: averaged at the epoch's end
  return {p.begin(), p.end()};
}

nn::EvalResult AsyncTrainer::evaluate(const nn::Dataset& d) {
  kernels::ComputeThreadsScope one(1);  // one compute thread per worker
  const std::vector<float> p = parameters();
  std::copy(p.begin(), p.end(), eval_model_->parameters().begin());
  return eval_model_->evaluate(d.x.data(), d.y.data(), d.n);
}

void save_global(const std::filesystem::path& checkpoint, const nn::TrainConfig& config,
                 const nn::TrainState& state,
                 const std::function<void(std::span<float>, std::span<float>)>& read) {
  nn::Mlp model(config.spec, config.seed, config.gemm);
  nn::Sgd opt(model.parameters().size(), config.sgd);
  read(model.parameters(), opt.velocity());
  nn::save_checkpoint(checkpoint, model, opt, state);
}

nn::TrainState resume_global(
    const std::filesystem::path& checkpoint, const nn::TrainConfig& config, const std::string& mode,
    int workers,
    const std::function<void(std::span<const float>, std::span<const float>,
                             const nn::TrainState&)>& write) {
  nn::Mlp model(config.spec, config.seed, config.gemm);
  nn::Sgd opt(model.parameters().size(), config.sgd);
  nn::TrainState loaded =
      nn::load_checkpoint(checkpoint, model, opt, mode, static_cast<std::uint64_t>(workers));
  write(model.parameters(), opt.velocity(), loaded);
  loaded.mode = mode;
  loaded.workers = static_cast<std::uint64_t>(workers);
  return loaded;
}

void report_epoch(const std::function<void(const nn::StepProgress&)>& on_progress,
                  const nn::TrainState& after, std::size_t steps, const nn::EpochResult& r) {
  if (!on_progress) return;
  nn::StepProgress p;
  p.epoch = after.epoch - 1;
  p.step_in_epoch = p.steps_per_epoch = steps;
  p.step = after.step;
  p.loss = r.loss;
  p.accuracy = r.accuracy;
  p.seconds = r.seconds;
  p.samples = r.samples;
  on_progress(p);
}

void AsyncTrainer::save(const std::filesystem::path& checkpoint) const {
  save_global(checkpoint, config_, state_, [&](std::span<float> p, std::span<float> v) {
    if (server_) {
      server_->read_state(p, v);
    } else if (mode_ == Mode::hogwild) {
      std::copy(shared_params_.begin(), shared_params_.end(), p.begin());
      std::copy(shared_vel_.begin(), shared_vel_.end(), v.begin());
    } else {  // local-sgd: the averaged replica and worker 0's momentum
      const Worker& w = *workers_[0];
      std::copy(w.model.parameters().begin(), w.model.parameters().end(), p.begin());
      std::copy(w.opt.velocity().begin(), w.opt.velocity().end(), v.begin());
    }
  });
}

void AsyncTrainer::resume(const std::filesystem::path& checkpoint) {
  state_ = resume_global(
      checkpoint, config_, options_.mode, options_.workers,
      [&](std::span<const float> p, std::span<const float> v, const nn::TrainState& st) {
        if (server_) {
          server_->write_state(p, v, st.step);
        } else if (mode_ == Mode::hogwild) {
          std::copy(p.begin(), p.end(), shared_params_.begin());
          std::copy(v.begin(), v.end(), shared_vel_.begin());
        } else {
          for (auto& w : workers_) {
            std::copy(p.begin(), p.end(), w->model.parameters().begin());
            std::copy(v.begin(), v.end(), w->opt.velocity().begin());
          }
        }
      });
}

std::map<std::string, double> AsyncTrainer::epoch_metrics() const {
  std::map<std::string, double> m;
  if (mode_ != Mode::local_sgd) {
    staleness_.add_to(m);
  }
  if (mode_ == Mode::ps_ssp) {
    m["ssp_waits"] = static_cast<double>(ssp_waits_);
    m["ssp_max_lead"] = static_cast<double>(ssp_max_lead_);
  }
  m["workers_lost"] = static_cast<double>(std::count(lost_.begin(), lost_.end(), true));
  const auto [lo, hi] = std::minmax_element(batches_.begin(), batches_.end());
  m["batches_min"] = static_cast<double>(*lo);
  m["batches_max"] = static_cast<double>(*hi);
  return m;
}

}  // namespace concurdl::asgd
