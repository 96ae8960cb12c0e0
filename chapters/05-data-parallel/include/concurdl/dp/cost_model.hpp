// The α–β cost of an all-reduce: what each algorithm of algorithms.hpp should cost on p ranks,
// and how to read α and β back from measured times. Drawn as models (never as measurements)
// beside ch05/allreduce and ch05/allreduce_mpi, projected out to 1024 ranks.
//
// One message of n bytes between two ranks takes α + n·β: α the latency of a message (software
// overhead, a wake-up, the wire's round trip), β the time per byte (1 / bandwidth). An
// all-reduce of n bytes on p ranks then costs, per rank, on the critical path (Thakur,
// Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009):
//
//   v1_naive             2(p−1)·α + 2(p−1)·n·β        rank 0 receives p−1 vectors, sends p−1
//   v2_tree              2⌈log2 p⌉·(α + n·β)          binomial reduce, then broadcast
//   v3_halving_doubling  2·log2 p'·α + 2(p'−1)/p'·n·β  p' = the largest power of two ≤ p; p ≠ p'
//                        + 2·(α + n·β) if p ≠ p'       adds a fold in and a fold out
//   v4_ring              2(p−1)·α + 2(p−1)/p·n·β      reduce-scatter + all-gather, n/p per step
//
// The time the additions take (γ per byte) is left out, as the classic formulas do: on one
// machine it is not small (an add reads two floats and writes one), so the fitted β of a
// shared-memory run includes it. The ring and halving-doubling move the least data, 2(p−1)/p·n
// per rank, which tends to 2n: their time hardly grows with p when n is large, and that is why
// busbw = algbw · 2(p−1)/p is the figure to compare with a link's bandwidth.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <string_view>

namespace concurdl::dp {

// T = alpha_terms·α + byte_terms·n·β.
struct CostTerms {
  double alpha_terms = 0;
  double byte_terms = 0;
};

// The terms of one algorithm of kAllReduceVariants at p ranks; nullopt for "native" (and any
// other row whose algorithm is the library's own and not known here).
inline std::optional<CostTerms> allreduce_cost_terms(std::string_view algorithm, double p) {
  if (p < 2) return CostTerms{};
  if (algorithm == "v1_naive") return CostTerms{2 * (p - 1), 2 * (p - 1)};
  if (algorithm == "v2_tree") {
    const double rounds = std::ceil(std::log2(p));
    return CostTerms{2 * rounds, 2 * rounds};
  }
  if (algorithm == "v3_halving_doubling") {
    const double pp = std::exp2(std::floor(std::log2(p)));
    CostTerms t{2 * std::log2(pp), 2 * (pp - 1) / pp};
    if (pp != p) {
      t.alpha_terms += 2;
      t.byte_terms += 2;
    }
    return t;
  }
  if (algorithm == "v4_ring") return CostTerms{2 * (p - 1), 2 * (p - 1) / p};
  return std::nullopt;
}

// A link of the projection: its α and β.
struct Link {
  std::string_view name;
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};
// Two links beyond this machine, with their α stated (typical figures, not measured here):
// 25 GB/s with 2 µs per message (an InfiniBand HDR or NVLink-class fabric through MPI), and
// 100 Gb/s Ethernet (12.5 GB/s) with 20 µs per message (TCP through the kernel).
inline constexpr Link kLink25GBs{"25 GB/s, alpha 2 us", 2e-6, 1 / 25e9};
inline constexpr Link kLink100GbE{"100 Gb/s Ethernet, alpha 20 us", 20e-6, 1 / 12.5e9};

// A straight line time = a + b·bytes through measured points, by least squares on the
// relative error (weights 1/time²), so that the small sizes decide `a` and the large ones `b`
// instead of the largest size deciding both.
struct LineFit {
  double a = 0;  // seconds
  double b = 0;  // seconds per byte
  int points = 0;
};
inline std::optional<LineFit> fit_time_vs_bytes(std::span<const double> bytes,
                                                std::span<const double> seconds) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (std::size_t i = 0; i < bytes.size() && i < seconds.size(); ++i) {
    if (!(seconds[i] > 0)) continue;
    const double w = 1 / (seconds[i] * seconds[i]);
    sw += w;
    sx += w * bytes[i];
    sy += w * seconds[i];
    sxx += w * bytes[i] * bytes[i];
    sxy += w * bytes[i] * seconds[i];
    ++n;
  }
  const double det = sw * sxx - sx * sx;
  if (n < 2 || !(det > 0)) return std::nullopt;
  LineFit f;
  f.b = (sw * sxy - sx * sy) / det;
  f.a = (sy - f.b * sx) / sw;
  f.points = n;
  return f;
}

// The link's α and β that an algorithm's fit at p ranks implies: a = alpha_terms·α and
// b = byte_terms·β. nullopt where the algorithm has no formula or p < 2.
inline std::optional<Link> link_from_fit(std::string_view algorithm, double p, const LineFit& f) {
  const auto t = allreduce_cost_terms(algorithm, p);
  if (!t || t->alpha_terms <= 0 || t->byte_terms <= 0) return std::nullopt;
  return Link{"this machine (fitted)", std::max(0.0, f.a) / t->alpha_terms, f.b / t->byte_terms};
}

// The model's time for `bytes` on p ranks over `link`.
inline std::optional<double> allreduce_time(std::string_view algorithm, double p, double bytes,
                                            const Link& link) {
  const auto t = allreduce_cost_terms(algorithm, p);
  if (!t) return std::nullopt;
  return t->alpha_terms * link.alpha_s + t->byte_terms * bytes * link.beta_s_per_byte;
}

}  // namespace concurdl::dp
