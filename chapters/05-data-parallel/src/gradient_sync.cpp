// Data-parallel SGD's gradient synchronisation (data_parallel.hpp): bucket plans, the
// all-reduce variants by name, and the blocking and overlapped GradientSync over any buffer (the
// float32 gradients, or mixed precision's 16-bit ones); data_parallel.cpp has the trainer.
#include <fmt/format.h>

#include <chrono>
#include <stdexcept>

#include "concurdl/core/trace.hpp"
#include "concurdl/dp/data_parallel.hpp"

namespace concurdl::dp {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::vector<GradBucket> plan_buckets(std::span<const std::size_t> offsets,
                                     std::size_t bucket_bytes) {
  if (offsets.size() < 2)
    throw std::invalid_argument("plan_buckets: layer_offsets needs layers + 1 >= 2 entries");
  for (std::size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      throw std::invalid_argument("plan_buckets: layer_offsets must not decrease");
  std::vector<GradBucket> out;
  const std::size_t layers = offsets.size() - 1;
  std::size_t top = layers;  // the open bucket is layers [l, top)
  for (std::size_t l = layers; l-- > 0;) {
    const std::size_t bytes = (offsets[top] - offsets[l]) * sizeof(float);
    if (bytes >= bucket_bytes || l == 0) {
      out.push_back({l, top, offsets[l], offsets[top] - offsets[l]});
      top = l;
    }
  }
  return out;
}

AllReduceFn find_allreduce(const std::string& name) {
  const AllReduceVariant* row = kAllReduceVariants.lookup(name);
  if (row == nullptr) {
    std::vector<std::string> names;
    for (const AllReduceVariant& r : kAllReduceVariants) names.emplace_back(r.name);
    throw UsageError(fmt::format("--allreduce: unknown all-reduce '{}' (known: {})", name,
                                 fmt::join(names, ", ")));
  }
  return row->run;
}

// --- GradientSync ----------------------------------------------------------------------------

namespace {

// The float32 gradients' bucket reduce: `algorithm` on the bucket's slice, in place.
BucketReduce float_reduce(std::span<float> gradients, std::size_t values, AllReduceFn algorithm,
                          AlgoOptions algo) {
  if (algorithm == nullptr) throw std::invalid_argument("GradientSync: no all-reduce algorithm");
  if (values != gradients.size())
    throw std::invalid_argument("GradientSync: layer_offsets do not end at the gradients' size");
  return [gradients, algorithm, algo](Communicator& comm, const GradBucket& b) {
    const std::span<float> slice = gradients.subspan(b.offset, b.count);
    algorithm(comm, slice, slice, algo);
  };
}

}  // namespace

GradientSync::GradientSync(Communicator& comm, std::span<float> gradients,
                           std::vector<std::size_t> layer_offsets, std::size_t bucket_bytes,
                           AllReduceFn algorithm, AlgoOptions algo)
    : GradientSync(comm, layer_offsets, bucket_bytes,
                   float_reduce(gradients, layer_offsets.empty() ? 0 : layer_offsets.back(),
                                algorithm, algo)) {}

GradientSync::GradientSync(Communicator& comm, std::vector<std::size_t> layer_offsets,
                           std::size_t bucket_bytes, BucketReduce reduce_bucket)
    : comm_(comm),
      layer_offsets_(std::move(layer_offsets)),
      buckets_(plan_buckets(layer_offsets_, bucket_bytes)),
      reduce_bucket_(std::move(reduce_bucket)) {
  if (!reduce_bucket_) throw std::invalid_argument("GradientSync: no bucket reduce");
  bucket_of_.resize(layers());
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t l = buckets_[b].first_layer; l < buckets_[b].last_layer; ++l)
      bucket_of_[l] = b;
}

void GradientSync::reduce(const GradBucket& b) {
  trace::Span span(trace::recording()
                       ? fmt::format("all-reduce L{}..{}", b.first_layer, b.last_layer - 1)
                       : std::string(),
                   "all-reduce");
  const auto t0 = Clock::now();
  reduce_bucket_(comm_, b);
  reduce_ns_.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
      std::memory_order_relaxed);
}

void BlockingSync::finish_step() {
  for (const GradBucket& b : buckets()) reduce(b);
}

OverlapSync::OverlapSync(Communicator& comm, std::span<float> gradients,
                         std::vector<std::size_t> layer_offsets, std::size_t bucket_bytes,
                         AllReduceFn algorithm, AlgoOptions algo)
    : GradientSync(comm, gradients, std::move(layer_offsets), bucket_bytes, algorithm, algo) {
  start();
}

OverlapSync::OverlapSync(Communicator& comm, std::vector<std::size_t> layer_offsets,
                         std::size_t bucket_bytes, BucketReduce reduce_bucket)
    : GradientSync(comm, std::move(layer_offsets), bucket_bytes, std::move(reduce_bucket)) {
  start();
}

void OverlapSync::start() {
  layers_left_.assign(buckets().size(), 0);
  reduced_ = buckets().size();  // no step in flight
  thread_ = std::thread([this] { worker(); });
}

OverlapSync::~OverlapSync() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OverlapSync::begin_step() {
  std::lock_guard lock(m_);
  if (error_) std::rethrow_exception(error_);
  if (reduced_ != buckets().size() || !ready_.empty())
    throw std::logic_error("OverlapSync::begin_step: the previous step was not finished");
  for (std::size_t b = 0; b < buckets().size(); ++b)
    layers_left_[b] = buckets()[b].last_layer - buckets()[b].first_layer;
  reduced_ = 0;
}

void OverlapSync::layer_done(std::size_t layer) {
  if (layer >= layers()) throw std::out_of_range("OverlapSync::layer_done: no such layer");
  {
    std::lock_guard lock(m_);
    const std::size_t b = bucket_of(layer);
    if (layers_left_[b] == 0) throw std::logic_error("OverlapSync::layer_done: layer done twice");
    if (--layers_left_[b] != 0) return;
    ready_.push_back(b);  // backward finishes the buckets in plan order: the same on every rank
  }
  cv_.notify_all();
}

void OverlapSync::finish_step() {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return reduced_ == buckets().size() || error_ != nullptr; });
  if (error_) std::rethrow_exception(error_);
}

void OverlapSync::worker() {
  trace::set_track(fmt::format("rank {} all-reduce", comm().rank()));
  std::unique_lock lock(m_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !ready_.empty(); });
    if (stop_) return;  // a step abandoned by an exception on the compute thread
    const std::size_t b = ready_.front();
    ready_.pop_front();
    lock.unlock();
    try {
      reduce(buckets()[b]);
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      cv_.notify_all();
      return;  // the communicator's state is unknown: no further collectives
    }
    lock.lock();
    ++reduced_;
    cv_.notify_all();
  }
}

}  // namespace concurdl::dp
