// Executors: they run a recorded Graph and return every node's value (indexed by NodeId).
//
//   sequential   one thread, a topological order (Kahn's): the baseline, and what eager
//                execution does in the order the calls were made
//   parallel     inter-op parallelism as TensorFlow's executor and MXNet's engine do it: every
//                node has an atomic count of inputs not yet computed; a node whose count reaches
//                0 is ready; the task that computes a node decrements its consumers' counts,
//                runs one that reached 0 itself next (a chain stays on one thread) and posts
//                the others to chapter 01's work-stealing pool, whose idle threads steal them.
//                Independent nodes run at once; no node waits on a lock for its inputs.
//   tbb_flow     the same graph as a oneTBB flow graph (a continue_node per node, an edge per
//                input): the peer
//
// Every executor runs each node exactly once, after all of its inputs; a graph with a cycle
// (or a missing input) is refused with a GraphError naming a node on it, before anything runs.
// An op that throws stops the run: nodes that depend on it never start, nodes already running
// finish, and the first exception is rethrown to the caller (no executor hangs on it).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/df/graph.hpp"
#include "concurdl/threads/stealing_pool.hpp"

namespace concurdl::df {

// run() returns every node's value, in buffers the executor keeps for its next run (valid until
// then): a graph run again allocates nothing.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string_view name() const = 0;
  virtual const std::vector<Tensor>& run(const Graph& g) = 0;

 protected:
  std::vector<Tensor> values_;
};

class SequentialExecutor final : public Executor {
 public:
  std::string_view name() const override { return "sequential"; }
  const std::vector<Tensor>& run(const Graph& g) override;
};

class ParallelExecutor final : public Executor {
 public:
  // The pool's threads (its size, the caller included) run the graph's nodes; it may be shared
  // with other work, but one run at a time.
  explicit ParallelExecutor(threads::StealingPool& pool) : pool_(pool) {}
  std::string_view name() const override { return "parallel"; }
  const std::vector<Tensor>& run(const Graph& g) override;

 private:
  threads::StealingPool& pool_;
};

class TbbFlowExecutor final : public Executor {
 public:
  explicit TbbFlowExecutor(int threads);  // a task_arena of that many threads
  ~TbbFlowExecutor() override;
  std::string_view name() const override { return "tbb_flow"; }
  const std::vector<Tensor>& run(const Graph& g) override;

 private:
  struct Arena;
  std::unique_ptr<Arena> arena_;
};

// The executors, a row each (the experiments' `executor` axis, the tests, `concurdl list` and the
// README's table iterate over it): `make` builds one with `threads` threads, owning its pool.
// Adding an executor is its class and one row.
// Where an executor's threads go: to its own workers running nodes at once (inter-op), or, for
// one that runs a node at a time, to the kernels inside each node (intra-op).
enum class Threads { inter_op, intra_op };
struct ExecutorKind : VariantInfo {
  std::unique_ptr<Executor> (*make)(int threads) = nullptr;
  Threads threads = Threads::inter_op;
};
const VariantTable<ExecutorKind>& executor_kinds();

// The row named `name`'s executor; nullptr for another name.
std::unique_ptr<Executor> make_executor(std::string_view name, int threads);

}  // namespace concurdl::df
