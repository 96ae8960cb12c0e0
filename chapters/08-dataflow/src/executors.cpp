// Executors (executors.hpp).
#include "concurdl/df/executors.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <exception>

#include "concurdl/harness/trace.hpp"
#include "concurdl/threads/stealing_pool.hpp"

namespace concurdl::df {

namespace {

// Node n's value from the values computed so far, as a timeline span.
void compute(const Graph& g, NodeId n, std::vector<Tensor>& values) {
  const Node& node = g.node(n);
  trace::Span span(trace::recording() ? node.name : std::string(), op_name(node.op));
  std::vector<const Tensor*> in;
  in.reserve(node.inputs.size());
  for (const NodeId i : node.inputs) in.push_back(&values[i]);
  values[n] = evaluate(g, n, in);
}

}  // namespace

std::vector<Tensor> SequentialExecutor::run(const Graph& g) {
  std::vector<Tensor> values(g.size());
  for (const NodeId n : topological_order(g)) compute(g, n, values);
  return values;
}

std::vector<Tensor> ParallelExecutor::run(const Graph& g) {
  topological_order(g);  // refuses a cycle or a missing input before anything runs
  const std::size_t n = g.size();
  std::vector<Tensor> values(n);
  const std::vector<std::vector<NodeId>> consumers = g.consumers();
  // Inputs not yet computed, per node. The task whose decrement takes a count to 0 posts that
  // node: acq_rel, so it sees every input's value written (each writer released its own
  // decrement) before the node reads them.
  const auto missing = std::make_unique<std::atomic<std::size_t>[]>(n);
  for (NodeId v = 0; v < n; ++v) missing[v].store(g.node(v).inputs.size(), std::memory_order_relaxed);
  std::atomic<bool> failed{false};
  std::function<void(NodeId)> task = [&](NodeId v) {
    if (failed.load(std::memory_order_relaxed)) return;  // an op threw: start nothing new
    try {
      compute(g, v, values);
    } catch (...) {
      failed.store(true, std::memory_order_relaxed);
      throw;  // kept by the pool, rethrown by wait_all(); v's consumers are never posted
    }
    for (const NodeId c : consumers[v])
      if (missing[c].fetch_sub(1, std::memory_order_acq_rel) == 1) pool_.post([&task, c] { task(c); });
  };
  for (NodeId v = 0; v < n; ++v)
    if (g.node(v).inputs.empty()) pool_.post([&task, v] { task(v); });
  pool_.wait_all();
  return values;
}

struct TbbFlowExecutor::Arena {
  explicit Arena(int threads) : arena(threads) {}
  oneapi::tbb::task_arena arena;
};

TbbFlowExecutor::TbbFlowExecutor(int threads) : arena_(std::make_unique<Arena>(threads)) {}
TbbFlowExecutor::~TbbFlowExecutor() = default;

std::vector<Tensor> TbbFlowExecutor::run(const Graph& g) {
  namespace flow = oneapi::tbb::flow;
  topological_order(g);
  std::vector<Tensor> values(g.size());
  arena_->arena.execute([&] {
    flow::graph fg;
    flow::broadcast_node<flow::continue_msg> start(fg);
    std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
    nodes.reserve(g.size());
    for (NodeId v = 0; v < g.size(); ++v)
      nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
          fg, [&g, &values, v](const flow::continue_msg&) { compute(g, v, values); }));
    for (NodeId v = 0; v < g.size(); ++v) {
      if (g.node(v).inputs.empty()) flow::make_edge(start, *nodes[v]);
      for (const NodeId i : g.node(v).inputs) flow::make_edge(*nodes[i], *nodes[v]);
    }
    start.try_put(flow::continue_msg());
    fg.wait_for_all();  // rethrows what a body threw, after cancelling the rest
  });
  return values;
}

namespace {

// A ParallelExecutor that owns its pool.
class OwningParallel final : public Executor {
 public:
  explicit OwningParallel(int threads)
      : pool_(static_cast<unsigned>(threads)), exec_(pool_) {}
  std::string_view name() const override { return exec_.name(); }
  std::vector<Tensor> run(const Graph& g) override { return exec_.run(g); }

 private:
  threads::StealingPool pool_;
  ParallelExecutor exec_;
};

}  // namespace

std::unique_ptr<Executor> make_executor(std::string_view name, int threads) {
  if (name == "sequential") return std::make_unique<SequentialExecutor>();
  if (name == "parallel") return std::make_unique<OwningParallel>(threads);
  if (name == "tbb_flow") return std::make_unique<TbbFlowExecutor>(threads);
  return nullptr;
}

}  // namespace concurdl::df
