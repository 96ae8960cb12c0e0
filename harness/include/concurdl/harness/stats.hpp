// Statistics of repeated measurements and the analytical scaling models drawn beside them.
// See docs/methodology.md for why each is computed the way it is.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace concurdl {

struct Summary {
  double median = 0, min = 0, max = 0, mean = 0, stdev = 0;  // stdev: sample (n-1)
  double ci95_lo = 0, ci95_hi = 0;  // 95% CI of the median (distribution-free, order statistics)
  std::size_t n = 0;
};

// Throws std::invalid_argument on an empty sample.
Summary summarize(std::span<const double> samples);

double median(std::vector<double> v);
// Student's t quantile for a two-sided 95% interval with `dof` degrees of freedom.
double t95(std::size_t dof);
// 95% CI of the mean (t interval); used in the docs' worked examples and tests.
void mean_ci95(std::span<const double> s, double& lo, double& hi);

// Mann–Whitney U test (two-sided, normal approximation with tie and continuity correction).
struct MannWhitney {
  double u = 0;  // U of the first sample
  double z = 0;
  double p_value = 1;  // two-sided
};
MannWhitney mann_whitney(std::span<const double> a, std::span<const double> b);

// Ratio of medians median(a)/median(b) with a 95% bootstrap percentile CI (fixed seed, so the
// same inputs always give the same interval).
struct Ratio {
  double value = 0, lo = 0, hi = 0;
};
Ratio ratio_of_medians(std::span<const double> a, std::span<const double> b, int resamples = 2000,
                       std::uint64_t seed = 0x5eed);

// Amdahl's law: S(p) = 1 / (f + (1-f)/p). Least-squares fit of the serial fraction f on the
// linear form 1/S - 1/p = f (1 - 1/p), clamped to [0, 1]. Points with p <= 1 carry no
// information and are ignored. Returns -1 when no point has p > 1.
double amdahl_fit(std::span<const double> workers, std::span<const double> speedup);
double amdahl_speedup(double serial_fraction, double p);
// Gustafson's law (weak scaling): S(p) = p - f (p - 1).
double gustafson_speedup(double serial_fraction, double p);
// Karp–Flatt experimentally determined serial fraction e = (1/S - 1/p) / (1 - 1/p).
double karp_flatt(double speedup, double p);

}  // namespace concurdl
