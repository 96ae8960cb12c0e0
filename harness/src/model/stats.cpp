// Statistics of repeated measurements: summaries with a distribution-free CI of the median, the
// Mann–Whitney U test, a bootstrap CI for a ratio of medians, and the Amdahl / Gustafson /
// Karp–Flatt scaling models. Timings are skewed and few, hence medians and rank methods.
#include "concurdl/harness/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace concurdl {

namespace {

void require_nonempty(std::span<const double> s, const char* what) {
  if (s.empty()) throw std::invalid_argument(std::string(what) + ": empty sample");
}

// The ranks (1-based) of the order statistics [X(j), X(n+1-j)] that form the symmetric 95% CI
// of the median: the largest j with P(j <= K <= n-j) >= 0.95, K ~ Binomial(n, 1/2), i.e.
// P(K <= j-1) <= 0.025. Returns 0 when even j = 1 falls short.
std::size_t median_ci_rank(std::size_t n) {
  // Walk the binomial pmf in log space: 0.5^n underflows for n > 1074.
  const double dn = static_cast<double>(n);
  double log_pmf = -dn * std::log(2.0);
  double cdf = 0;
  std::size_t j = 0;
  for (std::size_t k = 0; 2 * k < n; ++k) {
    cdf += std::exp(log_pmf);
    if (cdf > 0.025) break;
    j = k + 1;
    const double dk = static_cast<double>(k);
    log_pmf += std::log((dn - dk) / (dk + 1));
  }
  return j;
}

// Reorders `v`. nth_element, not sort: the bootstrap takes thousands of medians.
double median_in_place(std::vector<double>& v) {
  const std::size_t mid = v.size() / 2;
  const auto mid_it = v.begin() + static_cast<std::ptrdiff_t>(mid);
  std::nth_element(v.begin(), mid_it, v.end());
  const double upper = *mid_it;
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), mid_it);
  return lower + (upper - lower) / 2;
}

// Linear interpolation between closest ranks (numpy's default), q in [0, 1]; `v` sorted.
double percentile_sorted(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  if (i + 1 >= v.size()) return v.back();
  const double frac = pos - static_cast<double>(i);
  return v[i] + frac * (v[i + 1] - v[i]);
}

// Median of a bootstrap resample drawn into `buf`. Indices come from the raw 64-bit generator
// modulo n rather than std::uniform_int_distribution, whose algorithm differs between standard
// libraries; the modulo bias is below n / 2^64.
double resampled_median(std::span<const double> s, std::mt19937_64& rng, std::vector<double>& buf) {
  buf.resize(s.size());
  for (double& x : buf) x = s[rng() % s.size()];
  return median_in_place(buf);
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("median: empty sample");
  return median_in_place(v);
}

Summary summarize(std::span<const double> samples) {
  require_nonempty(samples, "summarize");
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();

  Summary s;
  s.n = n;
  s.min = v.front();
  s.max = v.back();
  s.median = n % 2 == 1 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);
  if (n > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stdev = std::sqrt(ss / static_cast<double>(n - 1));
  }

  // With n <= 5 even [min, max] covers the median with only 1 - 2 * 0.5^n (93.75% at n = 5);
  // we report [min, max] anyway, the widest interval the data can give.
  const std::size_t j = median_ci_rank(n);
  if (j == 0) {
    s.ci95_lo = s.min;
    s.ci95_hi = s.max;
  } else {
    s.ci95_lo = v[j - 1];
    s.ci95_hi = v[n - j];
  }
  return s;
}

double t95(std::size_t dof) {
  // Exact quantiles t(0.975, dof) for small dof, where no short expansion is accurate.
  static constexpr double kTable[] = {
      12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851,
      2.364624252,  2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830,
      2.160368656,  2.144786688, 2.131449546, 2.119905299, 2.109815578, 2.100922040,
      2.093024054,  2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
      2.059538553,  2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456};
  constexpr std::size_t kTableSize = sizeof(kTable) / sizeof(kTable[0]);
  // No interval exists without a degree of freedom.
  if (dof == 0) return std::numeric_limits<double>::infinity();
  if (dof <= kTableSize) return kTable[dof - 1];
  // Cornish–Fisher expansion about the normal quantile; error < 3e-8 for dof > 30.
  const double z = 1.959963984540054;
  const double z2 = z * z;
  const double g1 = z * (z2 + 1) / 4;
  const double g2 = z * ((5 * z2 + 16) * z2 + 3) / 96;
  const double g3 = z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / 384;
  const double g4 = z * ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) / 92160;
  const double x = 1.0 / static_cast<double>(dof);
  return z + x * (g1 + x * (g2 + x * (g3 + x * g4)));
}

void mean_ci95(std::span<const double> s, double& lo, double& hi) {
  require_nonempty(s, "mean_ci95");
  const Summary sum = summarize(s);
  // One sample has no spread to estimate; give the degenerate interval, as summarize() does.
  if (sum.n == 1) {
    lo = hi = sum.mean;
    return;
  }
  const double half = t95(sum.n - 1) * sum.stdev / std::sqrt(static_cast<double>(sum.n));
  lo = sum.mean - half;
  hi = sum.mean + half;
}

MannWhitney mann_whitney(std::span<const double> a, std::span<const double> b) {
  require_nonempty(a, "mann_whitney");
  require_nonempty(b, "mann_whitney");
  const std::size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;

  // Pool, sort, and give tied values the average of the ranks they span.
  std::vector<std::pair<double, bool>> pooled;  // value, from a
  pooled.reserve(n);
  for (double x : a) pooled.emplace_back(x, true);
  for (double x : b) pooled.emplace_back(x, false);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& l, const auto& r) { return l.first < r.first; });
  double rank_sum_a = 0, tie_term = 0;  // tie_term: sum of t^3 - t over groups of ties
  for (std::size_t i = 0; i < n;) {
    std::size_t e = i + 1;
    while (e < n && pooled[e].first == pooled[i].first) ++e;
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(e)) / 2;
    for (std::size_t k = i; k < e; ++k)
      if (pooled[k].second) rank_sum_a += avg_rank;
    const double t = static_cast<double>(e - i);
    tie_term += t * t * t - t;
    i = e;
  }

  const double d1 = static_cast<double>(n1), d2 = static_cast<double>(n2);
  const double dn = static_cast<double>(n);
  MannWhitney r;
  r.u = rank_sum_a - d1 * (d1 + 1) / 2;
  const double mu = d1 * d2 / 2;
  const double var = n > 1 ? d1 * d2 / 12 * ((dn + 1) - tie_term / (dn * (dn - 1))) : 0;
  // Every value tied (both samples constant and equal): nothing distinguishes them.
  if (!(var > 0)) {
    r.z = 0;
    r.p_value = 1;
    return r;
  }
  // Continuity correction: move |U - mu| half a unit toward 0, never past it.
  const double diff = r.u - mu;
  const double corrected = std::max(std::abs(diff) - 0.5, 0.0);
  r.z = std::copysign(corrected, diff) / std::sqrt(var);
  r.p_value = std::min(1.0, std::erfc(std::abs(r.z) / std::sqrt(2.0)));
  return r;
}

Ratio ratio_of_medians(std::span<const double> a, std::span<const double> b, int resamples,
                       std::uint64_t seed) {
  require_nonempty(a, "ratio_of_medians");
  require_nonempty(b, "ratio_of_medians");
  if (resamples < 1) throw std::invalid_argument("ratio_of_medians: resamples must be >= 1");
  Ratio r;
  r.value = median({a.begin(), a.end()}) / median({b.begin(), b.end()});

  // Each sample is resampled on its own: the two runs are independent measurements.
  std::mt19937_64 rng(seed);
  std::vector<double> ratios(static_cast<std::size_t>(resamples));
  std::vector<double> buf;
  for (double& x : ratios) {
    const double ma = resampled_median(a, rng, buf);
    const double mb = resampled_median(b, rng, buf);
    x = ma / mb;
  }
  // 0/0 (a metric whose resampled medians are both zero, e.g. a count of wrong elements) has no
  // ratio; NaN must not reach std::sort. Infinities order correctly and stay.
  std::erase_if(ratios, [](double x) { return std::isnan(x); });
  if (ratios.empty()) {
    r.lo = r.hi = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  std::sort(ratios.begin(), ratios.end());
  r.lo = percentile_sorted(ratios, 0.025);
  r.hi = percentile_sorted(ratios, 0.975);
  return r;
}

double amdahl_fit(std::span<const double> workers, std::span<const double> speedup) {
  if (workers.size() != speedup.size())
    throw std::invalid_argument("amdahl_fit: workers and speedup differ in length");
  // Least squares through the origin for y = f x, x = 1 - 1/p, y = 1/S - 1/p. A non-positive
  // or non-finite speedup is a broken measurement and is skipped like p <= 1.
  double sxy = 0, sxx = 0;
  bool any = false;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const double p = workers[i], s = speedup[i];
    if (!(p > 1) || !std::isfinite(p) || !(s > 0) || !std::isfinite(s)) continue;
    const double x = 1 - 1 / p;
    const double y = 1 / s - 1 / p;
    sxy += x * y;
    sxx += x * x;
    any = true;
  }
  if (!any) return -1;
  return std::clamp(sxy / sxx, 0.0, 1.0);
}

double amdahl_speedup(double serial_fraction, double p) {
  return 1 / (serial_fraction + (1 - serial_fraction) / p);
}

double gustafson_speedup(double serial_fraction, double p) { return p - serial_fraction * (p - 1); }

double karp_flatt(double speedup, double p) {
  // One worker says nothing about the serial fraction (0 / 0).
  if (!(p > 1)) return std::numeric_limits<double>::quiet_NaN();
  return (1 / speedup - 1 / p) / (1 - 1 / p);
}

}  // namespace concurdl
