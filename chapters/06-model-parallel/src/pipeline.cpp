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
constexpr int kGradTag = 16384;  // backward messages: kGradTag + micro-batch
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

std::vector<int> stage_order(Schedule s, int stage, int stages, std::size_t m) {
  const int n = static_cast<int>(m);
  std::vector<int> order;
  const auto f = [&](int i) { order.push_back(1 + i); };
  const auto b = [&](int i) { order.push_back(-1 - i); };
  switch (s) {
    case Schedule::naive:
      for (int i = 0; i < n; ++i) f(i), b(i);
      break;
    case Schedule::gpipe:
      for (int i = 0; i < n; ++i) f(i);
      for (int i = n; i-- > 0;) b(i);
      break;
    case Schedule::one_f_one_b: {
      const int warm = std::min(stages - stage - 1, n);
      int next_f = 0, next_b = 0;
      for (; next_f < warm; ++next_f) f(next_f);
      while (next_f < n) {
        f(next_f++);
        b(next_b++);
      }
      while (next_b < n) b(next_b++);
      break;
    }
  }
  return order;
}

std::size_t activation_bytes_model(const nn::MlpSpec& spec, std::span<const std::size_t> boundaries,
                                   int stage, std::size_t rows, std::size_t live, bool recompute) {
  const auto s = static_cast<std::size_t>(stage);
  std::size_t outputs = 0;
  for (std::size_t l = boundaries[s]; l < boundaries[s + 1]; ++l) outputs += spec.widths[l + 1];
  const std::size_t input = stage == 0 ? 0 : spec.widths[boundaries[s]];
  const std::size_t floats = recompute ? live * input + outputs : live * (outputs + input);
  return floats * rows * sizeof(float);
}

void check_order(std::span<const int> order, std::size_t m) {
  // 0: neither run yet, 1: forward run, 2: backward run too.
  std::vector<int> state(m, 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int op = order[k];
    const int i = op > 0 ? op - 1 : -op - 1;
    if (op == 0 || static_cast<std::size_t>(i) >= m)
      throw std::invalid_argument(fmt::format(
          "pipeline order: operation {} is {}, not F or B of a micro-batch 0..{}", k, op, m - 1));
    int& st = state[static_cast<std::size_t>(i)];
    if (op > 0 && st != 0)
      throw std::invalid_argument(
          fmt::format("pipeline order: operation {} runs micro-batch {}'s forward again", k, i));
    if (op < 0 && st != 1)
      throw std::invalid_argument(
          fmt::format("pipeline order: operation {} runs micro-batch {}'s backward {}", k, i,
                      st == 0 ? "before its forward" : "again"));
    st = op > 0 ? 1 : 2;
  }
  for (std::size_t i = 0; i < m; ++i)
    if (state[i] != 2)
      throw std::invalid_argument(fmt::format("pipeline order: micro-batch {} has no {}", i,
                                              state[i] == 0 ? "forward" : "backward"));
}

PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, Schedule schedule,
                                 PipelineWorkspace* workspace, const StepOptions& options) {
  check_micro_batches(micro_batches, rows);
  const std::vector<int> order = stage_order(schedule, comm.rank(), comm.size(), micro_batches);
  return pipeline_step(comm, model, boundaries, x, labels, rows, micro_batches,
                       std::span<const int>(order), workspace, options);
}

PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, std::span<const int> order,
                                 PipelineWorkspace* workspace, const StepOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto step_start = Clock::now();
  trace::Span step_span("step", "step");
  const int p = comm.size(), s = comm.rank();
  if (boundaries.size() != static_cast<std::size_t>(p) + 1 || boundaries.back() != model.layers())
    throw std::invalid_argument(
        "pipeline: the boundaries do not cut the model into comm.size() stages");
  check_micro_batches(micro_batches, rows);
  const std::size_t first = boundaries[static_cast<std::size_t>(s)];
  const std::size_t last = boundaries[static_cast<std::size_t>(s) + 1];
  const auto& widths = model.spec().widths;
  const std::size_t in_w = widths[first], out_w = widths[last], classes = widths.back();
  const bool first_stage = s == 0, last_stage = s == p - 1;
  const int m = static_cast<int>(micro_batches);
  check_order(order, micro_batches);
  const bool poll = static_cast<unsigned>(p) <= std::thread::hardware_concurrency();

  PipelineWorkspace local;
  PipelineWorkspace& ws = workspace != nullptr ? *workspace : local;
  for (auto* v : {&ws.inputs, &ws.outputs, &ws.grads_in, &ws.grads_out})
    if (v->size() < micro_batches) v->resize(micro_batches);
  if (ws.acts.size() < micro_batches) ws.acts.resize(micro_batches);
  auto& acts = ws.acts;
  auto& inputs = ws.inputs;
  auto& outputs = ws.outputs;
  auto& grads_in = ws.grads_in;
  auto& grads_out = ws.grads_out;
  std::vector<dp::Request> sends;
  PipelineStepResult result;
  std::size_t live = 0, backwards_done = 0;
  // Bytes held for backward now: the live micro-batches' layer outputs (without recompute) and
  // the inputs received for them (every stage but the first); with recompute, one micro-batch's
  // outputs at most.
  std::size_t acts_bytes = 0, inputs_bytes = 0;
  const bool recompute = options.recompute;
  const auto held = [&] {
    const std::size_t now = inputs_bytes + (recompute ? ws.recompute.output_bytes() : acts_bytes);
    result.peak_activation_bytes = std::max(result.peak_activation_bytes, now);
  };
  Clock::duration busy{};
  // Compute is timed (and traced) apart from the waits for a neighbour around it.
  const auto compute = [&](const char* kind, int i, const auto& work) {
    const std::string name =
        trace::recording()
            ? fmt::format("{}{}", kind[0] == 'f' ? 'F' : (kind[0] == 'r' ? 'R' : 'B'), i)
            : std::string();
    trace::Span span(name, kind);
    const auto t0 = Clock::now();
    work();
    busy += Clock::now() - t0;
  };
  // Micro-batch i's input: the caller's x on the first stage, else what the stage received.
  const auto input_of = [&](std::size_t iu, const dp::Block& mb) -> const float* {
    return first_stage ? x + mb.offset * widths[0] : inputs[iu].data();
  };

  for (const int op : order) {
    const int i = op > 0 ? op - 1 : -op - 1;
    const auto iu = static_cast<std::size_t>(i);
    const dp::Block mb = dp::block_of(rows, m, i);
    if (op > 0) {  // forward of micro-batch i
      // Only the first stage holds the input: another's x is null, and null + offset is UB.
      if (!first_stage) {
        inputs[iu].resize(mb.count * in_w);
        receive(comm, s - 1, inputs[iu], i, poll);
        inputs_bytes += mb.count * in_w * sizeof(float);
      }
      nn::Activations& a = recompute ? ws.recompute : acts[iu];
      compute("forward", i,
              [&] { model.forward_layers(first, last, input_of(iu, mb), mb.count, a); });
      result.peak_activations = std::max(result.peak_activations, ++live);
      if (!recompute) acts_bytes += a.output_bytes();
      held();
      if (!last_stage) {
        outputs[iu].assign(a.output(), a.output() + mb.count * out_w);
        sends.push_back(comm.isend(s + 1, outputs[iu], i));
      }
    } else {  // backward of micro-batch i
      const float* dout = nullptr;
      grads_out[iu].resize(mb.count * out_w);
      if (!last_stage) receive(comm, s + 1, grads_out[iu], kGradTag + i, poll);
      dout = grads_out[iu].data();
      if (!first_stage) grads_in[iu].resize(mb.count * in_w);
      nn::Activations& a = recompute ? ws.recompute : acts[iu];
      if (recompute) {  // the forward again, from the input kept: the same bits as the first time
        compute("recompute", i,
                [&] { model.forward_layers(first, last, input_of(iu, mb), mb.count, a); });
        held();
      }
      compute("backward", i, [&] {
        if (last_stage) {
          const nn::LossResult l = nn::softmax_xent_loss(a.output(), labels + mb.offset, mb.count,
                                                         classes, grads_out[iu].data(), rows);
          result.loss_sum += l.loss * static_cast<double>(mb.count);
          result.correct += l.correct;
        }
        model.backward_layers(first, last, a, dout, first_stage ? nullptr : grads_in[iu].data(),
                              /*accumulate=*/backwards_done > 0);
      });
      ++backwards_done;
      --live;
      if (!recompute) acts_bytes -= a.output_bytes();
      if (!first_stage) inputs_bytes -= mb.count * in_w * sizeof(float);
      if (!first_stage) sends.push_back(comm.isend(s - 1, grads_in[iu], kGradTag + i));
    }
  }
  dp::wait_all(sends);
  result.busy_seconds = std::chrono::duration<double>(busy).count();
  result.step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  return result;
}

}  // namespace concurdl::mp
