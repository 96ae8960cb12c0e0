// Pipeline schedules (pipeline.hpp).
#include "concurdl/mp/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "concurdl/core/trace.hpp"
#include "concurdl/dp/algorithms.hpp"

namespace concurdl::mp {

namespace {
constexpr int kGradTag = 16384;  // backward messages: kGradTag + chunk x m + micro-batch
constexpr std::size_t kMaxMicroBatches = 16384;

// A receive that polls while each stage has a hardware thread of its own, as MPI's and NCCL's
// progress loops do: a stage's wait for its neighbour is on the pipeline's critical path, and
// waking a sleeping thread costs tens of microseconds on a virtual machine (one per message
// received: 2m of them per stage and step, on the 2(m + p - 1) slots of the critical path). The
// poll gives up after kPollLimit and sleeps (a neighbour that failed, or a long wait, is then the
// blocking receive's business); oversubscribed stages always sleep, so as not to keep the stage
// they wait for off its core.
constexpr auto kPollLimit = std::chrono::milliseconds(20);

void receive(dp::Communicator& comm, int src, std::span<float> buf, int tag, bool poll) {
  if (!poll) {
    comm.recv(src, buf, tag);
    return;
  }
  dp::Request r = comm.irecv(src, buf, tag);
  const auto deadline = std::chrono::steady_clock::now() + kPollLimit;
  for (int i = 0;; ++i) {
    if (r.test()) return;
    if ((i & 255) == 255 && std::chrono::steady_clock::now() >= deadline) break;
#if defined(__x86_64__) || defined(__i386__)
    for (int k = 0; k < 16; ++k) __builtin_ia32_pause();
#endif
  }
  r.wait();
}

void check_micro_batches(std::size_t m, std::size_t rows) {
  if (m < 1 || m > std::min(rows, kMaxMicroBatches))
    throw std::invalid_argument(
        fmt::format("pipeline: {} micro-batches of {} rows (need 1 <= m <= rows, at most {})", m,
                    rows, kMaxMicroBatches));
}
}  // namespace

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
  if (chunks < 1 || (chunks > 1 && s != Schedule::interleaved))
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

namespace {
// The (micro-batch, chunk) pairs whose order has a W: their B is the input's gradient only.
std::vector<char> split_of(std::span<const PipeOp> order, std::size_t m, int chunks) {
  std::vector<char> split(m * static_cast<std::size_t>(chunks), 0);
  for (const PipeOp& op : order)
    if (op.kind == OpKind::weight)
      split[static_cast<std::size_t>(op.chunk) * m + static_cast<std::size_t>(op.micro)] = 1;
  return split;
}
}  // namespace

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
  using Clock = std::chrono::steady_clock;
  const auto step_start = Clock::now();
  trace::Span step_span("step", "step");
  const int p = comm.size(), s = comm.rank();
  const std::size_t pieces = boundaries.size() - 1;
  if (boundaries.size() < 2 || pieces % static_cast<std::size_t>(p) != 0 ||
      boundaries.back() != model.layers())
    throw std::invalid_argument(
        "pipeline: the boundaries do not cut the model into comm.size() stages (times chunks)");
  const int v = static_cast<int>(pieces / static_cast<std::size_t>(p));
  check_micro_batches(micro_batches, rows);
  const std::size_t m = micro_batches;
  if (m * static_cast<std::size_t>(v) > kMaxMicroBatches)
    throw std::invalid_argument(fmt::format(
        "pipeline: {} micro-batches x {} chunks (at most {} in all)", m, v, kMaxMicroBatches));
  check_order(order, m, v);
  const auto& widths = model.spec().widths;
  const std::size_t classes = widths.back();
  // Chunk c of this stage: piece c p + s, layers [first_of(c), last_of(c)).
  const auto piece = [&](int c) { return static_cast<std::size_t>(c * p + s); };
  const auto first_of = [&](int c) { return boundaries[piece(c)]; };
  const auto last_of = [&](int c) { return boundaries[piece(c) + 1]; };
  const bool poll = static_cast<unsigned>(p) <= std::thread::hardware_concurrency();
  const std::vector<char> split = split_of(order, m, v);

  PipelineWorkspace local;
  PipelineWorkspace& ws = workspace != nullptr ? *workspace : local;
  const std::size_t slots = m * static_cast<std::size_t>(v);
  for (auto* b : {&ws.inputs, &ws.outputs, &ws.grads_in, &ws.grads_out})
    if (b->size() < slots) b->resize(slots);
  if (ws.acts.size() < slots) ws.acts.resize(slots);
  if (ws.recompute.size() < static_cast<std::size_t>(v))
    ws.recompute.resize(static_cast<std::size_t>(v));
  std::vector<dp::Request> sends;
  PipelineStepResult result;
  // Per chunk: backward (or W) passes done, so the first overwrites the gradients.
  std::vector<std::size_t> grads_done(static_cast<std::size_t>(v), 0);
  std::size_t live = 0;
  // Bytes held for backward now (see PipelineStepResult::peak_activation_bytes).
  std::size_t held_bytes = 0;
  const bool recompute = options.recompute;
  const auto held = [&](std::size_t transient) {
    result.peak_activation_bytes = std::max(result.peak_activation_bytes, held_bytes + transient);
  };
  Clock::duration busy{};
  // Compute is timed (and traced) apart from the waits for a neighbour around it.
  const auto compute = [&](const char* kind, const PipeOp& op, const auto& work) {
    std::string name;
    if (trace::recording()) {
      name = op_name(op);
      if (kind[0] == 'r') name[0] = 'R';
    }
    trace::Span span(name, kind);
    const auto t0 = Clock::now();
    work();
    busy += Clock::now() - t0;
  };
  // Message tags: the receiving (micro-batch, chunk) pair's, forward and backward apart.
  const auto tag = [&](int i, int c, bool grad) {
    return (grad ? kGradTag : 0) + c * static_cast<int>(m) + i;
  };

  for (const PipeOp& op : order) {
    const int i = op.micro, c = op.chunk;
    const std::size_t key = static_cast<std::size_t>(c) * m + static_cast<std::size_t>(i);
    const dp::Block mb = dp::block_of(rows, static_cast<int>(m), i);
    const std::size_t first = first_of(c), last = last_of(c);
    const std::size_t in_w = widths[first], out_w = widths[last];
    const bool first_piece = piece(c) == 0, last_piece = piece(c) == pieces - 1;
    // Where this chunk's input comes from and its output goes: the neighbouring stage, or,
    // across the ends of the stages, stage p - 1's previous chunk and stage 0's next one.
    const int prev = s > 0 ? s - 1 : p - 1, next = s < p - 1 ? s + 1 : 0;
    const int prev_chunk = s > 0 ? c : c - 1, next_chunk = s < p - 1 ? c : c + 1;
    // Only the first piece reads x: another stage's x is null, and null + offset is UB. (Read
    // after the receive below has sized the buffer.)
    const auto input = [&]() -> const float* {
      return first_piece ? x + mb.offset * widths[0] : ws.inputs[key].data();
    };
    const std::size_t in_bytes = first_piece ? 0 : mb.count * in_w * sizeof(float);
    nn::Activations& a =
        recompute && split[key] == 0 ? ws.recompute[static_cast<std::size_t>(c)] : ws.acts[key];
    if (op.kind == OpKind::forward) {
      if (!first_piece) {
        ws.inputs[key].resize(mb.count * in_w);
        receive(comm, prev, ws.inputs[key], tag(i, c, false), poll);
        held_bytes += in_bytes;
      }
      nn::Activations& fa = recompute ? ws.recompute[static_cast<std::size_t>(c)] : ws.acts[key];
      compute("forward", op, [&] { model.forward_layers(first, last, input(), mb.count, fa); });
      result.peak_activations = std::max(result.peak_activations, ++live);
      if (!recompute) held_bytes += fa.output_bytes();
      held(recompute ? fa.output_bytes() : 0);
      if (!last_piece) {
        ws.outputs[key].assign(fa.output(), fa.output() + mb.count * out_w);
        sends.push_back(comm.isend(next, ws.outputs[key], tag(i, next_chunk, false)));
      }
    } else if (op.kind == OpKind::backward) {
      std::vector<float>& dout = ws.grads_out[key];
      dout.resize(mb.count * out_w);
      if (!last_piece) receive(comm, next, dout, tag(i, c, true), poll);
      if (!first_piece) ws.grads_in[key].resize(mb.count * in_w);
      float* din = first_piece ? nullptr : ws.grads_in[key].data();
      if (recompute) {  // the forward again, from the input kept: the same bits as the first time
        compute("recompute", op, [&] { model.forward_layers(first, last, input(), mb.count, a); });
        if (split[key] != 0) held_bytes += a.output_bytes();
      }
      compute("backward", op, [&] {
        if (last_piece) {
          const nn::LossResult l = nn::softmax_xent_loss(a.output(), labels + mb.offset, mb.count,
                                                         classes, dout.data(), rows);
          result.loss_sum += l.loss * static_cast<double>(mb.count);
          result.correct += l.correct;
        }
        if (split[key] != 0) {
          model.backward_input_layers(first, last, a, dout.data(), din);
        } else {
          model.backward_layers(first, last, a, dout.data(), din,
                                /*accumulate=*/grads_done[static_cast<std::size_t>(c)]++ > 0);
        }
      });
      if (split[key] != 0) {
        held_bytes += a.pending_gradient_bytes();
        held(0);
      } else {
        held(recompute ? a.output_bytes() : 0);
        --live;
        if (!recompute) held_bytes -= a.output_bytes();
        held_bytes -= in_bytes;
      }
      if (!first_piece)
        sends.push_back(comm.isend(prev, ws.grads_in[key], tag(i, prev_chunk, true)));
    } else {  // W: the weights' gradient, from what the B kept
      const std::size_t pending = a.pending_gradient_bytes();
      compute("weight", op, [&] {
        model.backward_weight_layers(first, last, a,
                                     /*accumulate=*/grads_done[static_cast<std::size_t>(c)]++ > 0);
      });
      --live;
      held_bytes -= pending + a.output_bytes() + in_bytes;
    }
  }
  dp::wait_all(sends);
  result.busy_seconds = std::chrono::duration<double>(busy).count();
  result.step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  return result;
}

}  // namespace concurdl::mp
