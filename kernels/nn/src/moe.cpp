// The mixture-of-experts layer (moe.hpp). Forward: the router's GEMM and a softmax per token,
// top-k and the gates, slots handed out in the fixed order (first choices in token order, then
// second choices), each expert's kept tokens gathered into a contiguous block of rows and run
// through its two GEMMs, the results scattered back scaled by their gates. Backward, with
// a_tc = dy_t . E_{e_tc}(x_t) the gradient of a kept gate (0 for a dropped one):
//   experts   dY_i = g dy (gathered), dW2 = dY^T H, db2 = column sums of dY,
//             dH = dY W2 * (H > 0), dW1 = dH^T X, db1 = column sums of dH, dX_i = dH W1
//   gates     k = 1: dp_t,e1 += a_t1
//             k = 2: with s = p1 + p2, g1 = p1 / s, g2 = p2 / s:
//                    dp_t,e1 += p2 (a_t1 - a_t2) / s^2,  dp_t,e2 += p1 (a_t2 - a_t1) / s^2
//   aux       dp_ti += alpha E f_i / T                       (through P_i = mean_t p_ti only)
//   softmax   dl_tj = p_tj (dp_tj - sum_k p_tk dp_tk)
//   router    dWr = dL^T X, dbr = column sums of dL, dx += dL Wr
//   input     dx = dy (residual) + the experts' dX_i scattered back + the router's.
// The steps are free functions (moe_route, moe_assign_slots, moe_expert_forward and _backward,
// moe_logits_gradient) that the layer is written over and that chapter 06's expert-parallel
// layer calls on its shard of the batch and its share of the experts.
#include "concurdl/nn/moe.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "concurdl/kernels/ops.hpp"
#include "concurdl/nn/random.hpp"

namespace concurdl::nn {

using kernels::Trans;

std::size_t moe_capacity(std::size_t tokens, std::size_t experts, std::size_t top_k,
                         double capacity_factor) {
  if (experts == 0) throw std::invalid_argument("moe_capacity: no experts");
  const double c = std::ceil(capacity_factor * static_cast<double>(top_k) *
                             static_cast<double>(tokens) / static_cast<double>(experts));
  if (!(c > 0)) return 0;
  return c >= static_cast<double>(tokens) ? tokens : static_cast<std::size_t>(c);
}

namespace {

void fill_uniform(float* w, std::size_t n, float bound, std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t state = mix_seed(seed, 0x4D4F45 /* "MOE" */, stream);
  for (std::size_t i = 0; i < n; ++i) w[i] = (2.0f * uniform01(state) - 1.0f) * bound;
}

LayerView linear_at(float* base, std::size_t out, std::size_t in) {
  return {{base, out, in, in}, {base + out * in, out}};
}

void check_size(std::span<float> s, std::size_t want, const char* what) {
  if (s.size() != want)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(s.size()) +
                                " floats, need " + std::to_string(want));
}

}  // namespace

std::size_t moe_router_size(const MoeSpec& s) { return s.experts * s.width + s.experts; }
std::size_t moe_expert_size(const MoeSpec& s) {
  return 2 * s.hidden * s.width + s.hidden + s.width;
}

LayerView moe_router_view(const MoeSpec& s, std::span<float> router) {
  check_size(router, moe_router_size(s), "moe_router_view");
  return linear_at(router.data(), s.experts, s.width);
}

ExpertView moe_expert_view(const MoeSpec& s, std::span<float> expert) {
  check_size(expert, moe_expert_size(s), "moe_expert_view");
  float* base = expert.data();
  return {linear_at(base, s.hidden, s.width),
          linear_at(base + s.hidden * s.width + s.hidden, s.width, s.hidden)};
}

void moe_init_router(const MoeSpec& s, std::uint64_t seed, std::span<float> router) {
  check_size(router, moe_router_size(s), "moe_init_router");
  std::fill(router.begin(), router.end(), 0.0f);
  fill_uniform(router.data(), s.experts * s.width, std::sqrt(0.3f / static_cast<float>(s.width)),
               seed, 0);
}

void moe_init_expert(const MoeSpec& s, std::uint64_t seed, std::size_t i, std::span<float> expert) {
  std::fill(expert.begin(), expert.end(), 0.0f);
  const ExpertView v = moe_expert_view(s, expert);
  const std::size_t d = s.width, h = s.hidden;
  fill_uniform(v.up.w.data, h * d, std::sqrt(6.0f / static_cast<float>(d)), seed, 1 + 2 * i);
  fill_uniform(v.down.w.data, d * h, std::sqrt(6.0f / static_cast<float>(h)), seed, 2 + 2 * i);
}

void moe_check_spec(const MoeSpec& spec, const std::string& who) {
  const auto bad = [&](const std::string& what) { throw std::invalid_argument(who + ": " + what); };
  if (spec.width == 0 || spec.hidden == 0 || spec.experts == 0)
    bad("width, hidden and experts must be > 0 (got d=" + std::to_string(spec.width) +
        ", h=" + std::to_string(spec.hidden) + ", E=" + std::to_string(spec.experts) + ")");
  if (spec.top_k != 1 && spec.top_k != 2)
    bad("top_k must be 1 or 2, not " + std::to_string(spec.top_k));
  if (spec.top_k > spec.experts)
    bad("top_k " + std::to_string(spec.top_k) + " is more than the " +
        std::to_string(spec.experts) + " experts");
  if (!spec.dropless && !(spec.capacity_factor > 0))
    bad("capacity_factor must be > 0 (or dropless), not " + std::to_string(spec.capacity_factor));
  if (!(spec.aux_alpha >= 0)) bad("aux_alpha must be >= 0");
}

MoeLayer::MoeLayer(MoeSpec spec, std::uint64_t seed, kernels::GemmVersion gemm,
                   MemoryAccount* account)
    : spec_(spec),
      gemm_(gemm),
      params_(kernels::LineAllocator<float>(account, MemoryKind::parameters)),
      grads_(kernels::LineAllocator<float>(account, MemoryKind::gradients)),
      probs_(kernels::LineAllocator<float>(account, MemoryKind::activations)),
      xin_(probs_.get_allocator()),
      hid_(probs_.get_allocator()),
      yout_(probs_.get_allocator()),
      dyin_(kernels::LineAllocator<float>(account, MemoryKind::workspace)),
      dhid_(dyin_.get_allocator()),
      dxin_(dyin_.get_allocator()),
      dprobs_(dyin_.get_allocator()),
      gate_grads_(dyin_.get_allocator()) {
  moe_check_spec(spec_, "MoeLayer");
  const std::size_t E = spec_.experts;
  offsets_.push_back(0);
  offsets_.push_back(moe_router_size(spec_));
  for (std::size_t i = 0; i < E; ++i) offsets_.push_back(offsets_.back() + moe_expert_size(spec_));
  params_.assign(offsets_.back(), 0.0f);
  grads_.assign(offsets_.back(), 0.0f);
  moe_init_router(spec_, seed, router_parameters());
  for (std::size_t i = 0; i < E; ++i) moe_init_expert(spec_, seed, i, expert_parameters(i));
  stats_.routed.assign(E, 0);
  stats_.kept.assign(E, 0);
  stats_.top1.assign(E, 0);
  stats_.router_share.assign(E, 0.0);
}

std::span<float> MoeLayer::router_parameters() {
  return std::span<float>(params_).subspan(0, offsets_[1]);
}

std::span<float> MoeLayer::router_gradients() {
  return std::span<float>(grads_).subspan(0, offsets_[1]);
}

std::span<float> MoeLayer::expert_parameters(std::size_t i) {
  if (i >= experts()) throw std::out_of_range("MoeLayer: no expert " + std::to_string(i));
  return std::span<float>(params_).subspan(offsets_[i + 1], offsets_[i + 2] - offsets_[i + 1]);
}

std::span<float> MoeLayer::expert_gradients(std::size_t i) {
  if (i >= experts()) throw std::out_of_range("MoeLayer: no expert " + std::to_string(i));
  return std::span<float>(grads_).subspan(offsets_[i + 1], offsets_[i + 2] - offsets_[i + 1]);
}

LayerView MoeLayer::router() { return moe_router_view(spec_, router_parameters()); }
LayerView MoeLayer::router_gradient() { return moe_router_view(spec_, router_gradients()); }
ExpertView MoeLayer::expert(std::size_t i) { return moe_expert_view(spec_, expert_parameters(i)); }
ExpertView MoeLayer::expert_gradient(std::size_t i) {
  return moe_expert_view(spec_, expert_gradients(i));
}

void moe_route(const MoeSpec& spec, kernels::GemmVersion gemm, std::span<const float> router,
               const float* x, std::size_t tokens, float* probs, MoeRoute* routes) {
  const std::size_t d = spec.width, E = spec.experts, k = spec.top_k;
  if (router.size() != moe_router_size(spec))
    throw std::invalid_argument("moe_route: the router has " + std::to_string(router.size()) +
                                " floats, need " + std::to_string(moe_router_size(spec)));
  kernels::gemm(gemm, Trans::no, Trans::yes, tokens, E, d, 1.0f, x, d, router.data(), d, 0.0f,
                probs, E, {.bias = router.data() + E * d});
  for (std::size_t t = 0; t < tokens; ++t) {
    float* p = probs + t * E;
    // Softmax, stable: the row's maximum subtracted; the sum in double.
    const float m = *std::max_element(p, p + E);
    double sum = 0;
    for (std::size_t i = 0; i < E; ++i) sum += std::exp(static_cast<double>(p[i]) - m);
    for (std::size_t i = 0; i < E; ++i)
      p[i] = static_cast<float>(std::exp(static_cast<double>(p[i]) - m) / sum);
    // First and second choice: strict comparisons, so a tie goes to the lower index.
    std::size_t e1 = 0;
    for (std::size_t i = 1; i < E; ++i)
      if (p[i] > p[e1]) e1 = i;
    MoeRoute* r = routes + t * k;
    r[0] = MoeRoute{static_cast<std::uint32_t>(e1), p[e1]};
    if (k == 2) {
      std::size_t e2 = e1 == 0 ? 1 : 0;
      for (std::size_t i = 0; i < E; ++i)
        if (i != e1 && p[i] > p[e2]) e2 = i;
      const float total = p[e1] + p[e2];
      r[0].gate = p[e1] / total;
      r[1] = MoeRoute{static_cast<std::uint32_t>(e2), p[e2] / total};
    }
  }
}

std::size_t moe_assign_slots(std::span<MoeRoute> routes, std::size_t top_k, std::size_t experts,
                             std::size_t capacity, std::span<std::size_t> next) {
  if (top_k == 0 || routes.size() % top_k != 0 || next.size() != top_k * experts)
    throw std::invalid_argument("moe_assign_slots: need tokens * top_k routes, top_k * E starts");
  const std::size_t tokens = routes.size() / top_k;
  std::size_t dropped = 0;
  for (std::size_t c = 0; c < top_k; ++c)
    for (std::size_t t = 0; t < tokens; ++t) {
      MoeRoute& r = routes[t * top_k + c];
      if (r.expert >= experts) throw std::invalid_argument("moe_assign_slots: no such expert");
      const std::size_t position = next[c * experts + r.expert]++;
      r.kept = position < capacity;
      r.slot = r.kept ? static_cast<std::uint32_t>(position) : 0;
      if (!r.kept) ++dropped;
    }
  return dropped;
}

// The router, top-k, the gates and the slots; fills routes_, row_begin_ and stats_.
void MoeLayer::route(const float* x, std::size_t tokens) {
  const std::size_t E = spec_.experts, k = spec_.top_k;
  probs_.resize(tokens * E);
  routes_.assign(tokens * k, MoeRoute{});
  moe_route(spec_, gemm_, router_parameters(), x, tokens, probs_.data(), routes_.data());
  MoeStats& s = stats_;
  s.tokens = tokens;
  std::fill(s.routed.begin(), s.routed.end(), 0);
  std::fill(s.top1.begin(), s.top1.end(), 0);
  std::fill(s.router_share.begin(), s.router_share.end(), 0.0);
  for (std::size_t t = 0; t < tokens; ++t) {
    const float* p = probs_.data() + t * E;
    const MoeRoute* r = routes_.data() + t * k;
    ++s.top1[r[0].expert];
    for (std::size_t c = 0; c < k; ++c) ++s.routed[r[c].expert];
    for (std::size_t i = 0; i < E; ++i) s.router_share[i] += p[i];
  }
  // Slots: every first choice in token order, then every second choice.
  s.capacity = spec_.dropless ? tokens : moe_capacity(tokens, E, k, spec_.capacity_factor);
  std::vector<std::size_t> next(k * E, 0);
  if (k == 2)
    std::copy(s.top1.begin(), s.top1.end(), next.begin() + static_cast<std::ptrdiff_t>(E));
  s.dropped = moe_assign_slots(routes_, k, E, s.capacity, next);
  std::fill(s.kept.begin(), s.kept.end(), 0);
  s.tokens_passed = 0;
  for (std::size_t t = 0; t < tokens; ++t) {
    bool any = false;
    for (std::size_t c = 0; c < k; ++c) {
      const MoeRoute& r = routes_[t * k + c];
      if (r.kept) ++s.kept[r.expert];
      any = any || r.kept;
    }
    if (!any) ++s.tokens_passed;
  }
  row_begin_.assign(E + 1, 0);
  for (std::size_t i = 0; i < E; ++i) row_begin_[i + 1] = row_begin_[i] + s.kept[i];
  const double T = static_cast<double>(tokens);
  double fp = 0;
  for (std::size_t i = 0; i < E; ++i) {
    s.router_share[i] /= T;
    fp += static_cast<double>(s.top1[i]) / T * s.router_share[i];
  }
  s.aux_loss = static_cast<double>(spec_.aux_alpha) * static_cast<double>(E) * fp;
  s.dropped_fraction = static_cast<double>(s.dropped) / (static_cast<double>(k) * T);
  const double mean = static_cast<double>(k) * T / static_cast<double>(E);
  s.imbalance = static_cast<double>(*std::max_element(s.routed.begin(), s.routed.end())) / mean;
}

void moe_expert_forward(const MoeSpec& spec, kernels::GemmVersion gemm, const ExpertView& w,
                        const float* xin, std::size_t n, float* hid, float* yout) {
  const std::size_t d = spec.width, h = spec.hidden;
  if (n == 0) return;
  kernels::gemm(gemm, Trans::no, Trans::yes, n, h, d, 1.0f, xin, d, w.up.w.data, d, 0.0f, hid, h,
                {.bias = w.up.b.data(), .relu = true});
  kernels::gemm(gemm, Trans::no, Trans::yes, n, d, h, 1.0f, hid, h, w.down.w.data, h, 0.0f, yout, d,
                {.bias = w.down.b.data()});
}

void moe_expert_backward(const MoeSpec& spec, kernels::GemmVersion gemm, const ExpertView& w,
                         const ExpertView& g, const float* xin, const float* hid, const float* dyin,
                         std::size_t n, float* dhid, float* dxin) {
  const std::size_t d = spec.width, h = spec.hidden;
  if (n == 0) {
    for (const LayerView* l : {&g.up, &g.down}) {
      std::fill_n(l->w.data, l->w.rows * l->w.cols, 0.0f);
      std::fill(l->b.begin(), l->b.end(), 0.0f);
    }
    return;
  }
  kernels::gemm(gemm, Trans::yes, Trans::no, d, h, n, 1.0f, dyin, d, hid, h, 0.0f, g.down.w.data,
                h);
  kernels::column_sums(dyin, n, d, d, g.down.b.data());
  kernels::gemm(gemm, Trans::no, Trans::no, n, h, d, 1.0f, dyin, d, w.down.w.data, h, 0.0f, dhid, h,
                {.relu_of = hid, .ld_relu_of = h});
  kernels::gemm(gemm, Trans::yes, Trans::no, h, d, n, 1.0f, dhid, h, xin, d, 0.0f, g.up.w.data, d);
  kernels::column_sums(dhid, n, h, h, g.up.b.data());
  if (dxin != nullptr)
    kernels::gemm(gemm, Trans::no, Trans::no, n, d, h, 1.0f, dhid, h, w.up.w.data, d, 0.0f, dxin,
                  d);
}

// Each expert on its kept tokens, gathered into rows [row_begin_[i], row_begin_[i + 1]) in slot
// order; then y_t = (x_t) + sum over kept choices of g E(x_t), choices in order.
void MoeLayer::run_experts(float* y) {
  const std::size_t d = spec_.width, h = spec_.hidden, k = spec_.top_k, E = spec_.experts;
  const std::size_t rows = row_begin_[E];
  xin_.resize(rows * d);
  hid_.resize(rows * h);
  yout_.resize(rows * d);
  for (std::size_t t = 0; t < tokens_; ++t)
    for (std::size_t c = 0; c < k; ++c) {
      const MoeRoute& r = routes_[t * k + c];
      if (r.kept) std::copy_n(x_ + t * d, d, xin_.data() + (row_begin_[r.expert] + r.slot) * d);
    }
  for (std::size_t i = 0; i < E; ++i) {
    const std::size_t row = row_begin_[i];
    moe_expert_forward(spec_, gemm_, expert(i), xin_.data() + row * d, stats_.kept[i],
                       hid_.data() + row * h, yout_.data() + row * d);
  }
  for (std::size_t t = 0; t < tokens_; ++t) {
    float* yt = y + t * d;
    if (spec_.residual)
      std::copy_n(x_ + t * d, d, yt);
    else
      std::fill_n(yt, d, 0.0f);
    for (std::size_t c = 0; c < k; ++c) {
      const MoeRoute& r = routes_[t * k + c];
      if (!r.kept) continue;
      const float* e = yout_.data() + (row_begin_[r.expert] + r.slot) * d;
      for (std::size_t j = 0; j < d; ++j) yt[j] += r.gate * e[j];
    }
  }
}

const MoeStats& MoeLayer::forward(const float* x, std::size_t tokens, float* y) {
  if (tokens == 0) throw std::invalid_argument("MoeLayer::forward: empty batch");
  if (x == nullptr || y == nullptr) throw std::invalid_argument("MoeLayer::forward: null buffer");
  const std::size_t n = tokens * spec_.width;
  if (y < x + n && x < y + n)
    throw std::invalid_argument("MoeLayer::forward: y overlaps x (backward reads x)");
  x_ = x;
  tokens_ = tokens;
  route(x, tokens);
  run_experts(y);
  return stats_;
}

void moe_logits_gradient(const MoeSpec& spec, const float* probs, const MoeRoute* routes,
                         const double* a, std::size_t tokens, std::span<const std::size_t> top1,
                         std::size_t total_tokens, float* dlogits) {
  const std::size_t E = spec.experts, k = spec.top_k;
  if (top1.size() != E) throw std::invalid_argument("moe_logits_gradient: need E top-1 counts");
  std::fill_n(dlogits, tokens * E, 0.0f);
  // The gates.
  for (std::size_t t = 0; t < tokens; ++t) {
    const MoeRoute* r = routes + t * k;
    const double* at = a + t * k;
    const float* p = probs + t * E;
    float* dp = dlogits + t * E;
    if (k == 1) {
      dp[r[0].expert] += static_cast<float>(at[0]);
    } else {
      const double p1 = p[r[0].expert], p2 = p[r[1].expert], s2 = (p1 + p2) * (p1 + p2);
      dp[r[0].expert] += static_cast<float>(p2 * (at[0] - at[1]) / s2);
      dp[r[1].expert] += static_cast<float>(p1 * (at[1] - at[0]) / s2);
    }
  }
  // The aux loss through P_i, then the softmax.
  const double T = static_cast<double>(total_tokens);
  const double aux_scale = static_cast<double>(spec.aux_alpha) * static_cast<double>(E) / (T * T);
  for (std::size_t t = 0; t < tokens; ++t) {
    const float* p = probs + t * E;
    float* dp = dlogits + t * E;
    double dot = 0;
    for (std::size_t i = 0; i < E; ++i) {
      dp[i] += static_cast<float>(aux_scale * static_cast<double>(top1[i]));
      dot += static_cast<double>(p[i]) * dp[i];
    }
    for (std::size_t i = 0; i < E; ++i) dp[i] = p[i] * static_cast<float>(dp[i] - dot);
  }
}

void MoeLayer::backward(const float* dy, float* dx) {
  if (tokens_ == 0) throw std::logic_error("MoeLayer::backward: no forward ran");
  if (dy == nullptr) throw std::invalid_argument("MoeLayer::backward: null dy");
  const std::size_t d = spec_.width, h = spec_.hidden, k = spec_.top_k, E = spec_.experts;
  const std::size_t T = tokens_, rows = row_begin_[E];
  dyin_.resize(rows * d);
  dhid_.resize(rows * h);
  dprobs_.resize(T * E);
  gate_grads_.assign(T * k, 0.0);
  // Each kept choice's output gradient g dy_t, gathered, and its gate's gradient a_tc.
  for (std::size_t t = 0; t < T; ++t) {
    const float* dyt = dy + t * d;
    for (std::size_t c = 0; c < k; ++c) {
      const MoeRoute& r = routes_[t * k + c];
      if (!r.kept) continue;
      const std::size_t row = row_begin_[r.expert] + r.slot;
      const float* e = yout_.data() + row * d;
      float* dye = dyin_.data() + row * d;
      double a = 0;
      for (std::size_t j = 0; j < d; ++j) {
        a += static_cast<double>(dyt[j]) * e[j];
        dye[j] = r.gate * dyt[j];
      }
      gate_grads_[t * k + c] = a;
    }
  }
  moe_logits_gradient(spec_, probs_.data(), routes_.data(), gate_grads_.data(), T, stats_.top1, T,
                      dprobs_.data());
  // The experts.
  if (dx != nullptr) dxin_.resize(rows * d);
  for (std::size_t i = 0; i < E; ++i) {
    const std::size_t row = row_begin_[i];
    moe_expert_backward(spec_, gemm_, expert(i), expert_gradient(i), xin_.data() + row * d,
                        hid_.data() + row * h, dyin_.data() + row * d, stats_.kept[i],
                        dhid_.data() + row * h, dx != nullptr ? dxin_.data() + row * d : nullptr);
  }
  // The router.
  const LayerView rg = router_gradient();
  kernels::gemm(gemm_, Trans::yes, Trans::no, E, d, T, 1.0f, dprobs_.data(), E, x_, d, 0.0f,
                rg.w.data, d);
  kernels::column_sums(dprobs_.data(), T, E, E, rg.b.data());
  if (dx == nullptr) return;
  // The input: the residual, each kept choice's expert input gradient, the router's.
  for (std::size_t t = 0; t < T; ++t) {
    float* dxt = dx + t * d;
    if (spec_.residual)
      std::copy_n(dy + t * d, d, dxt);
    else
      std::fill_n(dxt, d, 0.0f);
    for (std::size_t c = 0; c < k; ++c) {
      const MoeRoute& r = routes_[t * k + c];
      if (!r.kept) continue;
      const float* de = dxin_.data() + (row_begin_[r.expert] + r.slot) * d;
      for (std::size_t j = 0; j < d; ++j) dxt[j] += de[j];
    }
  }
  kernels::gemm(gemm_, Trans::no, Trans::no, T, d, E, 1.0f, dprobs_.data(), E, params_.data(), d,
                1.0f, dx, d);
}

}  // namespace concurdl::nn
