// Exercise 8.1 (chapter 08, exercises.md): the dependency-counting executor, on chapter 01's
// work-stealing pool. The reference is ParallelExecutor::run in src/executors.cpp: try first,
// read after.
// Check it:  concurdl exercise ch08 8.1     (tests, then a timing against the reference)
// or faster: ch08_tests --gtest_filter='ExecutorEx8_1/student.*'
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/df/executors.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/threads/stealing_pool.hpp"

namespace concurdl::df {

// Exercise 8.1: run every node of `g` on `pool`, independent nodes at once, and leave node v's
// value in values[v] (resize values to g.size(); a buffer already there may be reused).
//
//   - Refuse a graph that cannot run before anything runs: topological_order(g) throws a
//     GraphError naming a node on a cycle, or a missing input (calling it is allowed).
//   - Each node runs exactly once, and only after every one of its inputs has finished: keep,
//     per node, an atomic count of the inputs not yet computed (g.node(v).inputs.size() at the
//     start); g.consumers()[v] lists the nodes that read v (once per edge). The node whose
//     count your decrement takes to 0 is ready: post it (pool.post), or run it yourself.
//   - Compute a node with evaluate_into(g, v, inputs, values[v]), inputs being pointers to its
//     input nodes' values in the node's input order.
//   - An op may throw. Then no node that depends on it may start, nodes already running may
//     finish, and the exception must reach the caller: pool.wait_all() rethrows the first
//     exception a posted task threw. No hang: wait_all() returns once nothing is queued.
//   - Return only when every node has run (or the run failed): pool.wait_all().
//
// Think about: which memory order the decrement needs so that the node that runs next sees its
// inputs' values (each input's writer decremented after writing); why posting every ready
// consumer costs more on a chain than running one of them on the same thread; what a node
// whose inputs finish on two threads at once must not do (run twice).
inline void student_run_graph([[maybe_unused]] const Graph& g,
                              [[maybe_unused]] threads::StealingPool& pool,
                              [[maybe_unused]] std::vector<Tensor>& values) {
  CDL_TODO("8.1 dependency-counting executor");
}

// The student's function as an Executor with its own pool of `threads` (what the tests and the
// timing run; nothing to change here).
class StudentExecutor final : public Executor {
 public:
  explicit StudentExecutor(unsigned threads) : pool_(threads) {}
  std::string_view name() const override { return "student"; }
  const std::vector<Tensor>& run(const Graph& g) override {
    student_run_graph(g, pool_, values_);
    return values_;
  }

 private:
  threads::StealingPool pool_;
};

}  // namespace concurdl::df
