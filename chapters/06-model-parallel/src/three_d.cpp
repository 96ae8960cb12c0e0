// 3D parallelism (three_d.hpp): the tensor-parallel stage, the grid's groups and its step.
#include "concurdl/mp/three_d.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "concurdl/dp/algorithms.hpp"
#include "concurdl/kernels/ops.hpp"
#include "pipeline_step.hpp"

namespace concurdl::mp {

using kernels::Trans;

// ---- the tensor-parallel stage ------------------------------------------------------------

TensorParallelStage::Activations::Activations(MemoryAccount* account)
    : kept_(account, MemoryKind::activations),
      scratch_(account, MemoryKind::workspace),
      grad_{kernels::LineVector<float>(scratch_), kernels::LineVector<float>(scratch_)},
      hidden_grad_(scratch_) {}

void TensorParallelStage::Activations::release() {
  outputs_.clear();
  outputs_.shrink_to_fit();
  for (auto& g : grad_) kernels::release(g);
  kernels::release(hidden_grad_);
  batch_ = 0;
  input_ = nullptr;
}

const float* TensorParallelStage::Activations::output() const {
  if (batch_ == 0 || outputs_.empty())
    throw std::out_of_range("TensorParallelStage::Activations: nothing ran forward yet");
  return outputs_.back().data();
}

std::size_t TensorParallelStage::Activations::output_bytes() const {
  std::size_t floats = 0;
  for (const auto& o : outputs_) floats += o.capacity();
  return floats * sizeof(float);
}

TensorParallelStage::TensorParallelStage(dp::Communicator& tp, const nn::MlpSpec& spec,
                                         std::span<const float> params, std::size_t first,
                                         std::size_t last, kernels::GemmVersion gemm)
    : tp_(&tp),
      tp_size_(tp.size()),
      tp_rank_(tp.rank()),
      spec_(spec),
      first_(first),
      last_(last),
      gemm_(gemm) {
  const std::size_t L = spec_.widths.size() - 1;
  if (first >= last || last > L)
    throw std::invalid_argument(
        fmt::format("TensorParallelStage: layers [{}, {}) of a {}-layer model", first, last, L));
  full_offsets_ = {0};
  for (std::size_t l = 0; l < L; ++l)
    full_offsets_.push_back(full_offsets_.back() + spec_.widths[l + 1] * spec_.widths[l] +
                            spec_.widths[l + 1]);
  if (params.size() != full_offsets_.back())
    throw std::invalid_argument(fmt::format("TensorParallelStage: {} parameters for {} (it has {})",
                                            params.size(), spec_.describe(), full_offsets_.back()));
  const auto T = static_cast<std::size_t>(tp_size_);
  std::size_t offset = 0;
  for (std::size_t l = first; l < last; ++l) {
    const std::size_t in = spec_.widths[l], out = spec_.widths[l + 1];
    Layer y{Split::replicated, in, out, offset, in, out, l + 1 < L};
    const bool paired_first = (l - first) % 2 == 0 && l + 1 < last;
    const bool paired_second = (l - first) % 2 == 1;
    if (T > 1 && paired_first) {
      if (out % T != 0)
        throw std::invalid_argument(fmt::format(
            "TensorParallelStage: layer {}'s {} outputs do not divide over {} tensor ranks", l, out,
            T));
      y.split = Split::column;
      y.out = out / T;
    } else if (T > 1 && paired_second) {
      y.split = Split::row;
      y.in = in / T;
    }
    splits_.push_back(y.split);
    layer_.push_back(y);
    offset += y.out * y.in + y.out;
  }
  params_.resize(offset);
  grads_.assign(offset, 0.0f);
  for_each_element([&](std::size_t mine, std::size_t whole) { params_[mine] = params[whole]; });
}

void TensorParallelStage::set_communicator(dp::Communicator& tp) {
  if (tp.size() != tp_size_ || tp.rank() != tp_rank_)
    throw std::invalid_argument(fmt::format(
        "TensorParallelStage::set_communicator: rank {} of {}, but the stage is rank {} of {}",
        tp.rank(), tp.size(), tp_rank_, tp_size_));
  tp_ = &tp;
}

void TensorParallelStage::scatter(std::span<const float> shard, std::span<float> full) const {
  for_each_element([&](std::size_t mine, std::size_t whole) { full[whole] = shard[mine]; });
}

void TensorParallelStage::gather(std::span<const float> full, std::span<float> shard) const {
  for_each_element([&](std::size_t mine, std::size_t whole) { shard[mine] = full[whole]; });
}

template <class F>
void TensorParallelStage::for_each_element(F f) const {
  const auto t = static_cast<std::size_t>(tp_rank_);
  for (std::size_t l = first_; l < last_; ++l) {
    const Layer& y = layer_[l - first_];
    const std::size_t base = full_offsets_[l];
    const std::size_t full_b = base + y.full_out * y.full_in;
    // W: shard row i, column j is whole row r0 + i, column c0 + j.
    const std::size_t r0 = y.split == Split::column ? t * y.out : 0;
    const std::size_t c0 = y.split == Split::row ? t * y.in : 0;
    for (std::size_t i = 0; i < y.out; ++i)
      for (std::size_t j = 0; j < y.in; ++j)
        f(y.offset + i * y.in + j, base + (r0 + i) * y.full_in + c0 + j);
    for (std::size_t i = 0; i < y.out; ++i) f(y.offset + y.out * y.in + i, full_b + r0 + i);
  }
}

void TensorParallelStage::scatter_gradients(std::span<float> full) const {
  for_each_element([&](std::size_t mine, std::size_t whole) { full[whole] = grads_[mine]; });
}

void TensorParallelStage::scatter_parameters(std::span<float> full) const {
  for_each_element([&](std::size_t mine, std::size_t whole) { full[whole] = params_[mine]; });
}

void TensorParallelStage::check(const char* who, std::size_t first, std::size_t last) const {
  if (first != first_ || last != last_)
    throw std::invalid_argument(
        fmt::format("TensorParallelStage::{}: layers [{}, {}), but the "
                    "stage holds [{}, {})",
                    who, first, last, first_, last_));
}

void TensorParallelStage::forward_layers(std::size_t first, std::size_t last, const float* in,
                                         std::size_t batch, Activations& a) {
  check("forward_layers", first, last);
  if (batch == 0 || in == nullptr)
    throw std::invalid_argument("TensorParallelStage::forward_layers: an empty or null batch");
  a.batch_ = batch;
  a.input_ = in;
  a.outputs_.resize(std::min(a.outputs_.size(), last - first));
  while (a.outputs_.size() < last - first) a.outputs_.emplace_back(a.kept_);
  const float* x = in;
  for (std::size_t l = first; l < last; ++l) {
    const Layer& y = layer_[l - first];
    auto& out = a.outputs_[l - first];
    if (y.split == Split::row) {
      // The partial products of this rank's input slice (the column layer's output), summed
      // over the ranks; then the bias and the ReLU on the whole output.
      out.resize(batch * y.out);
      kernels::gemm(gemm_, Trans::no, Trans::yes, batch, y.out, y.in, 1.0f, x, y.in, w(l), y.in,
                    0.0f, out.data(), y.out);
      tp_->all_reduce(std::span<float>(out.data(), batch * y.out));
      const float* bias = b(l);
      for (std::size_t r = 0; r < batch; ++r) {
        float* row = out.data() + r * y.out;
        for (std::size_t c = 0; c < y.out; ++c) {
          const float v = row[c] + bias[c];
          row[c] = y.relu && v < 0.0f ? 0.0f : v;
        }
      }
    } else {  // column (this rank's output slice) or replicated (the whole output)
      out.resize(batch * y.out);
      kernels::gemm(gemm_, Trans::no, Trans::yes, batch, y.out, y.in, 1.0f, x, y.in, w(l), y.in,
                    0.0f, out.data(), y.out, {.bias = b(l), .relu = y.relu});
    }
    x = out.data();
  }
}

void TensorParallelStage::backward_layers(std::size_t first, std::size_t last, Activations& a,
                                          const float* dout, float* din, bool accumulate) {
  check("backward_layers", first, last);
  if (a.batch_ == 0) throw std::invalid_argument("TensorParallelStage: backward before forward");
  const std::size_t batch = a.batch_;
  const float beta = accumulate ? 1.0f : 0.0f;
  // g: the gradient with respect to layer l's output (after its ReLU), whole, until the column
  // layer of a pair, whose gradient is this rank's slice.
  const Layer& top = layer_.back();
  a.grad_[0].assign(dout, dout + batch * top.full_out);
  std::size_t cur = 0;
  for (std::size_t l = last; l-- > first;) {
    const Layer& y = layer_[l - first];
    float* g = a.grad_[cur].data();
    const float* out = a.outputs_[l - first].data();
    if (y.relu) kernels::relu_backward(out, g, batch * y.out);  // now dZ of layer l
    const float* x = l == first ? a.input_ : a.outputs_[l - 1 - first].data();
    kernels::gemm(gemm_, Trans::yes, Trans::no, y.out, y.in, batch, 1.0f, g, y.out, x, y.in, beta,
                  dw(l), y.in);
    kernels::column_sums(g, batch, y.out, y.out, db(l), beta);
    const bool need_dx = l > first || din != nullptr;
    if (!need_dx) break;
    // The input's gradient: a row layer's is this rank's slice of its input (the column
    // layer's output), with no communication; a column layer's sums every rank's part.
    auto& next = a.grad_[cur ^ 1];
    next.resize(batch * y.in);
    kernels::gemm(gemm_, Trans::no, Trans::no, batch, y.in, y.out, 1.0f, g, y.out, w(l), y.in, 0.0f,
                  next.data(), y.in);
    if (y.split == Split::column) tp_->all_reduce(std::span<float>(next.data(), batch * y.in));
    cur ^= 1;
  }
  if (din != nullptr) std::copy_n(a.grad_[cur].data(), batch * layer_.front().full_in, din);
}

void TensorParallelStage::backward_input_layers(std::size_t, std::size_t, Activations&,
                                                const float*, float*) {
  throw std::invalid_argument("TensorParallelStage: no split backward (the zb-h1 schedule)");
}
void TensorParallelStage::backward_weight_layers(std::size_t, std::size_t, Activations&, bool) {
  throw std::invalid_argument("TensorParallelStage: no split backward (the zb-h1 schedule)");
}

// ---- the grid ---------------------------------------------------------------------------------

std::string Grid::describe() const {
  return fmt::format("{}x{}x{} (data x tensor x pipeline)", data, tensor, pipeline);
}

GridPosition grid_position(const Grid& g, int rank) {
  return {.data = (rank / g.tensor) % g.data,
          .tensor = rank % g.tensor,
          .pipeline = rank / (g.tensor * g.data)};
}

GridGroups split_grid(dp::Communicator& world, const Grid& g) {
  if (g.data < 1 || g.tensor < 1 || g.pipeline < 1 || world.size() != g.size())
    throw std::invalid_argument(fmt::format("split_grid: a {} grid of {} ranks on {} ranks",
                                            g.describe(), g.size(), world.size()));
  const GridPosition at = grid_position(g, world.rank());
  GridGroups out;
  // Each group's colour names the two coordinates its ranks share; its key orders them by the
  // third.
  out.tensor = world.split(at.data + g.data * at.pipeline, at.tensor);
  out.data = world.split(at.tensor + g.tensor * at.pipeline, at.data);
  out.pipeline = world.split(at.tensor + g.tensor * at.data, at.pipeline);
  return out;
}

ThreeDRank make_three_d_rank(GridGroups& groups, const Grid& g, const nn::MlpSpec& spec,
                             std::span<const float> params, kernels::GemmVersion gemm) {
  ThreeDRank r;
  r.at = {groups.data->rank(), groups.tensor->rank(), groups.pipeline->rank()};
  r.bounds = stage_boundaries(spec.widths.size() - 1, g.pipeline);
  const auto p = static_cast<std::size_t>(r.at.pipeline);
  r.stage = std::make_unique<TensorParallelStage>(*groups.tensor, spec, params, r.bounds[p],
                                                  r.bounds[p + 1], gemm);
  return r;
}

PipelineStepResult pipeline_step(dp::Communicator& pipe, TensorParallelStage& stage,
                                 std::span<const std::size_t> boundaries, const float* x,
                                 const std::uint8_t* labels, std::size_t rows,
                                 std::size_t micro_batches, Schedule schedule,
                                 BasicPipelineWorkspace<TensorParallelStage::Activations>* ws,
                                 const StepOptions& options) {
  if (schedule_row(schedule).three_d == InThreeD::not_offered)
    throw std::invalid_argument(fmt::format(
        "pipeline over tensor-parallel stages: {} is not offered (naive, gpipe or 1f1b)",
        schedule_name(schedule)));
  if (options.recompute)
    throw std::invalid_argument("pipeline over tensor-parallel stages: no recomputation");
  if (boundaries.size() != static_cast<std::size_t>(pipe.size()) + 1)
    throw std::invalid_argument("pipeline over tensor-parallel stages: one chunk a stage");
  detail::check_micro_batches(micro_batches, rows);
  const std::vector<PipeOp> order = stage_order(schedule, pipe.rank(), pipe.size(), micro_batches);
  return detail::run_pipeline_step(pipe, stage, boundaries, x, labels, rows, micro_batches,
                                   std::span<const PipeOp>(order), ws, options);
}

ThreeDStepResult three_d_step(GridGroups& groups, ThreeDRank& rank, const float* x,
                              const std::uint8_t* labels, std::size_t rows,
                              std::size_t micro_batches, Schedule schedule) {
  dp::Communicator& data = *groups.data;
  const int D = data.size();
  const dp::Block shard = dp::block_of(rows, D, data.rank());
  if (micro_batches < 1)
    throw std::invalid_argument("3D step: no micro-batches (need at least one)");
  const auto width = rank.stage->spec().widths.front();
  const bool first = rank.at.pipeline == 0;
  const bool last = rank.at.pipeline == groups.pipeline->size() - 1;
  // Every rank of the grid is a thread or process of this machine's: a receive spins only
  // when all of them have a hardware thread.
  const int grid = D * groups.tensor->size() * groups.pipeline->size();
  const StepOptions options{.poll =
                                static_cast<unsigned>(grid) <= std::thread::hardware_concurrency()};
  ThreeDStepResult r;
  const std::span<float> g = rank.stage->gradients();
  if (shard.count > 0)  // the whole pipeline and tensor group share this data rank: all or none
    r.pipeline = pipeline_step(*groups.pipeline, *rank.stage, rank.bounds,
                               first ? x + shard.offset * width : nullptr,
                               last ? labels + shard.offset : nullptr, shard.count,
                               std::min(micro_batches, shard.count), schedule, &rank.ws, options);
  else
    std::fill(g.begin(), g.end(), 0.0f);
  // The shard's mean-loss gradient, weighted by its share of the batch, summed over the data
  // group: the whole batch's mean-loss gradient.
  const auto t0 = std::chrono::steady_clock::now();
  if (D > 1) {
    kernels::scale(g.size(), static_cast<float>(shard.count) / static_cast<float>(rows), g.data());
    data.all_reduce(g);
  }
  r.allreduce_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The loss, which the last stages computed, summed over the pipeline (the others add 0) and
  // the data shards: on every rank.
  std::vector<float> sums = {static_cast<float>(r.pipeline.loss_sum),
                             static_cast<float>(r.pipeline.correct)};
  if (groups.pipeline->size() > 1) groups.pipeline->all_reduce(sums);
  if (D > 1) data.all_reduce(sums);
  r.loss_sum = sums[0];
  r.correct = static_cast<std::size_t>(sums[1] + 0.5f);
  return r;
}

ThreeDCost three_d_step_model(const Grid& g, double one_rank_s, const ThreeDShape& shape,
                              const dp::Link& tensor_link, const dp::Link& link) {
  const double D = g.data, T = g.tensor, P = g.pipeline, m = shape.micro_batches;
  const double slots = m + P - 1;
  const double mb_bytes = shape.rows / m * shape.width * sizeof(float);
  ThreeDCost c;
  c.compute = one_rank_s / (T * P) * slots / m;
  if (T > 1)
    c.tensor = slots * 2 * shape.pairs_per_stage *
               dp::allreduce_time("v4_ring", T, mb_bytes, tensor_link).value_or(0);
  if (P > 1) c.pipeline = 2 * slots * (link.alpha_s + mb_bytes * link.beta_s_per_byte);
  if (D > 1)
    c.data = dp::allreduce_time("v4_ring", D, shape.parameters / (T * P) * sizeof(float), link)
                 .value_or(0);
  return c;
}

}  // namespace concurdl::mp
