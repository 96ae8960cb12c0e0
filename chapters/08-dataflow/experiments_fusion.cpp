// ch08/fusion: a chain of k element-wise ops over n floats as k passes vs one fused pass
// (fusion.hpp's rows), on preallocated arrays, with the bytes each moves declared: GB/s, and the
// fused speedup beside the bytes model's k. Each result is checked after timing against the
// chain applied one element at a time.
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/df/fusion.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/harness/experiment.hpp"
#include "experiment_graphs.hpp"

namespace concurdl::df {

namespace {

// ---- ch08/fusion ------------------------------------------------------------------------------

// The chain: k ops cycling through scale, shift, relu, square (values stay in [0, 1.5]).
std::vector<std::pair<Op, float>> chain_of(std::size_t k) {
  static const std::pair<Op, float> cycle[] = {
      {Op::scale, 0.5f}, {Op::shift, 0.25f}, {Op::relu, 0.0f}, {Op::square, 0.0f}};
  std::vector<std::pair<Op, float>> c;
  for (std::size_t i = 0; i < k; ++i) c.push_back(cycle[i % 4]);
  return c;
}

Trial fusion_trial(const Params& p, GroupCache& cache) {
  const ChainRun& how = kChainRuns.find(p);
  const auto k = static_cast<std::size_t>(param_int(p, "k"));
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  struct Arrays {
    std::vector<float> x, a, b, want;
  };
  auto arr = std::shared_ptr<Arrays>(
      &cache.get<Arrays>("arrays",
                         [&] {
                           Arrays s;
                           s.x = pseudo_random(1, n, 3).data;
                           s.a.assign(n, 0.0f);
                           s.b.assign(n, 0.0f);
                           s.want.resize(n);
                           for (std::size_t i = 0; i < n;
                                ++i) {  // one element at a time: the plain definition
                             float v = s.x[i];
                             for (const auto& [op, alpha] : chain_of(k))
                               apply_op(op, alpha, &v, &v, 1);
                             s.want[i] = v;
                           }
                           return s;
                         }),
      [](Arrays*) {});
  const auto chain = chain_of(k);
  auto result = std::make_shared<const float*>(nullptr);
  Trial t;
  t.run = [arr, chain, n, run = how.run, result] {
    *result = run(chain, arr->x.data(), arr->a.data(), arr->b.data(), n);
  };
  t.check = [arr, result, n]() -> std::string {
    if (*result == nullptr) return "";
    for (std::size_t i = 0; i < n; ++i)
      if ((*result)[i] != arr->want[i])
        return fmt::format("element {} is {}, the chain's definition gives {}", i, (*result)[i],
                           arr->want[i]);
    return "";
  };
  const auto passes = static_cast<double>(how.passes(k));
  t.work.items = static_cast<double>(n);
  t.work.bytes = passes * 2.0 * static_cast<double>(n) * sizeof(float);
  return t;
}

const bool registered_fusion = register_experiment({
    .id = "ch08/fusion",
    .chapter = "08-dataflow",
    .title = "Fusion: a chain of k element-wise ops as k passes over memory vs one fused pass",
    .axes = {kChainRuns.axis("ch08/fusion"),
             {.name = "k",
              .values = {"1", "2", "4", "8", "16"},
              .kind = AxisKind::count,
              .max = 1024,
              .smoke = {"2"}},
             {.name = "n",
              .values = {"16M"},
              .quick = {"8M"},
              .kind = AxisKind::size,
              .max = std::int64_t{1} << 28,
              .smoke = {"64K"}}},
    .baseline = {{"variant", "unfused"}},
    .interleave = {"variant"},
    .repetitions = 9,
    .warmup = 1,
    .prepare = fusion_trial,
    .figures = {{.id = "speedup",
                 .title = "Fused over unfused against chain length, beside the bytes model (k)",
                 .x = "k",
                 .y = "speedup",
                 .series = "variant",
                 .where = {{"variant", "fused"}},
                 .log_x = true,
                 .log_y = true,
                 .y_label = "speedup of the fused pass (log)",
                 .x_label = "ops in the chain k (log)",
                 .models = {{.label = "bytes model: k passes vs 1 (memory-bound)",
                             .y = [](const ModelPoint& pt) -> std::optional<double> {
                               return pt.x;
                             }}}},
                {.id = "bandwidth",
                 .title = "Bytes moved per second against chain length",
                 .x = "k",
                 .y = "bytes_per_s",
                 .series = "variant",
                 .log_x = true,
                 .y_label = "bytes/s (declared traffic / time)",
                 .x_label = "ops in the chain k (log)"}},
    .claims = {{.id = "fusion_k8_near_bytes_model",
                // A magnitude: the bytes model holds only while the floats miss the last-level
                // cache (12.1x on Zen 5, above it).
                .statement = "How many times as fast fusing a chain of 8 element-wise ops over "
                             "millions of floats runs as 8 separate passes (the bytes model says "
                             "8x while the data miss the last-level cache)",
                .select = {{"variant", "fused"}, {"k", "8"}},
                .versus = {{"variant", "unfused"}},
                .kind = Claim::Kind::magnitude,
                .causes = {ClaimCause::caches, ClaimCause::memory_bandwidth},
                .unit = "×"}},
});

}  // namespace

}  // namespace concurdl::df
