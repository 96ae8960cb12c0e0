// A mixture-of-experts (MoE) layer: a learned router sends each row (token) of a batch to its
// top-k of E experts, each a two-layer MLP block, within a capacity per expert; the layer's
// output is the input (an explicit residual, which can be switched off) plus the gated sum of
// the experts' outputs. Exact forward and backward,
// float32, row-major, batch-major: the input is tokens x d. Sources: Shazeer et al. 2017,
// "Outrageously Large Neural Networks: The Sparsely-Gated Mixture-of-Experts Layer"
// (arXiv:1701.06538); Lepikhin et al. 2020, "GShard" (arXiv:2006.16668); Fedus, Zoph & Shazeer,
// "Switch Transformers", JMLR 2022 (arXiv:2101.03961).
//
//   router    p_t = softmax(x_t Wr^T + br)                  Wr: E x d, br: E
//   top-k     e_t1 = argmax_i p_ti, e_t2 = argmax_{i != e_t1} p_ti (ties: the lower index)
//   gates     k = 1 (Switch, eq. 2):  g_t1 = p_t,e_t1
//             k = 2 (GShard, Algorithm 1): g_tc = p_t,e_tc / (p_t,e_t1 + p_t,e_t2), so the two
//             gates sum to 1, normalised before capacity is applied (as lingvo's Top2Gating
//             does by default; normalising over the kept choices after drops is the other
//             convention). GShard's random routing, which dispatches the second choice only
//             with a probability that grows with g_t2, is left out: routing is a function of
//             the input alone.
//   capacity  C = ceil(capacity_factor * k * tokens / E)   (Switch §2.2, eq. 3: tokens per
//             expert times the capacity factor; GShard's 2N/E for k = 2); dropless: no limit.
//             Slots are handed out in a fixed order, every first choice in token order, then
//             every second choice in token order (GShard's position_in_expert_2 starts after
//             the first choices kept); a choice that finds its expert full is dropped.
//   experts   E_i(x) = relu(x W1_i^T + b1_i) W2_i^T + b2_i  W1_i: h x d, W2_i: d x h
//   output    y_t = x_t + sum over kept choices c of g_tc E_{e_tc}(x_t)   (residual on), or
//             y_t = sum over kept choices c of g_tc E_{e_tc}(x_t)         (residual off).
//             A dropped choice contributes nothing (its gate is not renormalised away), so a
//             token whose every choice is dropped passes through: y_t = x_t with the residual.
//   aux loss  aux = alpha * E * sum_i f_i P_i                (Switch eq. 4-6)
//             f_i = (1/T) #{t : e_t1 = i} (top-1, before capacity; not differentiable),
//             P_i = (1/T) sum_t p_ti. Uniform routing (f_i = P_i = 1/E) gives aux = alpha.
//
// backward(dy, dx) is the gradient of (the caller's loss + aux), dy being the caller's loss's
// gradient with respect to y: the experts' weights and biases, the router's through the gates
// and the softmax (and through P_i for aux), and the input's through the residual, the experts
// and the router.
//
// Parameters live in one contiguous buffer and gradients in another, laid out alike: the router
// (Wr row-major, then br), then expert 0 .. E-1, each W1, b1, W2, b2. router_parameters() and
// expert_parameters(i) are spans into it (parameter_offsets() their boundaries), so the dense
// part can be all-reduced and each expert's part moved on its own, as expert parallelism does.
//
// Threads: forward keeps the routing and activations in the layer for backward, so one call at
// a time on a layer, and nothing may change the parameters between forward and its backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "concurdl/kernels/aligned.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/nn/mlp.hpp"

namespace concurdl::nn {

struct MoeSpec {
  std::size_t width = 0;         // d: the input's and the output's width
  std::size_t hidden = 0;        // h: each expert's hidden width
  std::size_t experts = 0;       // E
  std::size_t top_k = 1;         // 1 (Switch) or 2 (GShard)
  double capacity_factor = 1.0;  // > 0; ignored when dropless
  bool dropless = false;         // no capacity: every choice is kept
  float aux_alpha = 0.01f;       // the load-balancing loss's weight (Switch: 10^-2)
  bool residual = true;          // y = x + experts; else y = experts alone
};

// ceil(capacity_factor * top_k * tokens / experts), computed in double, and at most tokens (no
// expert can be chosen more often; an infinite factor is dropless): the one formula every rank
// of a sharded layer must use to drop the same choices.
std::size_t moe_capacity(std::size_t tokens, std::size_t experts, std::size_t top_k,
                         double capacity_factor);

// One choice of one token, as the last forward routed it.
struct MoeRoute {
  std::uint32_t expert = 0;
  float gate = 0;          // p (k = 1) or p renormalised over the two choices (k = 2)
  bool kept = false;       // found a slot within capacity
  std::uint32_t slot = 0;  // its position in the expert's buffer (when kept)
};

// What the last forward's routing did.
struct MoeStats {
  std::size_t tokens = 0;
  std::size_t capacity = 0;          // per expert; dropless: tokens (no expert can get more)
  std::vector<std::size_t> routed;   // per expert: choices sent to it, before capacity
  std::vector<std::size_t> kept;     // per expert: choices it computed (<= capacity)
  std::vector<std::size_t> top1;     // per expert: tokens whose first choice it is (T f_i)
  std::size_t dropped = 0;           // choices dropped; kept sum + dropped = top_k * tokens
  double dropped_fraction = 0;       // dropped / (top_k * tokens)
  std::size_t tokens_passed = 0;     // tokens with every choice dropped: y_t = x_t (residual)
  double imbalance = 0;              // max(routed) / mean(routed), 1 when balanced
  double aux_loss = 0;               // alpha E sum_i f_i P_i
  std::vector<double> router_share;  // per expert: P_i, the mean router probability
};

// The two linear maps of one expert, views into the parameter or gradient buffer.
struct ExpertView {
  LayerView up;    // W1: h x d, b1: h
  LayerView down;  // W2: d x h, b2: d
};

// --- the pieces of the layer, for a layer split over ranks (chapter 06's expert parallelism) ---
// MoeLayer is written over them; a sharded layer calls the same ones, so the two compute alike.

// Throws std::invalid_argument, "<who>: <what is wrong>", for a spec MoeLayer refuses.
void moe_check_spec(const MoeSpec& spec, const std::string& who);

// Floats of the router (Wr, br: E d + E) and of one expert (W1, b1, W2, b2: 2 h d + h + d).
std::size_t moe_router_size(const MoeSpec& spec);
std::size_t moe_expert_size(const MoeSpec& spec);
// The initial values MoeLayer(spec, seed) holds: the router's, and expert i's (each expert from
// a stream of its own, so a rank can build its experts without the others).
void moe_init_router(const MoeSpec& spec, std::uint64_t seed, std::span<float> router);
void moe_init_expert(const MoeSpec& spec, std::uint64_t seed, std::size_t i,
                     std::span<float> expert);
// Views of a router's or an expert's floats, laid out as above.
LayerView moe_router_view(const MoeSpec& spec, std::span<float> router);
ExpertView moe_expert_view(const MoeSpec& spec, std::span<float> expert);

// The router's probabilities (tokens x E) and each token's top_k choices and gates (routes:
// tokens * top_k, token-major), before capacity: every route comes back not kept.
void moe_route(const MoeSpec& spec, kernels::GemmVersion gemm, std::span<const float> router,
               const float* x, std::size_t tokens, float* probs, MoeRoute* routes);
// Slots, in the fixed order: every first choice in token order, then every second. A choice c
// of expert e takes position next[c * E + e] (which then advances) in e's buffer and is kept when
// the position is below capacity (slot = position). One batch starts from next = {0 for c = 0;
// the first choices of e for c = 1}; a shard of a batch from where its choices fall in the
// whole batch's order. Returns the choices dropped.
std::size_t moe_assign_slots(std::span<MoeRoute> routes, std::size_t top_k, std::size_t experts,
                             std::size_t capacity, std::span<std::size_t> next);

// One expert on n gathered rows: hid = relu(xin W1^T + b1) (n x h), yout = hid W2^T + b2.
void moe_expert_forward(const MoeSpec& spec, kernels::GemmVersion gemm, const ExpertView& w,
                        const float* xin, std::size_t n, float* hid, float* yout);
// Its backward from dyin (n x d, the gated output gradients): overwrites g with the weights' and
// biases' gradients (zeros when n = 0); dhid (n x h) is scratch; dxin (n x d), when not null,
// receives the rows' input gradients.
void moe_expert_backward(const MoeSpec& spec, kernels::GemmVersion gemm, const ExpertView& w,
                         const ExpertView& g, const float* xin, const float* hid, const float* dyin,
                         std::size_t n, float* dhid, float* dxin);
// The router logits' gradient (dlogits: tokens x E, overwritten): from a (tokens * top_k, choice
// c of token t: dy_t . E_e(x_t) when kept, 0 when dropped) through the gates, plus the aux
// loss's alpha E top1_i / T^2, with top1 (E counts) and T those of the whole batch, through the
// softmax.
void moe_logits_gradient(const MoeSpec& spec, const float* probs, const MoeRoute* routes,
                         const double* a, std::size_t tokens, std::span<const std::size_t> top1,
                         std::size_t total_tokens, float* dlogits);

class MoeLayer {
 public:
  // Throws std::invalid_argument naming what is wrong (a zero width, top_k not 1 or 2 or above
  // the experts, capacity_factor <= 0 without dropless, a negative alpha). Initialisation from
  // `seed`, the same everywhere: experts He-uniform with zero biases, as Mlp; the router
  // U(+-sqrt(0.3 / d)) (variance 0.1 / d, Switch's reduced scale, §2.4) with a zero bias, so
  // the first gates are near uniform. With `account`, the layer's buffers are counted there
  // (core/memory.hpp): parameters, gradients, forward's activations, backward's workspace.
  MoeLayer(MoeSpec spec, std::uint64_t seed,
           kernels::GemmVersion gemm = kernels::GemmVersion::openblas,
           MemoryAccount* account = nullptr);

  const MoeSpec& spec() const { return spec_; }
  std::size_t experts() const { return spec_.experts; }

  std::span<float> parameters() { return params_; }
  std::span<const float> parameters() const { return params_; }
  std::span<float> gradients() { return grads_; }
  std::span<const float> gradients() const { return grads_; }
  // The dense part (Wr, br) and expert i's part (W1, b1, W2, b2) of each buffer.
  std::span<float> router_parameters();
  std::span<float> router_gradients();
  std::span<float> expert_parameters(std::size_t i);
  std::span<float> expert_gradients(std::size_t i);
  // Where the router and each expert start, and the total: experts() + 2 entries.
  const std::vector<std::size_t>& parameter_offsets() const { return offsets_; }
  LayerView router();  // Wr: E x d, br: E
  LayerView router_gradient();
  ExpertView expert(std::size_t i);
  ExpertView expert_gradient(std::size_t i);

  // x (tokens x d, tokens >= 1) -> y (tokens x d). x is borrowed, not copied: keep it alive and
  // unchanged until backward is done; y must not overlap it (std::invalid_argument). Returns
  // the routing's statistics (stats()).
  const MoeStats& forward(const float* x, std::size_t tokens, float* y);
  // After forward: overwrites gradients() with the gradient of (loss + aux), where dy (tokens x
  // d) is the loss's gradient with respect to y; dx, when not null, receives the input's.
  void backward(const float* dy, float* dx);

  // Of the last forward: its statistics, the router probabilities (tokens x E), and the routes,
  // top_k per token, token-major (route t * top_k + c is token t's choice c).
  const MoeStats& stats() const { return stats_; }
  std::span<const float> router_probabilities() const { return probs_; }
  std::span<const MoeRoute> routes() const { return routes_; }

 private:
  MoeSpec spec_;
  kernels::GemmVersion gemm_;
  kernels::LineVector<float> params_, grads_;
  std::vector<std::size_t> offsets_;
  MoeStats stats_;
  // The last forward: input, router probabilities, routes, where each expert's rows start in
  // the gathered buffers, and the gathered inputs, hidden activations and expert outputs.
  const float* x_ = nullptr;
  std::size_t tokens_ = 0;
  kernels::LineVector<float> probs_;
  std::vector<MoeRoute> routes_;
  std::vector<std::size_t> row_begin_;  // experts() + 1 entries
  kernels::LineVector<float> xin_, hid_, yout_;
  // Backward's scratch.
  kernels::LineVector<float> dyin_, dhid_, dxin_, dprobs_;
  kernels::LineVector<double> gate_grads_;  // a: tokens * top_k

  void route(const float* x, std::size_t tokens);
  void run_experts(float* y);
};

}  // namespace concurdl::nn
