// Pipeline schedules (pipeline.hpp).
#include "concurdl/mp/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "concurdl/core/trace.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "pipeline_step.hpp"

namespace concurdl::mp {

using detail::check_micro_batches;
using detail::kMaxMicroBatches;
using detail::split_of;

const ScheduleRow& schedule_row(Schedule s) {
  for (const ScheduleRow& r : kSchedules)
    if (r.schedule == s) return r;
  throw std::logic_error("a schedule without its row in kScheduleRows");
}

std::string_view schedule_name(Schedule s) { return schedule_row(s).name; }

std::vector<std::size_t> stage_boundaries(std::size_t layers, int stages) {
  if (stages < 1 || static_cast<std::size_t>(stages) > layers)
    throw std::invalid_argument(fmt::format(
        "pipeline: {} stages for {} layers (need 1 <= stages <= layers)", stages, layers));
  std::vector<std::size_t> b = {0};
  for (int s = 0; s < stages; ++s) b.push_back(b.back() + dp::block_of(layers, stages, s).count);
  return b;
}

std::string op_name(const PipeOp& op) {
  const char k = op.kind == OpKind::forward ? 'F' : (op.kind == OpKind::backward ? 'B' : 'W');
  return op.chunk == 0 ? fmt::format("{}{}", k, op.micro)
                       : fmt::format("{}{}.{}", k, op.micro, op.chunk);
}

std::vector<PipeOp> stage_order(Schedule s, int stage, int stages, std::size_t m, int chunks) {
  if (stages < 1 || stage < 0 || stage >= stages)
    throw std::invalid_argument(
        fmt::format("pipeline: stage {} of {} (need 0 <= stage < stages)", stage, stages));
  if (chunks < 1 || (chunks > 1 && schedule_row(s).chunking != Chunking::v_chunks))
    throw std::invalid_argument(
        fmt::format("pipeline: {} chunks a stage under {} (more than one only for interleaved)",
                    chunks, schedule_name(s)));
  const int n = static_cast<int>(m);
  std::vector<PipeOp> order;
  const auto f = [&](int i, int c = 0) { order.push_back({OpKind::forward, i, c}); };
  const auto b = [&](int i, int c = 0) { order.push_back({OpKind::backward, i, c}); };
  const auto w = [&](int i) { order.push_back({OpKind::weight, i, 0}); };
  if (s == Schedule::interleaved && chunks == 1) s = Schedule::one_f_one_b;
  switch (s) {
    case Schedule::naive:
      for (int i = 0; i < n; ++i) f(i), b(i);
      break;
    case Schedule::gpipe:
      for (int i = 0; i < n; ++i) f(i);
      for (int i = n; i-- > 0;) b(i);
      break;
    case Schedule::one_f_one_b:
    case Schedule::zb_h1: {
      // ZB-H1 is 1F1B's order of F and B with W_i after B_(i+stage): stage s's warm-up of
      // p - s - 1 forwards and its s deferred W's keep p micro-batches in flight on every stage.
      const bool zb = s == Schedule::zb_h1;
      const int warm = std::min(stages - stage - 1, n);
      int next_f = 0, next_b = 0, next_w = 0;
      const auto backward = [&] {
        b(next_b++);
        if (zb && next_b - 1 >= stage) w(next_w++);
      };
      for (; next_f < warm; ++next_f) f(next_f);
      while (next_f < n) {
        f(next_f++);
        backward();
      }
      while (next_b < n) backward();
      while (zb && next_w < n) w(next_w++);
      break;
    }
    case Schedule::interleaved: {
      // Megatron-LM's order: micro-batches in groups of p, each group through chunk 0, then
      // chunk 1, ... forward, and back through the chunks in reverse; a warm-up of
      // 2(p - s - 1) + (v - 1) p forwards, then one forward and one backward in turn. With m
      // not a multiple of p (a short last batch) that warm-up can deadlock: every forward
      // first then (GPipe over the chunks), which any m meets.
      std::vector<PipeOp> fw, bw;
      for (int g = 0; g < n; g += stages) {
        const int end = std::min(g + stages, n);
        for (int c = 0; c < chunks; ++c)
          for (int i = g; i < end; ++i) fw.push_back({OpKind::forward, i, c});
        for (int c = chunks; c-- > 0;)
          for (int i = g; i < end; ++i) bw.push_back({OpKind::backward, i, c});
      }
      const std::size_t total = fw.size();
      const std::size_t warm =
          n % stages != 0
              ? total
              : std::min<std::size_t>(total, static_cast<std::size_t>(2 * (stages - stage - 1) +
                                                                      (chunks - 1) * stages));
      std::size_t next_f = 0, next_b = 0;
      for (; next_f < warm; ++next_f) order.push_back(fw[next_f]);
      while (next_f < total) {
        order.push_back(fw[next_f++]);
        order.push_back(bw[next_b++]);
      }
      while (next_b < total) order.push_back(bw[next_b++]);
      break;
    }
  }
  return order;
}

std::vector<PipeOp> ops_from_codes(std::span<const int> codes) {
  std::vector<PipeOp> ops;
  ops.reserve(codes.size());
  for (std::size_t k = 0; k < codes.size(); ++k) {
    const int c = codes[k];
    if (c == 0)
      throw std::invalid_argument(
          fmt::format("pipeline order: operation {} is 0, not F (+1 + i) or B (-1 - i)", k));
    ops.push_back(c > 0 ? PipeOp{OpKind::forward, c - 1, 0} : PipeOp{OpKind::backward, -c - 1, 0});
  }
  return ops;
}

std::vector<int> codes_of(std::span<const PipeOp> ops) {
  std::vector<int> codes;
  codes.reserve(ops.size());
  for (const PipeOp& op : ops) {
    if (op.kind == OpKind::weight || op.chunk != 0)
      throw std::invalid_argument(fmt::format(
          "pipeline order: {} has no code (codes are F and B of chunk 0)", op_name(op)));
    codes.push_back(op.kind == OpKind::forward ? 1 + op.micro : -1 - op.micro);
  }
  return codes;
}

ScheduleTimeline schedule_timeline(std::span<const std::vector<PipeOp>> orders, int chunks) {
  const int p = static_cast<int>(orders.size());
  ScheduleTimeline t;
  if (p == 0) return t;
  const auto v = static_cast<std::size_t>(chunks);
  std::size_t m = 0;
  for (const auto& o : orders)
    for (const PipeOp& op : o) m = std::max(m, static_cast<std::size_t>(op.micro) + 1);
  // done[kind][stage][chunk x m + i]: when that operation finished (< 0: not yet).
  const auto slots_of = [&](std::size_t n) {
    return std::vector<std::vector<double>>(static_cast<std::size_t>(p),
                                            std::vector<double>(n, -1));
  };
  auto fdone = slots_of(m * v), bdone = slots_of(m * v);
  std::vector<std::vector<char>> split;
  for (const auto& o : orders) split.push_back(split_of(o, m, chunks));
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0), busy(static_cast<std::size_t>(p), 0);
  const double slot = 1.0 / static_cast<double>(chunks);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      const auto su = static_cast<std::size_t>(s);
      while (next[su] < orders[su].size()) {
        const PipeOp& op = orders[su][next[su]];
        const std::size_t key =
            static_cast<std::size_t>(op.chunk) * m + static_cast<std::size_t>(op.micro);
        double ready = 0;  // when its input arrives (< 0: not yet)
        if (op.kind == OpKind::forward) {
          if (s > 0)
            ready = fdone[su - 1][key];
          else if (op.chunk > 0)
            ready = fdone[static_cast<std::size_t>(p - 1)][key - m];
        } else if (op.kind == OpKind::backward) {
          if (s < p - 1)
            ready = bdone[su + 1][key];
          else if (op.chunk + 1 < chunks)
            ready = bdone[0][key + m];
        }
        if (ready < 0) break;
        const double cost = op.kind == OpKind::backward && split[su][key] == 0 ? 2 * slot : slot;
        free_at[su] = std::max(free_at[su], ready) + cost;
        busy[su] += cost;
        if (op.kind == OpKind::forward) fdone[su][key] = free_at[su];
        if (op.kind == OpKind::backward) bdone[su][key] = free_at[su];
        ++next[su];
        progress = true;
      }
    }
  }
  double computed = 0;
  for (int s = 0; s < p; ++s) {
    const auto su = static_cast<std::size_t>(s);
    if (next[su] < orders[su].size()) t.deadlocked = true;
    t.slots = std::max(t.slots, free_at[su]);
    computed += busy[su];
  }
  t.bubble = t.slots > 0 ? 1 - computed / (p * t.slots) : 0;
  return t;
}

ActivationModel activation_model(const nn::MlpSpec& spec, std::span<const std::size_t> boundaries,
                                 int stage, int stages, std::span<const PipeOp> order,
                                 std::size_t rows, bool recompute) {
  const std::size_t pieces = boundaries.size() - 1;
  const int chunks = static_cast<int>(pieces / static_cast<std::size_t>(stages));
  std::size_t m = 0;
  for (const PipeOp& op : order) m = std::max(m, static_cast<std::size_t>(op.micro) + 1);
  const std::vector<char> split = split_of(order, m, chunks);
  // Floats of a chunk's outputs, and of its input (none on piece 0).
  const auto piece = [&](int c) { return static_cast<std::size_t>(c * stages + stage); };
  const auto outputs = [&](int c) {
    std::size_t f = 0;
    for (std::size_t l = boundaries[piece(c)]; l < boundaries[piece(c) + 1]; ++l)
      f += spec.widths[l + 1];
    return f * rows * sizeof(float);
  };
  const auto input = [&](int c) {
    return piece(c) == 0 ? 0 : spec.widths[boundaries[piece(c)]] * rows * sizeof(float);
  };
  ActivationModel model;
  std::size_t held = 0, live = 0;
  for (const PipeOp& op : order) {
    const std::size_t key =
        static_cast<std::size_t>(op.chunk) * m + static_cast<std::size_t>(op.micro);
    const bool split_here = split[key] != 0;
    const std::size_t out = outputs(op.chunk), in = input(op.chunk);
    std::size_t transient = 0;
    if (op.kind == OpKind::forward) {
      held += in + (recompute ? 0 : out);
      model.peak_in_flight = std::max(model.peak_in_flight, ++live);
      if (recompute) transient = out;
    } else if (op.kind == OpKind::backward) {
      if (recompute && split_here) held += out;       // recomputed, kept to the W
      if (recompute && !split_here) transient = out;  // recomputed for this B alone
      if (split_here) held += out;                    // the output gradients, to the W
    }
    model.peak_bytes = std::max(model.peak_bytes, held + transient);
    const bool ends = op.kind == OpKind::weight || (op.kind == OpKind::backward && !split_here);
    if (ends) {
      held -= in + (recompute && !split_here ? 0 : out) + (split_here ? out : 0);
      --live;
    }
  }
  return model;
}

namespace {
void check_ops(std::span<const PipeOp> order, std::size_t m, int chunks) {
  // 0: nothing run yet, 1: F run, 2: B run too, 3: W run too.
  std::vector<int> state(m * static_cast<std::size_t>(chunks), 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const PipeOp& op = order[k];
    if (op.micro < 0 || static_cast<std::size_t>(op.micro) >= m || op.chunk < 0 ||
        op.chunk >= chunks)
      throw std::invalid_argument(fmt::format(
          "pipeline order: operation {} is {}, not of a micro-batch 0..{} and a chunk 0..{}", k,
          op_name(op), m - 1, chunks - 1));
    int& st = state[static_cast<std::size_t>(op.chunk) * m + static_cast<std::size_t>(op.micro)];
    const int want = op.kind == OpKind::forward ? 0 : (op.kind == OpKind::backward ? 1 : 2);
    if (st != want)
      throw std::invalid_argument(
          fmt::format("pipeline order: operation {} runs {} {}", k, op_name(op),
                      st > want ? "again" : (want == 1 ? "before its F" : "before its B")));
    st = want + 1;
  }
  for (std::size_t k = 0; k < state.size(); ++k)
    if (state[k] < 2) {
      const PipeOp op{state[k] == 0 ? OpKind::forward : OpKind::backward, static_cast<int>(k % m),
                      static_cast<int>(k / m)};
      throw std::invalid_argument(fmt::format("pipeline order: {} never runs", op_name(op)));
    }
}
}  // namespace

void check_order(std::span<const PipeOp> order, std::size_t m, int chunks) {
  if (chunks < 1) throw std::invalid_argument("pipeline order: fewer than one chunk a stage");
  check_ops(order, m, chunks);
}

void check_order(std::span<const int> codes, std::size_t m) {
  const std::vector<PipeOp> ops = ops_from_codes(codes);
  check_ops(ops, m, 1);
}

PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, Schedule schedule,
                                 PipelineWorkspace* workspace, const StepOptions& options) {
  check_micro_batches(micro_batches, rows);
  const int p = comm.size();
  const int chunks = static_cast<int>((boundaries.size() - 1) / static_cast<std::size_t>(p));
  const std::vector<PipeOp> order =
      stage_order(schedule, comm.rank(), p, micro_batches, std::max(chunks, 1));
  return pipeline_step(comm, model, boundaries, x, labels, rows, micro_batches,
                       std::span<const PipeOp>(order), workspace, options);
}

PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, std::span<const int> codes,
                                 PipelineWorkspace* workspace, const StepOptions& options) {
  const std::vector<PipeOp> ops = ops_from_codes(codes);
  return pipeline_step(comm, model, boundaries, x, labels, rows, micro_batches,
                       std::span<const PipeOp>(ops), workspace, options);
}

PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, std::span<const PipeOp> order,
                                 PipelineWorkspace* workspace, const StepOptions& options) {
  return detail::run_pipeline_step(comm, model, boundaries, x, labels, rows, micro_batches, order,
                                   workspace, options);
}

}  // namespace concurdl::mp
