// The parameter server, the SSP clock and the staleness log (parameter_server.hpp).
#include "concurdl/asgd/parameter_server.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <tuple>

namespace concurdl::asgd {

// --- StalenessLog ----------------------------------------------------------------------------

void StalenessLog::add(std::uint64_t s) {
  buckets_[std::min<std::uint64_t>(s, kExact)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(s, std::memory_order_relaxed);
  std::uint64_t m = max_.load(std::memory_order_relaxed);
  while (s > m && !max_.compare_exchange_weak(m, s, std::memory_order_relaxed)) {
  }
}

double StalenessLog::mean() const {
  const std::uint64_t n = count();
  return n == 0
             ? 0.0
             : static_cast<double>(sum_.load(std::memory_order_relaxed)) / static_cast<double>(n);
}

std::uint64_t StalenessLog::bucket(std::size_t s) const {
  return s > kExact ? 0 : buckets_[s].load(std::memory_order_relaxed);
}

std::uint64_t StalenessLog::quantile(double q) const {
  const std::uint64_t n = count();
  if (n == 0) return 0;
  const auto need = static_cast<std::uint64_t>(q * static_cast<double>(n) + 0.999999);
  std::uint64_t seen = 0;
  for (std::size_t s = 0; s < kExact; ++s) {
    seen += bucket(s);
    if (seen >= need) return s;
  }
  return max();
}

void StalenessLog::add_to(std::map<std::string, double>& m) const {
  m["staleness_mean"] = mean();
  m["staleness_p50"] = static_cast<double>(quantile(0.5));
  m["staleness_p99"] = static_cast<double>(quantile(0.99));
  m["staleness_max"] = static_cast<double>(max());
  m["updates"] = static_cast<double>(count());
  const double n = static_cast<double>(count());
  if (n == 0) return;
  for (std::size_t s = 0; s < kExact; ++s)
    if (const std::uint64_t b = bucket(s); b > 0)
      m["staleness_hist_" + std::to_string(s)] = static_cast<double>(b) / n;
  if (const std::uint64_t b = bucket(kExact); b > 0)
    m["staleness_hist_" + std::to_string(kExact) + "plus"] = static_cast<double>(b) / n;
}

void StalenessLog::reset() {
  for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
  count_.store(0, std::memory_order_relaxed);
  sum_.store(0, std::memory_order_relaxed);
  max_.store(0, std::memory_order_relaxed);
}

// --- ParameterServer -------------------------------------------------------------------------

ParameterServer::ParameterServer(std::span<const float> initial, nn::SgdOptions sgd, int shards)
    : params_(initial.begin(), initial.end()) {
  if (shards < 1) throw std::invalid_argument("ParameterServer: shards must be >= 1");
  const std::size_t n = params_.size(), k = static_cast<std::size_t>(shards);
  if (n < k) throw std::invalid_argument("ParameterServer: more shards than parameters");
  for (std::size_t s = 0; s < k; ++s) {
    auto shard = std::make_unique<Shard>();
    std::tie(shard->offset, shard->count) = shard_range(n, shards, static_cast<int>(s));
    shard->opt = std::make_unique<nn::Sgd>(shard->count, sgd);
    shards_.push_back(std::move(shard));
  }
}

std::pair<std::size_t, std::size_t> ParameterServer::shard_range(std::size_t n, int shards, int s) {
  const auto k = static_cast<std::size_t>(shards), i = static_cast<std::size_t>(s);
  return {n * i / k, n * (i + 1) / k - n * i / k};
}

std::uint64_t ParameterServer::pull(std::span<float> out) const {
  if (out.size() != params_.size())
    throw std::invalid_argument("ParameterServer::pull: wrong size");
  const std::uint64_t v = version_.load(std::memory_order_acquire);
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->m);
    std::copy_n(params_.begin() + static_cast<std::ptrdiff_t>(shard->offset), shard->count,
                out.begin() + static_cast<std::ptrdiff_t>(shard->offset));
  }
  return v;
}

std::uint64_t ParameterServer::push(std::span<const float> gradient, std::uint64_t version_seen) {
  if (gradient.size() != params_.size())
    throw std::invalid_argument("ParameterServer::push: wrong size");
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->m);
    shard->opt->step(std::span<float>(params_).subspan(shard->offset, shard->count),
                     gradient.subspan(shard->offset, shard->count));
  }
  // Counted once the whole update is in: a pull that sees version v sees v's updates.
  const std::uint64_t before = version_.fetch_add(1, std::memory_order_acq_rel);
  return before >= version_seen ? before - version_seen : 0;
}

void ParameterServer::set_lr(float lr) {
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->m);
    shard->opt->set_lr(lr);
  }
}

void ParameterServer::read_state(std::span<float> params, std::span<float> velocity) const {
  if (params.size() != size() || velocity.size() != size())
    throw std::invalid_argument("ParameterServer::read_state: wrong size");
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->m);
    const auto at = static_cast<std::ptrdiff_t>(shard->offset);
    std::copy_n(params_.begin() + at, shard->count, params.begin() + at);
    const auto v = shard->opt->velocity();
    std::copy(v.begin(), v.end(), velocity.begin() + at);
  }
}

void ParameterServer::write_state(std::span<const float> params, std::span<const float> velocity,
                                  std::uint64_t version) {
  if (params.size() != size() || velocity.size() != size())
    throw std::invalid_argument("ParameterServer::write_state: wrong size");
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->m);
    const auto at = static_cast<std::ptrdiff_t>(shard->offset);
    std::copy_n(params.begin() + at, shard->count, params_.begin() + at);
    const auto v = shard->opt->velocity();
    std::copy_n(velocity.begin() + at, shard->count, v.begin());
  }
  version_.store(version, std::memory_order_release);
}

// --- SspClock --------------------------------------------------------------------------------

SspClock::SspClock(int workers, std::uint64_t bound)
    : clock_(static_cast<std::size_t>(workers), 0),
      active_(static_cast<std::size_t>(workers), true),
      bound_(bound) {
  if (workers < 1) throw std::invalid_argument("SspClock: workers must be >= 1");
}

std::uint64_t SspClock::slowest_locked() const {
  std::uint64_t slowest = std::numeric_limits<std::uint64_t>::max();
  for (std::size_t w = 0; w < clock_.size(); ++w)
    if (active_[w]) slowest = std::min(slowest, clock_[w]);
  return slowest;
}

std::uint64_t SspClock::wait_turn(int w) {
  const auto i = static_cast<std::size_t>(w);
  std::unique_lock lock(m_);
  if (clock_[i] > slowest_locked() + bound_) {
    ++waits_;
    cv_.wait(lock, [&] { return clock_[i] <= slowest_locked() + bound_; });
  }
  const std::uint64_t lead = clock_[i] - std::min(clock_[i], slowest_locked());
  max_lead_ = std::max(max_lead_, lead);
  return lead;
}

void SspClock::advance(int w) {
  {
    std::lock_guard lock(m_);
    ++clock_[static_cast<std::size_t>(w)];
  }
  cv_.notify_all();
}

void SspClock::leave(int w) {
  {
    std::lock_guard lock(m_);
    active_[static_cast<std::size_t>(w)] = false;
  }
  cv_.notify_all();
}

std::uint64_t SspClock::clock(int w) const {
  std::lock_guard lock(m_);
  return clock_[static_cast<std::size_t>(w)];
}
std::uint64_t SspClock::max_lead() const {
  std::lock_guard lock(m_);
  return max_lead_;
}
std::uint64_t SspClock::waits() const {
  std::lock_guard lock(m_);
  return waits_;
}

}  // namespace concurdl::asgd
