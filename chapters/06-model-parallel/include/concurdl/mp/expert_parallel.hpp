// Expert parallelism: kernels/nn's mixture-of-experts layer (nn::MoeLayer, moe.hpp) with its E
// experts spread over the R ranks of chapter 05's communicator, each token's row sent to the
// rank that holds its expert and the expert's output sent back: two all-to-alls forward, two
// backward. The pattern of GShard (Lepikhin et al. 2020, arXiv:2006.16668: its MoE layer as
// dispatch, AllToAll, the experts, AllToAll, combine, the experts sharded over devices) and of
// Switch Transformers (Fedus, Zoph & Shazeer, arXiv:2101.03961, §2.2 and Figure 3: each
// device's experts take at most their capacity of tokens, the rest are dropped).
//
//   rank r: x_r ──► router ──► top-k, gates ──► slots (global order) ──► pack by expert
//                                                   ▲                          │ all-to-all
//             all-gather of every rank's counts ────┘                          ▼
//   y_r ◄── x_r + Σ gate · out ◄── all-to-all ◄── this rank's experts ◄── rows from every rank
//
// Sharding. Expert e lives on one rank, in contiguous blocks: rank r holds experts
// [r E / R, (r + 1) E / R) (integer division), so E need not divide by R (3 ranks, 8 experts:
// 2, 3, 3). E < R is refused (std::invalid_argument): a rank with no expert; the remedy, experts
// replicated over data-parallel groups, is DeepSpeed-MoE's (Rajbhandari et al. 2022,
// arXiv:2201.05596), not built here. The router (Wr, br) is replicated; every rank builds the
// same initial router and its own experts from the spec and seed, as nn::MoeLayer(spec, seed).
//
// The batch. Rank r holds T_r rows (0 allowed); the batch is the ranks' rows concatenated in
// rank order, T = Σ T_r >= 1. Routing (softmax, top-k, gates) is per token, so local. Capacity is
// the whole batch's, C = moe_capacity(T, E, k, capacity_factor), and slots are handed out in
// nn::MoeLayer's order on the concatenated batch: every first choice in token order, then every
// second. One all-gather of every rank's per-choice, per-expert counts (and its router
// probability sums) gives each rank where its choices start in that order, an exclusive prefix
// sum: choice c of expert e on rank r starts at Σ_{c' < c} N_c'(e) + Σ_{s < r} n_{s,c}(e). So
// every kept/dropped decision and slot equals nn::MoeLayer's, including drops caused by tokens on
// lower ranks. The same counts tell every rank how many rows it receives from each other one,
// so no separate count exchange is needed before the all-to-alls.
//
// Rows on the wire. Rank r sends, for each expert in ascending order (so grouped by owner), its
// kept first-choice rows, then its kept second-choice rows, each in token order. The owner puts
// each row at its slot, so an expert sees its rows in nn::MoeLayer's order.
//
// Gradients. backward(dy, dx) takes dy_r, the rows of dL/dy for this rank's tokens, where L is
// the whole batch's loss (a mean over T tokens: dy carries 1/T, not 1/T_r); the aux loss's term
// uses the global T and f_i. Then this rank's experts' gradients are the whole batch's, and the
// router's gradient is this rank's share: the sum over ranks (all_reduce_router_gradients, a
// sum, not a mean) is nn::MoeLayer's on the concatenated batch. With data parallelism on top, a
// rank whose loss is the mean of its own T_r tokens scales dy by T_r / T first.
//
// Every rank calls every method in the same order (collectives match by order); the
// communicator's memory must be host. Threads: one call at a time on an object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/dp/communicator.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/nn/moe.hpp"

namespace concurdl::mp {

// How rows travel between ranks: the backend's all-to-all or chapter 05's hand-written one.
enum class TokenExchange { native, pairwise };

struct TokenExchangeVariant : VariantInfo {
  TokenExchange exchange;
};

inline constexpr TokenExchangeVariant kTokenExchangeRows[] = {
    {{"native",
      "Communicator::all_to_all_v: shared-memory copies (threads), MPI_Alltoallv (mpi); bytes "
      "move inside the backend, so bytes_sent does not see them"},
     TokenExchange::native},
    {{"pairwise",
      "chapter 05's all_to_all_v_pairwise: R - 1 sendrecv steps, every row crosses once; "
      "bytes_sent counts every row sent to another rank"},
     TokenExchange::pairwise},
};
inline constexpr VariantTable kTokenExchangeVariants{kTokenExchangeRows, "exchange"};

struct ExpertParallelOptions {
  kernels::GemmVersion gemm = kernels::GemmVersion::openblas;
  TokenExchange exchange = TokenExchange::native;
  int tag = 600;  // the pairwise exchange's messages
};

// Expert e's rank when E experts are spread over R ranks in contiguous blocks.
int expert_owner(std::size_t expert, std::size_t experts, int ranks);
// The first expert of rank r: r E / R.
std::size_t first_expert_of(int rank, std::size_t experts, int ranks);

// What the last forward did (and backward's bytes): the same on every rank down to
// rank_imbalance, this rank's own from rows_sent on.
struct ExpertParallelStats {
  nn::MoeStats global;                    // nn::MoeLayer's statistics on the whole batch
  std::vector<std::size_t> shard_tokens;  // T_r of every rank
  std::vector<std::size_t> rank_rows;     // rows each rank's experts computed (kept choices)
  double rank_imbalance = 0;              // max(rank_rows) / mean(rank_rows); 0 when none kept
  std::size_t rows_sent = 0;              // this rank's kept choices whose expert is elsewhere
  std::size_t rows_received = 0;          // rows this rank's experts took from other ranks
  // The rows' bytes this rank puts on the wire in one pass (forward; backward moves as many):
  // 4 d (rows_sent + rows_received), the model. And what the communicator counted
  // (Communicator::bytes_sent before and after): equal to it with the pairwise exchange, 0 with
  // the native one, whose bytes move inside the backend (the counts' all-gather is native too).
  std::uint64_t payload_bytes = 0;
  std::uint64_t bytes_sent_forward = 0;
  std::uint64_t bytes_sent_backward = 0;
  // Seconds this rank spent in each phase of the last forward and of the last backward, read
  // from the clock (and recorded as trace spans of the same names when a trace is on):
  //   route     forward: the router, its counts' all-gather, the plan; backward: the gates' and
  //             the router's gradients
  //   dispatch  rows (forward) or output gradients (backward) packed, exchanged, put at slots
  //   experts   this rank's experts on their rows
  //   combine   the experts' outputs (input gradients) exchanged back and summed per token
  // and, within dispatch and combine, the seconds inside the exchanges themselves: a rank whose
  // experts had fewer rows waits there for the busiest one.
  struct Phases {
    double route = 0, dispatch = 0, experts = 0, combine = 0, exchange = 0;
  };
  Phases forward_s, backward_s;
};

class ExpertParallelMoe {
 public:
  // Throws std::invalid_argument for a spec nn::MoeLayer refuses, for E < R, and for a
  // communicator whose memory is not host.
  ExpertParallelMoe(dp::Communicator& comm, nn::MoeSpec spec, std::uint64_t seed,
                    ExpertParallelOptions opts = {});

  const nn::MoeSpec& spec() const { return spec_; }
  std::size_t first_expert() const { return first_; }  // this rank's experts: [first, first + n)
  std::size_t local_experts() const { return local_; }
  bool owns(std::size_t expert) const { return expert >= first_ && expert < first_ + local_; }

  // The router (replicated) then this rank's experts, in one buffer; gradients laid out alike.
  std::span<float> parameters() { return params_; }
  std::span<float> gradients() { return grads_; }
  std::span<float> router_parameters();
  std::span<float> router_gradients();
  // Expert `expert` (a global index); std::out_of_range when another rank holds it.
  std::span<float> expert_parameters(std::size_t expert);
  std::span<float> expert_gradients(std::size_t expert);

  // x: this rank's T_r x d rows (borrowed until backward, as nn::MoeLayer's), y: T_r x d, not
  // overlapping x. Collective. std::invalid_argument when the batch is empty on every rank.
  const ExpertParallelStats& forward(const float* x, std::size_t tokens, float* y);
  // dy: T_r x d (the convention above). Overwrites gradients(): this rank's experts' whole-batch
  // gradients and this rank's share of the router's. dx, when not null, receives this rank's
  // rows of the input gradient (the rows travel back either way). Collective.
  void backward(const float* dy, float* dx);
  // Sums the router's gradient over the ranks, in place: then nn::MoeLayer's. Collective.
  void all_reduce_router_gradients();

  const ExpertParallelStats& stats() const { return stats_; }
  // Of the last forward, for this rank's tokens: probabilities (T_r x E) and routes (T_r x k),
  // slots counted in the whole batch's expert buffers; where this rank's rows start in the batch.
  std::span<const float> router_probabilities() const { return probs_; }
  std::span<const nn::MoeRoute> routes() const { return routes_; }
  std::size_t token_offset() const { return token_offset_; }

 private:
  dp::Communicator& comm_;
  nn::MoeSpec spec_;
  ExpertParallelOptions opts_;
  int rank_ = 0, ranks_ = 1;
  std::size_t first_ = 0, local_ = 0;
  std::vector<float> params_, grads_;
  ExpertParallelStats stats_;

  // The last forward. Counts are per rank, choice and expert: [s][c][e] at (s k + c) E + e.
  const float* x_ = nullptr;
  std::size_t tokens_ = 0, total_tokens_ = 0, token_offset_ = 0;
  std::vector<float> probs_;
  std::vector<nn::MoeRoute> routes_;
  std::vector<std::size_t> send_row_;   // per route: its row in the send buffer (when kept)
  std::vector<std::size_t> slot_row_;   // per received row: its row in the experts' buffer
  std::vector<std::size_t> row_begin_;  // local_ + 1: each local expert's first row there
  std::vector<std::size_t> send_counts_, recv_counts_;  // floats to and from each rank
  // Rows in the send layout (send_, ret_: the experts' outputs back), in the receive layout
  // (recv_, also the outputs on their way back), and in the experts' slot order (xin_ ...).
  std::vector<float> send_, recv_, ret_, xin_, hid_, yout_;
  // Backward's: the gates' and logits' gradients, the experts' rows, the input gradients back.
  std::vector<double> gate_grads_;
  std::vector<float> dlogits_, dyin_, dhid_, dxin_, dret_;

  void plan(std::span<const float> gathered);
  // Adds its seconds to `seconds`.
  void exchange(std::span<const float> send, std::span<const std::size_t> send_counts,
                std::span<float> recv, std::span<const std::size_t> recv_counts, double& seconds);
};

}  // namespace concurdl::mp
