// Executors (executors.hpp).
#include "concurdl/df/executors.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>

#include "concurdl/core/trace.hpp"
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
  evaluate_into(g, n, in, values[n]);
}

}  // namespace

// The whole run as one span on the calling thread: a timeline's unit (`concurdl run --trace`
// draws the first run of a repetition), with the nodes this thread ran inside it.
constexpr const char* kRunSpan = "graph run";

const std::vector<Tensor>& SequentialExecutor::run(const Graph& g) {
  trace::Span span(kRunSpan, "run");
  const std::vector<NodeId> order = topological_order(g);
  values_.resize(g.size());
  for (const NodeId n : order) compute(g, n, values_);
  return values_;
}

const std::vector<Tensor>& ParallelExecutor::run(const Graph& g) {
  trace::Span span(kRunSpan, "run");
  topological_order(g);  // refuses a cycle or a missing input before anything runs
  const std::size_t n = g.size();
  values_.resize(n);
  std::vector<Tensor>& values = values_;
  const std::vector<std::vector<NodeId>> consumers = g.consumers();
  // Inputs not yet computed, per node. The task whose decrement takes a count to 0 posts that
  // node: acq_rel, so it sees every input's value written (each writer released its own
  // decrement) before the node reads them.
  const auto missing = std::make_unique<std::atomic<std::size_t>[]>(n);
  for (NodeId v = 0; v < n; ++v)
    missing[v].store(g.node(v).inputs.size(), std::memory_order_relaxed);
  std::atomic<bool> failed{false};
  // A task computes its node, then keeps one of the consumers it made ready for itself (the
  // next link of a chain runs on the same thread, its input still in this core's cache, with no
  // trip through the pool) and posts the others for idle threads to steal.
  std::function<void(NodeId)> task = [&](NodeId v) {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;  // an op threw: start nothing new
      try {
        compute(g, v, values);
      } catch (...) {
        failed.store(true, std::memory_order_relaxed);
        throw;  // kept by the pool, rethrown by wait_all(); v's consumers are never posted
      }
      constexpr NodeId kNone = static_cast<NodeId>(-1);
      NodeId next = kNone;
      for (const NodeId c : consumers[v]) {
        if (missing[c].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        if (next != kNone) pool_.post([&task, next] { task(next); });
        next = c;
      }
      if (next == kNone) return;
      v = next;
    }
  };
  for (NodeId v = 0; v < n; ++v)
    if (g.node(v).inputs.empty()) pool_.post([&task, v] { task(v); });
  pool_.wait_all();
  return values_;
}

// An arena of `threads`. Past the hardware's threads oneTBB caps its workers (at the hardware's
// count minus one, with a warning) unless a global_control raises the cap; only then is one
// held, since the lowest cap of all live global_controls wins (a cap of 1 held by a 1-thread
// executor would serialise every other).
struct TbbFlowExecutor::Arena {
  explicit Arena(int threads) : arena(threads) {
    if (threads > oneapi::tbb::info::default_concurrency())
      limit.emplace(oneapi::tbb::global_control::max_allowed_parallelism,
                    static_cast<std::size_t>(threads));
  }
  std::optional<oneapi::tbb::global_control> limit;
  oneapi::tbb::task_arena arena;
};

TbbFlowExecutor::TbbFlowExecutor(int threads) : arena_(std::make_unique<Arena>(threads)) {}
TbbFlowExecutor::~TbbFlowExecutor() = default;

const std::vector<Tensor>& TbbFlowExecutor::run(const Graph& g) {
  namespace flow = oneapi::tbb::flow;
  trace::Span span(kRunSpan, "run");
  topological_order(g);
  values_.resize(g.size());
  std::vector<Tensor>& values = values_;
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
  return values_;
}

namespace {

// A ParallelExecutor that owns its pool.
class OwningParallel final : public Executor {
 public:
  explicit OwningParallel(int threads) : pool_(static_cast<unsigned>(threads)), exec_(pool_) {}
  std::string_view name() const override { return exec_.name(); }
  const std::vector<Tensor>& run(const Graph& g) override { return exec_.run(g); }

 private:
  threads::StealingPool pool_;
  ParallelExecutor exec_;
};

template <class E>
std::unique_ptr<Executor> make(int threads) {
  if constexpr (std::is_constructible_v<E, int>)
    return std::make_unique<E>(threads);
  else
    return std::make_unique<E>();
}

constexpr ExecutorKind kExecutorRows[] = {
    {{"sequential", "one thread, the nodes in a topological order (Kahn's): the baseline"},
     &make<SequentialExecutor>,
     Threads::intra_op},
    {{"parallel",
      "per node an atomic count of inputs not yet computed; ready nodes run on chapter 01's "
      "work-stealing pool, a chain staying on one thread"},
     &make<OwningParallel>},
    {{"tbb_flow", "the same graph as a oneTBB flow graph, a continue_node per node: the peer"},
     &make<TbbFlowExecutor>},
};

}  // namespace

const VariantTable<ExecutorKind>& executor_kinds() {
  static constexpr VariantTable table{kExecutorRows, "executor"};
  return table;
}

std::unique_ptr<Executor> make_executor(std::string_view name, int threads) {
  const ExecutorKind* k = executor_kinds().lookup(name);
  return k == nullptr ? nullptr : k->make(threads);
}

}  // namespace concurdl::df
