// Expert parallelism (expert_parallel.hpp): one all-gather of the routing counts that places
// every choice in the whole batch's slot order, the rows to their experts' ranks and back by
// all-to-all, the same exchanges backward with the gated output gradients and the experts' input
// gradients. The arithmetic is nn::MoeLayer's own pieces (moe.hpp), so the sharded layer
// differs from it only in where rows are and in the router gradient's order of summation.
#include "concurdl/mp/expert_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "concurdl/core/trace.hpp"
#include "concurdl/dp/all_to_all.hpp"
#include "concurdl/kernels/ops.hpp"

namespace concurdl::mp {

using kernels::Trans;

namespace {

// Counts travel as floats: exact below 2^24.
constexpr std::size_t kMaxCount = std::size_t{1} << 24;

std::size_t total(const std::vector<std::size_t>& counts) {
  std::size_t n = 0;
  for (const std::size_t c : counts) n += c;
  return n;
}

// One phase: its seconds added to a counter when it ends, and its trace span ("moe dispatch").
class Phase {
 public:
  // Its category is its name, so that a timeline colours each phase apart.
  Phase(const char* name, double& seconds) : seconds_(seconds), span_(name, name) {}
  ~Phase() {
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  double& seconds_;
  trace::Span span_;
  std::chrono::steady_clock::time_point begin_ = std::chrono::steady_clock::now();
};

void copy_row(const float* from, std::size_t row_from, float* to, std::size_t row_to,
              std::size_t d) {
  std::copy_n(from + row_from * d, d, to + row_to * d);
}

}  // namespace

std::size_t first_expert_of(int rank, std::size_t experts, int ranks) {
  if (ranks < 1 || rank < 0 || rank > ranks)
    throw std::invalid_argument("first_expert_of: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks));
  return static_cast<std::size_t>(rank) * experts / static_cast<std::size_t>(ranks);
}

int expert_owner(std::size_t expert, std::size_t experts, int ranks) {
  if (expert >= experts || ranks < 1)
    throw std::invalid_argument("expert_owner: expert " + std::to_string(expert) + " of " +
                                std::to_string(experts));
  // The largest r with r E / R <= e.
  return static_cast<int>(((expert + 1) * static_cast<std::size_t>(ranks) - 1) / experts);
}

ExpertParallelMoe::ExpertParallelMoe(dp::Communicator& comm, nn::MoeSpec spec, std::uint64_t seed,
                                     ExpertParallelOptions opts)
    : comm_(comm), spec_(spec), opts_(opts), rank_(comm.rank()), ranks_(comm.size()) {
  nn::moe_check_spec(spec_, "ExpertParallelMoe");
  if (comm_.memory() != dp::MemorySpace::host)
    throw std::invalid_argument("ExpertParallelMoe: the " + std::string(comm_.name()) +
                                " communicator's memory is not host");
  if (spec_.experts < static_cast<std::size_t>(ranks_))
    throw std::invalid_argument(
        "ExpertParallelMoe: " + std::to_string(spec_.experts) + " experts over " +
        std::to_string(ranks_) +
        " ranks would leave a rank with none (need experts >= ranks; replicating experts over "
        "data-parallel groups is not built)");
  first_ = first_expert_of(rank_, spec_.experts, ranks_);
  local_ = first_expert_of(rank_ + 1, spec_.experts, ranks_) - first_;
  const std::size_t size = nn::moe_router_size(spec_) + local_ * nn::moe_expert_size(spec_);
  params_.assign(size, 0.0f);
  grads_.assign(size, 0.0f);
  nn::moe_init_router(spec_, seed, router_parameters());
  for (std::size_t i = 0; i < local_; ++i)
    nn::moe_init_expert(spec_, seed, first_ + i, expert_parameters(first_ + i));
  stats_.shard_tokens.assign(static_cast<std::size_t>(ranks_), 0);
  stats_.rank_rows.assign(static_cast<std::size_t>(ranks_), 0);
}

std::span<float> ExpertParallelMoe::router_parameters() {
  return std::span<float>(params_).first(nn::moe_router_size(spec_));
}

std::span<float> ExpertParallelMoe::router_gradients() {
  return std::span<float>(grads_).first(nn::moe_router_size(spec_));
}

std::span<float> ExpertParallelMoe::expert_parameters(std::size_t expert) {
  if (!owns(expert))
    throw std::out_of_range("ExpertParallelMoe: expert " + std::to_string(expert) +
                            " is not on rank " + std::to_string(rank_));
  const std::size_t n = nn::moe_expert_size(spec_);
  return std::span<float>(params_).subspan(nn::moe_router_size(spec_) + (expert - first_) * n, n);
}

std::span<float> ExpertParallelMoe::expert_gradients(std::size_t expert) {
  if (!owns(expert))
    throw std::out_of_range("ExpertParallelMoe: expert " + std::to_string(expert) +
                            " is not on rank " + std::to_string(rank_));
  const std::size_t n = nn::moe_expert_size(spec_);
  return std::span<float>(grads_).subspan(nn::moe_router_size(spec_) + (expert - first_) * n, n);
}

void ExpertParallelMoe::exchange(std::span<const float> send,
                                 std::span<const std::size_t> send_counts, std::span<float> recv,
                                 std::span<const std::size_t> recv_counts, double& seconds) {
  const auto begin = std::chrono::steady_clock::now();
  if (opts_.exchange == TokenExchange::pairwise)
    dp::all_to_all_v_pairwise(comm_, send, send_counts, recv, recv_counts, {.tag = opts_.tag});
  else
    comm_.all_to_all_v(send, send_counts, recv, recv_counts);
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

// From every rank's gathered counts ([T_s, n_s(c, e) for c < k and e < E, its probability sums
// as E high and E low floats] a rank): the whole batch's capacity and statistics, this rank's
// slots, and the layout of the rows each rank sends and receives.
void ExpertParallelMoe::plan(std::span<const float> gathered) {
  const std::size_t d = spec_.width, E = spec_.experts, k = spec_.top_k;
  const auto R = static_cast<std::size_t>(ranks_), r = static_cast<std::size_t>(rank_);
  const std::size_t m = gathered.size() / R;
  const auto count = [&](std::size_t s, std::size_t c, std::size_t e) {
    return static_cast<std::size_t>(gathered[s * m + 1 + c * E + e]);
  };
  total_tokens_ = token_offset_ = 0;
  for (std::size_t s = 0; s < R; ++s) {
    stats_.shard_tokens[s] = static_cast<std::size_t>(gathered[s * m]);
    if (s < r) token_offset_ += stats_.shard_tokens[s];
    total_tokens_ += stats_.shard_tokens[s];
  }
  if (total_tokens_ == 0)
    throw std::invalid_argument("ExpertParallelMoe::forward: the batch is empty on every rank");
  const std::size_t T = total_tokens_;
  const std::size_t C = spec_.dropless ? T : nn::moe_capacity(T, E, k, spec_.capacity_factor);
  // Where each (rank, choice, expert)'s choices start in the expert's order, and how many of
  // them are kept: every rank's first choices, then every rank's second.
  std::vector<std::size_t> start(R * k * E), kept(R * k * E);
  for (std::size_t e = 0; e < E; ++e) {
    std::size_t position = 0;
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t s = 0; s < R; ++s) {
        const std::size_t at = (s * k + c) * E + e, n = count(s, c, e);
        start[at] = position;
        kept[at] = position >= C ? 0 : std::min(n, C - position);
        position += n;
      }
  }
  std::vector<std::size_t> next(start.begin() + static_cast<std::ptrdiff_t>(r * k * E),
                                start.begin() + static_cast<std::ptrdiff_t>((r + 1) * k * E));
  nn::moe_assign_slots(routes_, k, E, C, next);

  // The whole batch's statistics, as nn::MoeLayer computes them.
  nn::MoeStats& g = stats_.global;
  g.tokens = T;
  g.capacity = C;
  g.routed.assign(E, 0);
  g.kept.assign(E, 0);
  g.top1.assign(E, 0);
  g.router_share.assign(E, 0.0);
  std::size_t kept_sum = 0;
  for (std::size_t s = 0; s < R; ++s)
    for (std::size_t e = 0; e < E; ++e) {
      g.top1[e] += count(s, 0, e);
      for (std::size_t c = 0; c < k; ++c) {
        g.routed[e] += count(s, c, e);
        g.kept[e] += kept[(s * k + c) * E + e];
        kept_sum += kept[(s * k + c) * E + e];
      }
      g.router_share[e] += static_cast<double>(gathered[s * m + 1 + k * E + e]) +
                           static_cast<double>(gathered[s * m + 1 + k * E + E + e]);
    }
  const double Td = static_cast<double>(T);
  double fp = 0;
  for (std::size_t i = 0; i < E; ++i) {
    g.router_share[i] /= Td;
    fp += static_cast<double>(g.top1[i]) / Td * g.router_share[i];
  }
  g.aux_loss = static_cast<double>(spec_.aux_alpha) * static_cast<double>(E) * fp;
  g.dropped = k * T - kept_sum;
  g.dropped_fraction = static_cast<double>(g.dropped) / (static_cast<double>(k) * Td);
  g.imbalance = static_cast<double>(*std::max_element(g.routed.begin(), g.routed.end())) /
                (static_cast<double>(k) * Td / static_cast<double>(E));
  std::fill(stats_.rank_rows.begin(), stats_.rank_rows.end(), 0);
  for (std::size_t e = 0; e < E; ++e)
    stats_.rank_rows[static_cast<std::size_t>(expert_owner(e, E, ranks_))] += g.kept[e];
  const std::size_t most = *std::max_element(stats_.rank_rows.begin(), stats_.rank_rows.end());
  stats_.rank_imbalance = kept_sum == 0 ? 0.0
                                        : static_cast<double>(most) * static_cast<double>(R) /
                                              static_cast<double>(kept_sum);

  // Send layout: experts ascending (so owners ascending), then choices, then token order.
  std::vector<std::size_t> block(k * E);
  send_counts_.assign(R, 0);
  std::size_t rows = 0;
  for (std::size_t e = 0; e < E; ++e)
    for (std::size_t c = 0; c < k; ++c) {
      const std::size_t n = kept[(r * k + c) * E + e];
      block[c * E + e] = rows;
      rows += n;
      send_counts_[static_cast<std::size_t>(expert_owner(e, E, ranks_))] += n * d;
    }
  send_row_.assign(routes_.size(), 0);
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const nn::MoeRoute& route = routes_[i];
    const std::size_t c = i % k, e = route.expert;
    if (route.kept) send_row_[i] = block[c * E + e] + (route.slot - start[(r * k + c) * E + e]);
  }
  // Receive layout: from each rank, this rank's experts in the same order; each row's place in
  // the experts' buffer is its slot.
  row_begin_.assign(local_ + 1, 0);
  for (std::size_t i = 0; i < local_; ++i) row_begin_[i + 1] = row_begin_[i] + g.kept[first_ + i];
  recv_counts_.assign(R, 0);
  slot_row_.clear();
  for (std::size_t s = 0; s < R; ++s)
    for (std::size_t i = 0; i < local_; ++i)
      for (std::size_t c = 0; c < k; ++c) {
        const std::size_t at = (s * k + c) * E + first_ + i;
        for (std::size_t j = 0; j < kept[at]; ++j)
          slot_row_.push_back(row_begin_[i] + start[at] + j);
        recv_counts_[s] += kept[at] * d;
      }
  stats_.rows_sent = (rows * d - send_counts_[r]) / d;
  stats_.rows_received = (slot_row_.size() * d - recv_counts_[r]) / d;
  stats_.payload_bytes = sizeof(float) * d * (stats_.rows_sent + stats_.rows_received);
}

const ExpertParallelStats& ExpertParallelMoe::forward(const float* x, std::size_t tokens,
                                                      float* y) {
  const std::size_t d = spec_.width, E = spec_.experts, k = spec_.top_k;
  if (tokens > 0 && (x == nullptr || y == nullptr))
    throw std::invalid_argument("ExpertParallelMoe::forward: null buffer");
  if (tokens > 0 && y < x + tokens * d && x < y + tokens * d)
    throw std::invalid_argument("ExpertParallelMoe::forward: y overlaps x (backward reads x)");
  if (tokens >= kMaxCount)
    throw std::invalid_argument("ExpertParallelMoe::forward: " + std::to_string(tokens) +
                                " tokens on one rank (counts travel as floats: below 2^24)");
  const std::uint64_t sent0 = comm_.bytes_sent();
  ExpertParallelStats::Phases& ph = stats_.forward_s;
  ph = {};
  std::optional<Phase> phase(std::in_place, "moe route", ph.route);
  x_ = x;
  tokens_ = tokens;
  probs_.resize(tokens * E);
  routes_.assign(tokens * k, nn::MoeRoute{});
  nn::moe_route(spec_, opts_.gemm, router_parameters(), x, tokens, probs_.data(), routes_.data());
  // This rank's counts and probability sums (a double as two floats), to every rank.
  const std::size_t m = 1 + k * E + 2 * E;
  std::vector<float> mine(m, 0.0f), gathered(m * static_cast<std::size_t>(ranks_));
  std::vector<double> share(E, 0.0);
  mine[0] = static_cast<float>(tokens);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t c = 0; c < k; ++c) mine[1 + c * E + routes_[t * k + c].expert] += 1.0f;
    for (std::size_t i = 0; i < E; ++i) share[i] += probs_[t * E + i];
  }
  for (std::size_t i = 0; i < E; ++i) {
    const auto high = static_cast<float>(share[i]);
    mine[1 + k * E + i] = high;
    mine[1 + k * E + E + i] = static_cast<float>(share[i] - static_cast<double>(high));
  }
  comm_.all_gather(mine, gathered);
  plan(gathered);

  // Dispatch: the kept rows to their experts' ranks, each put at its slot.
  phase.emplace("moe dispatch", ph.dispatch);
  send_.resize(total(send_counts_));
  recv_.resize(total(recv_counts_));
  for (std::size_t i = 0; i < routes_.size(); ++i)
    if (routes_[i].kept) copy_row(x, i / k, send_.data(), send_row_[i], d);
  exchange(send_, send_counts_, recv_, recv_counts_, ph.exchange);
  const std::size_t h = spec_.hidden, rows = row_begin_.back();
  xin_.resize(rows * d);
  hid_.resize(rows * h);
  yout_.resize(rows * d);
  for (std::size_t j = 0; j < slot_row_.size(); ++j)
    copy_row(recv_.data(), j, xin_.data(), slot_row_[j], d);
  // This rank's experts, each on its rows in slot order.
  phase.emplace("moe experts", ph.experts);
  for (std::size_t i = 0; i < local_; ++i) {
    const std::size_t row = row_begin_[i];
    nn::moe_expert_forward(spec_, opts_.gemm,
                           nn::moe_expert_view(spec_, expert_parameters(first_ + i)),
                           xin_.data() + row * d, row_begin_[i + 1] - row, hid_.data() + row * h,
                           yout_.data() + row * d);
  }
  // Combine: the outputs back in the layout they came in (recv_ reused), gated and summed.
  phase.emplace("moe combine", ph.combine);
  for (std::size_t j = 0; j < slot_row_.size(); ++j)
    copy_row(yout_.data(), slot_row_[j], recv_.data(), j, d);
  ret_.resize(send_.size());
  exchange(recv_, recv_counts_, ret_, send_counts_, ph.exchange);
  float passed = 0;
  for (std::size_t t = 0; t < tokens; ++t) {
    float* yt = y + t * d;
    if (spec_.residual)
      std::copy_n(x + t * d, d, yt);
    else
      std::fill_n(yt, d, 0.0f);
    bool any = false;
    for (std::size_t c = 0; c < k; ++c) {
      const nn::MoeRoute& r = routes_[t * k + c];
      if (!r.kept) continue;
      any = true;
      const float* e = ret_.data() + send_row_[t * k + c] * d;
      for (std::size_t j = 0; j < d; ++j) yt[j] += r.gate * e[j];
    }
    if (!any) passed += 1.0f;
  }
  comm_.all_reduce(std::span<float>(&passed, 1));
  stats_.global.tokens_passed = static_cast<std::size_t>(passed);
  stats_.bytes_sent_forward = comm_.bytes_sent() - sent0;
  phase.reset();
  return stats_;
}

void ExpertParallelMoe::backward(const float* dy, float* dx) {
  if (total_tokens_ == 0) throw std::logic_error("ExpertParallelMoe::backward: no forward ran");
  if (tokens_ > 0 && dy == nullptr)
    throw std::invalid_argument("ExpertParallelMoe::backward: null dy");
  const std::size_t d = spec_.width, h = spec_.hidden, E = spec_.experts, k = spec_.top_k;
  const std::size_t T = tokens_, rows = row_begin_.back();
  const std::uint64_t sent0 = comm_.bytes_sent();
  ExpertParallelStats::Phases& ph = stats_.backward_s;
  ph = {};
  std::optional<Phase> phase(std::in_place, "moe route", ph.route);
  // Each kept choice's gate gradient a_tc = dy_t . E(x_t) and its output gradient g dy_t, in the
  // send layout (send_ reused).
  gate_grads_.assign(T * k, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    const float* dyt = dy + t * d;
    for (std::size_t c = 0; c < k; ++c) {
      const nn::MoeRoute& r = routes_[t * k + c];
      if (!r.kept) continue;
      const std::size_t row = send_row_[t * k + c];
      const float* e = ret_.data() + row * d;
      float* dye = send_.data() + row * d;
      double a = 0;
      for (std::size_t j = 0; j < d; ++j) {
        a += static_cast<double>(dyt[j]) * e[j];
        dye[j] = r.gate * dyt[j];
      }
      gate_grads_[t * k + c] = a;
    }
  }
  dlogits_.resize(T * E);
  nn::moe_logits_gradient(spec_, probs_.data(), routes_.data(), gate_grads_.data(), T,
                          stats_.global.top1, total_tokens_, dlogits_.data());
  // The output gradients to the experts, each at its slot.
  phase.emplace("moe dispatch", ph.dispatch);
  exchange(send_, send_counts_, recv_, recv_counts_, ph.exchange);
  dyin_.resize(rows * d);
  dhid_.resize(rows * h);
  dxin_.resize(rows * d);
  for (std::size_t j = 0; j < slot_row_.size(); ++j)
    copy_row(recv_.data(), j, dyin_.data(), slot_row_[j], d);
  phase.emplace("moe experts", ph.experts);
  for (std::size_t i = 0; i < local_; ++i) {
    const std::size_t row = row_begin_[i], e = first_ + i;
    nn::moe_expert_backward(spec_, opts_.gemm, nn::moe_expert_view(spec_, expert_parameters(e)),
                            nn::moe_expert_view(spec_, expert_gradients(e)), xin_.data() + row * d,
                            hid_.data() + row * h, dyin_.data() + row * d, row_begin_[i + 1] - row,
                            dhid_.data() + row * h, dxin_.data() + row * d);
  }
  // The experts' input gradients back to the tokens' ranks.
  phase.emplace("moe combine", ph.combine);
  for (std::size_t j = 0; j < slot_row_.size(); ++j)
    copy_row(dxin_.data(), slot_row_[j], recv_.data(), j, d);
  dret_.resize(send_.size());
  exchange(recv_, recv_counts_, dret_, send_counts_, ph.exchange);
  // This rank's share of the router's gradient: its tokens only.
  phase.emplace("moe route", ph.route);
  const nn::LayerView rg = nn::moe_router_view(spec_, router_gradients());
  kernels::gemm(opts_.gemm, Trans::yes, Trans::no, E, d, T, 1.0f, dlogits_.data(), E, x_, d, 0.0f,
                rg.w.data, d);
  kernels::column_sums(dlogits_.data(), T, E, E, rg.b.data());
  if (dx != nullptr) {
    phase.emplace("moe combine", ph.combine);
    for (std::size_t t = 0; t < T; ++t) {
      float* dxt = dx + t * d;
      if (spec_.residual)
        std::copy_n(dy + t * d, d, dxt);
      else
        std::fill_n(dxt, d, 0.0f);
      for (std::size_t c = 0; c < k; ++c) {
        if (!routes_[t * k + c].kept) continue;
        const float* de = dret_.data() + send_row_[t * k + c] * d;
        for (std::size_t j = 0; j < d; ++j) dxt[j] += de[j];
      }
    }
    kernels::gemm(opts_.gemm, Trans::no, Trans::no, T, d, E, 1.0f, dlogits_.data(), E,
                  params_.data(), d, 1.0f, dx, d);
  }
  stats_.bytes_sent_backward = comm_.bytes_sent() - sent0;
  phase.reset();
}

void ExpertParallelMoe::all_reduce_router_gradients() { comm_.all_reduce(router_gradients()); }

}  // namespace concurdl::mp
