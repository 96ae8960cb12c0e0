// pipeline_step's body, for every kind of stage model (pipeline.cpp: nn::Mlp; three_d.cpp: a
// tensor-parallel stage). Internal to the chapter's library: not an installed header.
//
// A Model has layers(), spec() and nn::Mlp's forward_layers, backward_layers,
// backward_input_layers and backward_weight_layers over its Acts; Acts has output(),
// output_bytes() and pending_gradient_bytes().
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/memory.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/kernels/aligned.hpp"
#include "concurdl/mp/pipeline.hpp"

namespace concurdl::mp::detail {

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

inline void receive(dp::Communicator& comm, int src, std::span<float> buf, int tag, bool poll) {
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

inline void check_micro_batches(std::size_t m, std::size_t rows) {
  if (m < 1 || m > std::min(rows, kMaxMicroBatches))
    throw std::invalid_argument(
        fmt::format("pipeline: {} micro-batches of {} rows (need 1 <= m <= rows, at most {})", m,
                    rows, kMaxMicroBatches));
}

// The (micro-batch, chunk) pairs whose order has a W: their B is the input's gradient only.
inline std::vector<char> split_of(std::span<const PipeOp> order, std::size_t m, int chunks) {
  std::vector<char> split(m * static_cast<std::size_t>(chunks), 0);
  for (const PipeOp& op : order)
    if (op.kind == OpKind::weight)
      split[static_cast<std::size_t>(op.chunk) * m + static_cast<std::size_t>(op.micro)] = 1;
  return split;
}

template <class Model, class Acts>
PipelineStepResult run_pipeline_step(dp::Communicator& comm, Model& model,
                                     std::span<const std::size_t> boundaries, const float* x,
                                     const std::uint8_t* labels, std::size_t rows,
                                     std::size_t micro_batches, std::span<const PipeOp> order,
                                     BasicPipelineWorkspace<Acts>* workspace,
                                     const StepOptions& options) {
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
  const bool poll = options.poll && static_cast<unsigned>(p) <= std::thread::hardware_concurrency();
  const std::vector<char> split = split_of(order, m, v);

  // Every buffer of the step is counted in the step's own account (and, through it, in the
  // stage's, options.memory): the step's peaks are read from it, not from the schedule.
  MemoryAccount step_memory(options.memory);
  const auto counted = [&](MemoryKind k) { return kernels::LineAllocator<float>(&step_memory, k); };
  BasicPipelineWorkspace<Acts> local;
  BasicPipelineWorkspace<Acts>& ws = workspace != nullptr ? *workspace : local;
  const std::size_t slots = m * static_cast<std::size_t>(v);
  ws.clear();
  // Whatever happens, the step's buffers are gone before its account is.
  struct ClearOnExit {
    BasicPipelineWorkspace<Acts>& ws;
    ~ClearOnExit() { ws.clear(); }
  } clear_on_exit{ws};
  for (std::size_t k = 0; k < slots; ++k) {
    ws.acts.emplace_back(&step_memory);
    ws.inputs.emplace_back(counted(MemoryKind::activations));  // kept for backward
    ws.outputs.emplace_back(counted(MemoryKind::communication));
    ws.grads_in.emplace_back(counted(MemoryKind::communication));
    ws.grads_out.emplace_back(counted(MemoryKind::communication));
  }
  for (int c = 0; c < v; ++c) ws.recompute.emplace_back(&step_memory);
  // A send's buffer is freed once the send has completed (checked before every operation).
  struct Send {
    dp::Request request;
    kernels::LineVector<float>* buffer;
  };
  std::vector<Send> sends;
  // What backward no longer needs goes as soon as it is done with (unless keep_buffers: the
  // deliberately leaky variant holds every micro-batch's buffers to the step's end).
  const auto drop = [keep = options.keep_buffers](auto& buffer) {
    if (keep) return;
    if constexpr (requires { buffer.release(); })
      buffer.release();
    else
      kernels::release(buffer);
  };
  const auto reap_sends = [&] {
    for (Send& send : sends)
      if (send.buffer != nullptr && send.request.test()) {
        drop(*send.buffer);
        send.buffer = nullptr;
      }
  };
  PipelineStepResult result;
  // Per chunk: backward (or W) passes done, so the first overwrites the gradients.
  std::vector<std::size_t> grads_done(static_cast<std::size_t>(v), 0);
  std::size_t live = 0;
  const bool recompute = options.recompute;
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
    reap_sends();
    Acts& a =
        recompute && split[key] == 0 ? ws.recompute[static_cast<std::size_t>(c)] : ws.acts[key];
    if (op.kind == OpKind::forward) {
      if (!first_piece) {
        ws.inputs[key].resize(mb.count * in_w);
        receive(comm, prev, ws.inputs[key], tag(i, c, false), poll);
      }
      Acts& fa = recompute ? ws.recompute[static_cast<std::size_t>(c)] : ws.acts[key];
      compute("forward", op, [&] { model.forward_layers(first, last, input(), mb.count, fa); });
      result.peak_activations = std::max(result.peak_activations, ++live);
      if (!last_piece) {
        ws.outputs[key].assign(fa.output(), fa.output() + mb.count * out_w);
        sends.push_back(
            {comm.isend(next, ws.outputs[key], tag(i, next_chunk, false)), &ws.outputs[key]});
      }
      if (recompute) drop(fa);  // only the input stays until the backward recomputes the rest
    } else if (op.kind == OpKind::backward) {
      kernels::LineVector<float>& dout = ws.grads_out[key];
      dout.resize(mb.count * out_w);
      if (!last_piece) receive(comm, next, dout, tag(i, c, true), poll);
      if (!first_piece) ws.grads_in[key].resize(mb.count * in_w);
      float* din = first_piece ? nullptr : ws.grads_in[key].data();
      if (recompute) {  // the forward again, from the input kept: the same bits as the first time
        compute("recompute", op, [&] { model.forward_layers(first, last, input(), mb.count, a); });
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
      drop(dout);
      if (split[key] == 0) {  // done with this micro-batch (a split one waits for its W)
        --live;
        drop(a);
        drop(ws.inputs[key]);
      }
      if (!first_piece)
        sends.push_back(
            {comm.isend(prev, ws.grads_in[key], tag(i, prev_chunk, true)), &ws.grads_in[key]});
    } else {  // W: the weights' gradient, from what the B kept
      compute("weight", op, [&] {
        model.backward_weight_layers(first, last, a,
                                     /*accumulate=*/grads_done[static_cast<std::size_t>(c)]++ > 0);
      });
      --live;
      drop(a);
      drop(ws.inputs[key]);
    }
  }
  for (Send& send : sends) send.request.wait();
  reap_sends();
  const MemoryBytes peak = step_memory.peak();
  result.peak_memory = peak;
  result.peak_bytes = step_memory.peak_total();
  result.peak_activation_bytes = peak[MemoryKind::activations];
  result.busy_seconds = std::chrono::duration<double>(busy).count();
  result.step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  return result;
}

}  // namespace concurdl::mp::detail
