// Chapter 08's exercises (exercises/exercises.md), graded by `concurdl exercise ch08 [8.1 8.2]`:
// the tests first, then the student's code timed against the chapter's own in one process,
// interleaved:
//   8.1 dependency-counting executor  one run of the wide graph (16 chains of 4 GEMM + scale +
//                                     ReLU layers on 64 x 64 matrices, summed) on a pool of
//                                     the exercise's threads: StudentExecutor vs
//                                     ParallelExecutor
//   8.2 fused element-wise kernel     a chain of 8 ops over 4M floats: student_apply_chain vs
//                                     apply_chain
// Every trial is checked after it runs (the graph's last value against the sequential
// executor's; every element of the chain against the ops one at a time): a wrong result is an
// invalid run, never a fast one.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/fusion.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/kernels/threads.hpp"
#include "exercises/student_executor.hpp"
#include "exercises/student_fused.hpp"
#include "experiment_graphs.hpp"

namespace concurdl::df {

namespace {

constexpr std::int64_t kMaxSide = 4096;
constexpr int kRepetitions = 31;

Trial executor_trial(Impl impl, const Params& p, GroupCache& cache) {
  const auto threads = static_cast<unsigned>(param_int(p, "threads"));
  const auto side = static_cast<std::size_t>(param_int(p, "side"));
  struct Shared {
    Graph graph;
    Tensor want;
  };
  auto shared = std::shared_ptr<Shared>(
      &cache.get<Shared>("graph",
                         [&] {
                           Shared s{make_graph("wide", side, 16, 4), {}};
                           kernels::ComputeThreadsScope one(1);
                           s.want = SequentialExecutor().run(s.graph).back();
                           return s;
                         }),
      [](Shared*) {});
  std::shared_ptr<Executor> exec;
  if (impl == Impl::student)
    exec = std::make_shared<StudentExecutor>(threads);
  else
    exec = make_executor("parallel", static_cast<int>(threads));
  auto last = std::make_shared<const Tensor*>(nullptr);
  Trial t;
  t.run = [exec, shared, last] {
    kernels::ComputeThreadsScope one(1);  // intra-op 1: the executor's threads are the parallelism
    *last = &exec->run(shared->graph).back();
  };
  t.check = [shared, last]() -> std::string {
    if (*last != nullptr && (*last)->data != shared->want.data)
      return "the graph's last value differs from the sequential executor's";
    return "";
  };
  t.work.items = static_cast<double>(shared->graph.size());
  return t;
}

Trial chain_trial(Impl impl, const Params& p, GroupCache& cache) {
  const auto k = static_cast<std::size_t>(param_int(p, "k"));
  const auto n = static_cast<std::size_t>(param_int(p, "n"));
  struct Arrays {
    std::vector<std::pair<Op, float>> chain;
    std::vector<float> x, want;
  };
  auto arr = std::shared_ptr<Arrays>(
      &cache.get<Arrays>(
          "arrays",
          [&] {
            static const std::pair<Op, float> cycle[] = {
                {Op::scale, 0.5f}, {Op::shift, 0.25f}, {Op::relu, 0.0f}, {Op::square, 0.0f}};
            Arrays a;
            for (std::size_t i = 0; i < k; ++i) a.chain.push_back(cycle[i % 4]);
            a.x = pseudo_random(1, n, 3).data;
            a.want = a.x;
            for (float& v : a.want)
              for (const auto& [op, alpha] : a.chain) apply_op(op, alpha, &v, &v, 1);
            return a;
          }),
      [](Arrays*) {});
  auto out = std::make_shared<std::vector<float>>(n, 0.0f);  // written once before timing
  Trial t;
  t.reset = [out] { std::memset(out->data(), 0xff, out->size() * sizeof(float)); };  // NaNs
  t.run = [arr, out, impl, n] {
    if (impl == Impl::student)
      student_apply_chain(arr->chain, arr->x.data(), out->data(), n);
    else
      apply_chain(arr->chain, arr->x.data(), out->data(), n);
  };
  t.check = [arr, out, n]() -> std::string {
    if (std::memcmp(out->data(), arr->want.data(), n * sizeof(float)) == 0) return "";
    for (std::size_t i = 0; i < n; ++i)
      if (std::memcmp(&(*out)[i], &arr->want[i], sizeof(float)) != 0)
        return fmt::format("element {} is {}, the ops one at a time give {}", i, (*out)[i],
                           arr->want[i]);
    return "";
  };
  t.work.items = static_cast<double>(n);
  t.work.bytes = 2.0 * static_cast<double>(n) * sizeof(float);  // one read, one write
  return t;
}

const bool registered = [] {
  register_exercise(
      {.id = "8.1",
       .chapter = "08-dataflow",
       .title = "the dependency-counting executor",
       .test_binary = "ch08_tests",
       .test_filter = "ExecutorEx8_1/student.*",
       .timing = exercise_timing(
           {.title = "one run of the wide graph (16 chains of 4 GEMM layers), student vs "
                     "ParallelExecutor",
            .axes = {{"side", {"64"}, {}, AxisKind::size, kMaxSide, {"8"}}},
            .repetitions = kRepetitions,
            .prepare = executor_trial}),
       .target = 1.3,
       .questions = {
           "Your executor ran the wide graph in {student} against ParallelExecutor's "
           "{reference} at {configuration} on {machine} ({cost}, 95% interval {cost_ci}). The "
           "graph has 16 independent chains of 12 nodes: what speedup over the sequential "
           "executor could {threads} threads give at best, and what does `concurdl run "
           "ch08/executors --threads 1,{threads}` measure for both (quote the speedups)?",
           "Which memory order does your decrement of a node's count use, and why is relaxed "
           "not enough? Describe the interleaving that would let a node read an input whose "
           "value is not yet visible to its thread.",
           "Does your executor post every node that becomes ready, or run one of them on the "
           "thread that made it ready? Measure both on the deep graph (one chain of 64 layers: "
           "`--set graph=deep`) and explain the difference with what a post costs "
           "(ch01/task_overhead) against what a 96 x 96 GEMM costs."}});

  register_exercise(
      {.id = "8.2",
       .chapter = "08-dataflow",
       .title = "a fused element-wise kernel",
       .test_binary = "ch08_tests",
       .test_filter = "FusedEx8_2/student.*",
       .timing = exercise_timing(
           {.title = "a chain of k element-wise ops in one pass, student "
                     "vs apply_chain",
            .threads_axis = "",
            .axes = {{"k", {"8"}, {}, AxisKind::count, 1024, {"2"}},
                     {"n", {"4M"}, {}, AxisKind::size, std::int64_t{1} << 28, {"64K"}}},
            .repetitions = kRepetitions,
            .prepare = chain_trial}),
       .target = 1.3,
       .questions = {
           "Your kernel ran the chain of 8 ops over 4M floats in {student} against "
           "apply_chain's {reference} ({cost}, 95% interval {cost_ci}) on {machine}. Divide "
           "the bytes it must move (one read and one write per float) by your time: what "
           "GB/s is that, against the machine's copy bandwidth (`concurdl run` calibrates "
           "it)? Is your kernel memory-bound?",
           "How many times does k passes of apply_op move the data, and what speedup does the "
           "bytes model give fusion at k = 8? Run `concurdl run ch08/fusion` and compare the "
           "measured speedup at k = 1, 2, 4, 8 and 16 with the model: where do they part, and "
           "why (count the instructions per element against the bytes per element)?",
           "XLA and TorchInductor fuse element-wise chains like this one automatically. Why can "
           "they not fuse a chain whose intermediate value another node also reads (see "
           "fuse_elementwise), and why is a GEMM not simply fused into the element-wise ops that "
           "follow it?"}});
  return true;
}();

}  // namespace

}  // namespace concurdl::df
