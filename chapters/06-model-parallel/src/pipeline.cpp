// Pipeline schedules (pipeline.hpp).
#include "concurdl/mp/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "concurdl/dp/algorithms.hpp"

namespace concurdl::mp {

namespace {
constexpr int kGradTag = 16384;  // backward messages: kGradTag + micro-batch
constexpr std::size_t kMaxMicroBatches = 16384;
}  // namespace

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::naive:
      return "naive";
    case Schedule::gpipe:
      return "gpipe";
    case Schedule::one_f_one_b:
      return "1f1b";
  }
  return "?";
}

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

PipelineStepResult pipeline_step(dp::Communicator& comm, nn::Mlp& model,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, Schedule schedule) {
  const int p = comm.size(), s = comm.rank();
  if (boundaries.size() != static_cast<std::size_t>(p) + 1 || boundaries.back() != model.layers())
    throw std::invalid_argument(
        "pipeline: the boundaries do not cut the model into comm.size() stages");
  if (micro_batches < 1 || micro_batches > std::min(rows, kMaxMicroBatches))
    throw std::invalid_argument(
        fmt::format("pipeline: {} micro-batches of {} rows (need 1 <= m <= rows, at most {})",
                    micro_batches, rows, kMaxMicroBatches));
  const std::size_t first = boundaries[static_cast<std::size_t>(s)];
  const std::size_t last = boundaries[static_cast<std::size_t>(s) + 1];
  const auto& widths = model.spec().widths;
  const std::size_t in_w = widths[first], out_w = widths[last], classes = widths.back();
  const bool first_stage = s == 0, last_stage = s == p - 1;
  const int m = static_cast<int>(micro_batches);

  std::vector<nn::Activations> acts(micro_batches);
  std::vector<std::vector<float>> inputs(micro_batches), outputs(micro_batches),
      grads_in(micro_batches), grads_out(micro_batches);
  std::vector<dp::Request> sends;
  PipelineStepResult result;
  std::size_t live = 0, backwards_done = 0;

  for (const int op : stage_order(schedule, s, p, micro_batches)) {
    const int i = op > 0 ? op - 1 : -op - 1;
    const auto iu = static_cast<std::size_t>(i);
    const dp::Block mb = dp::block_of(rows, m, i);
    if (op > 0) {  // forward of micro-batch i
      const float* in = x + mb.offset * widths[0];
      if (!first_stage) {
        inputs[iu].resize(mb.count * in_w);
        comm.recv(s - 1, inputs[iu], i);
        in = inputs[iu].data();
      }
      model.forward_layers(first, last, in, mb.count, acts[iu]);
      result.peak_activations = std::max(result.peak_activations, ++live);
      if (!last_stage) {
        outputs[iu].assign(acts[iu].output(), acts[iu].output() + mb.count * out_w);
        sends.push_back(comm.isend(s + 1, outputs[iu], i));
      }
    } else {  // backward of micro-batch i
      const float* dout = nullptr;
      grads_out[iu].resize(mb.count * out_w);
      if (last_stage) {
        const nn::LossResult l = nn::softmax_xent_loss(
            acts[iu].output(), labels + mb.offset, mb.count, classes, grads_out[iu].data(), rows);
        result.loss_sum += l.loss * static_cast<double>(mb.count);
        result.correct += l.correct;
      } else {
        comm.recv(s + 1, grads_out[iu], kGradTag + i);
      }
      dout = grads_out[iu].data();
      if (!first_stage) grads_in[iu].resize(mb.count * in_w);
      model.backward_layers(first, last, acts[iu], dout,
                            first_stage ? nullptr : grads_in[iu].data(),
                            /*accumulate=*/backwards_done > 0);
      ++backwards_done;
      --live;
      if (!first_stage) sends.push_back(comm.isend(s - 1, grads_in[iu], kGradTag + i));
    }
  }
  dp::wait_all(sends);
  return result;
}

}  // namespace concurdl::mp
