// The α–β cost of an all-reduce: what each algorithm of algorithms.hpp should cost on p ranks,
// and how to read α and β back from measured times. Drawn as models (never as measurements)
// beside ch05/allreduce and ch05/allreduce_mpi, projected out to 1024 ranks; and the step time
// of data-parallel training that follows, beside ch05/dp_train.
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
// shared-memory run includes it. The ring and halving-doubling move the least data any all-reduce
// can when the ranks add on their own (no reduction in the network, as SHARP does), 2(p−1)/p·n
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

// A straight line time = a + b·bytes through measured times, from which α and β are read.
// One line cannot follow every size on one machine: a vector that stays in the caches is
// reduced faster per byte than one that goes to DRAM (the threads ring at 2 ranks reached
// 44 GB/s of busbw at 4 MiB, 9 GB/s at 64 MiB). So each term is taken from the regime it
// describes: `a` from the smallest size (latency), `b` from the largest (bandwidth, and the
// size the projections draw): the line through the smallest and the largest point, exact at
// both. The alternatives missed what the chapter draws: least squares weighted by relative
// error (1/time², this fit before) let the cache-resident middle sizes set `b`, and the model
// came out 5x below the measured 64 MiB ring; unweighted least squares lets the largest size
// set both terms and `a` comes out negative. The price is the middle sizes, which run faster
// than the line (up to 5x on the threads backend): the README says so beside the chart.
// Several times at one size (merged runs) are averaged. nullopt with fewer than two sizes, or
// where the largest size is not the slowest (no bandwidth term to read).
struct LineFit {
  double a = 0;  // seconds
  double b = 0;  // seconds per byte
  int points = 0;
};
inline std::optional<LineFit> fit_time_vs_bytes(std::span<const double> bytes,
                                                std::span<const double> seconds) {
  // The mean time at the smallest and at the largest size seen so far.
  struct End {
    double bytes = 0, sum = 0;
    int n = 0;
    void see(double b, double t, bool further) {
      if (further) *this = End{b, 0, 0};
      if (b == bytes) {
        sum += t;
        ++n;
      }
    }
  } lo, hi;
  int n = 0;
  for (std::size_t i = 0; i < bytes.size() && i < seconds.size(); ++i) {
    if (!(seconds[i] > 0) || !(bytes[i] >= 0)) continue;
    lo.see(bytes[i], seconds[i], n == 0 || bytes[i] < lo.bytes);
    hi.see(bytes[i], seconds[i], n == 0 || bytes[i] > hi.bytes);
    ++n;
  }
  if (n < 2 || !(hi.bytes > lo.bytes)) return std::nullopt;
  const double lo_t = lo.sum / lo.n, hi_t = hi.sum / hi.n;
  LineFit f;
  f.b = (hi_t - lo_t) / (hi.bytes - lo.bytes);
  if (!(f.b > 0)) return std::nullopt;
  f.a = lo_t - f.b * lo.bytes;
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

// The hierarchical all-reduce (algorithms.hpp) of `bytes` on H hosts of k ranks: a ring
// reduce-scatter and a ring all-gather inside each host, (k - 1) α + (k - 1)/k · n β each on the
// host's link, and a ring all-reduce of a rank's n/k bytes across the hosts, 2(H - 1) α +
// 2(H - 1)/H · n/k β on the link between them. `sharing`: how many of a host's ranks cross
// through one link at once, so each gets 1/sharing of its bandwidth: 1 where every rank has a
// link of its own (GPUs with a NIC each), k where the host has one (a simulated host of
// scripts/cluster, a machine with one NIC). With sharing = k the bytes across a host's link are
// 2(H - 1)/H · bytes, where a flat ring over all Hk ranks puts 2(Hk - 1)/(Hk) · bytes on it:
// the hierarchy saves (k - 1)/(Hk - 1) of them, a third at H = k = 2, towards none as H grows,
// not a factor k. What it keeps saving is steps, 2(k - 1) + 2(H - 1) against 2(Hk - 1).
inline double hierarchical_allreduce_time(double k, double hosts, double bytes, const Link& local,
                                          const Link& cross, double sharing = 1) {
  const double inside =
      k > 1 ? 2 * ((k - 1) * local.alpha_s + (k - 1) / k * bytes * local.beta_s_per_byte) : 0.0;
  const Link shared{cross.name, cross.alpha_s, cross.beta_s_per_byte * std::max(1.0, sharing)};
  const double between =
      hosts > 1 ? allreduce_time("v4_ring", hosts, bytes / k, shared).value_or(0) : 0.0;
  return inside + between;
}

// One data-parallel step on p workers with a fixed batch per worker (weak scaling): each
// worker computes for `compute_s` (what one worker alone takes per step: forward, backward,
// the optimiser step), and the gradient, `gradient_bytes`, is all-reduced by the ring over
// `link`. After backward (no overlap) the two add; perfectly overlapped, the step takes the
// longer of the two, a bound no real step reaches (the first layer's gradient is ready last,
// and nothing hides the forward pass). The model leaves out everything else that grows with
// p: stragglers, a shared switch, the data pipeline.
inline double dp_step_time(double compute_s, double p, double gradient_bytes, const Link& link,
                           bool overlap) {
  const double comm = allreduce_time("v4_ring", p, gradient_bytes, link).value_or(0);
  return overlap ? std::max(compute_s, comm) : compute_s + comm;
}

}  // namespace concurdl::dp
