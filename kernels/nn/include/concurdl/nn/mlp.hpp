// The MLP: Linear -> ReLU -> ... -> Linear, with softmax cross-entropy on the logits.
// Row-major float tensors, batch-major: an input batch is batch x widths[0].
//
// Every parameter lives in one contiguous buffer and every gradient in another, laid out the
// same way (layer by layer: W then b, W row-major out x in), with per-layer views into both.
// So one all-reduce over gradients() moves every gradient, and buckets of it (layer_offsets())
// move them in pieces, as data-parallel training does in chapter 05.
//
// Layer l is Linear, then ReLU unless l is the last layer. forward_layers / backward_layers run
// any range [first, last) of layers on caller-owned Activations, so a pipeline stage (chapter
// 06) runs only its layers and keeps one Activations per micro-batch in flight, a data-parallel
// step (chapter 05) hears about each layer's finished gradient, and a dataflow graph (chapter
// 08) makes each layer a node. forward_backward, forward and evaluate are built on them.
//
// Threads: the const methods only read the parameters, so any number of threads may run them
// at once on one model, each with its own Activations and output buffers, while nothing
// changes the parameters (an optimiser step, a checkpoint load, writes through layer()).
// backward_layers writes only its own layers' gradients (and its Activations): calls on disjoint
// layer ranges with their own Activations may run at once with each other and with forward;
// overlapping ranges may not. forward_backward uses buffers of the model: one call at a time,
// alone. kernels::set_compute_threads must not change while any of them runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/kernels/aligned.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/nn/precision.hpp"
#include "concurdl/nn/sgd.hpp"
#include "concurdl/nn/tensor.hpp"

namespace concurdl::nn {

struct MlpSpec {
  std::vector<std::size_t> widths = {784, 256, 128, 10};  // input, hidden..., classes
  std::string describe() const;                           // "784-256-128-10"
  // "784-256-128-10"; throws std::invalid_argument naming what is wrong (fewer than two
  // widths, a zero, not a number).
  static MlpSpec parse(std::string_view text);
  bool operator==(const MlpSpec&) const = default;
};

struct LayerView {
  MatrixView w;  // out x in
  std::span<float> b;
};

struct EvalResult {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // fraction correct
  std::size_t samples = 0;
};

// Softmax cross-entropy on the logits: what the loss head returns.
struct LossResult {
  double loss = 0;          // mean cross-entropy over the rows
  std::size_t correct = 0;  // rows whose largest logit is the label
};

// The loss head. logits and dlogits are rows x classes, labels in [0, classes) (else
// std::invalid_argument). dlogits receives the gradient of (sum of the rows' losses) /
// total_rows; it may alias logits. total_rows 0 means rows: the gradient of this batch's mean
// loss. A micro-batch of a larger batch passes the larger batch's size, so that gradients
// accumulated over its micro-batches are the gradient of the whole batch's mean loss.
LossResult softmax_xent_loss(const float* logits, const std::uint8_t* labels, std::size_t rows,
                             std::size_t classes, float* dlogits, std::size_t total_rows = 0);

// One batch's activations through layers [first, last) of an Mlp: the range's input (borrowed,
// not copied) and every layer's output, which is all that backward needs. Owned by the caller,
// one per micro-batch in flight; forward_layers fills it, backward_layers reads it (and keeps
// its gradient scratch here, so that neither allocates once the sizes have been seen). Used by
// one thread at a time.
class Activations {
 public:
  // Buffers counted in `account` (core/memory.hpp), when given: the layer outputs and the
  // output gradients a deferred W keeps as activations, backward's ping-pong scratch as
  // workspace. A default one counts nothing.
  explicit Activations(MemoryAccount* account = nullptr);
  // Frees every buffer (the borrowed input is forgotten): what a pipeline stage does once a
  // micro-batch's backward no longer needs them. forward_layers may run on it again.
  void release();
  std::size_t first() const { return first_; }
  std::size_t last() const { return last_; }
  std::size_t batch() const { return batch_; }  // 0 until forward_layers ran
  // The range's input as given to forward_layers: batch x widths[first].
  const float* input() const { return input_; }
  // The output of layer l in [first, last): batch x widths[l + 1], after its ReLU if it has one.
  const float* output(std::size_t l) const;
  // The range's output (layer last - 1's): what a pipeline stage sends on, or the logits.
  const float* output() const { return output(last_ - 1); }
  // Bytes these activations hold (outputs and backward's scratch, by capacity): what a memory
  // account of training counts as activations.
  std::size_t bytes() const;
  // Of those, the layers' outputs alone (by capacity): what backward must keep from forward,
  // and what recomputing the forward saves.
  std::size_t output_bytes() const;
  // The layers' output gradients that Mlp::backward_input_layers kept for
  // backward_weight_layers (by capacity; 0 once that ran, or if the backward was not split):
  // what a micro-batch whose weight gradient is deferred holds besides its outputs.
  std::size_t pending_gradient_bytes() const;

 private:
  friend class Mlp;
  std::size_t first_ = 0, last_ = 0, batch_ = 0;
  const float* input_ = nullptr;
  kernels::LineAllocator<float> kept_, scratch_;     // activations, workspace
  std::vector<kernels::LineVector<float>> outputs_;  // outputs_[i]: layer first + i's output
  kernels::LineVector<float> delta_[2];              // backward's ping-pong gradient buffers
  // The split backward's: deltas_[i] is layer first + i's output gradient (dZ), kept from
  // backward_input_layers until backward_weight_layers over [delta_first_, delta_last_).
  std::vector<kernels::LineVector<float>> deltas_;
  std::size_t delta_first_ = 0, delta_last_ = 0;
  bool deltas_pending_ = false;
};

class Mlp {
 public:
  // Deterministic initialisation from `seed` (He-uniform weights, zero biases), the same on
  // every machine and compiler (the suite's own generator, not <random>'s distributions).
  // With `account`, every buffer the model owns is counted there (core/memory.hpp): parameters,
  // gradients, the 16-bit copies of mixed precision, forward_backward's activations and scratch.
  Mlp(MlpSpec spec, std::uint64_t seed, kernels::GemmVersion gemm = kernels::GemmVersion::openblas,
      MemoryAccount* account = nullptr);

  const MlpSpec& spec() const { return spec_; }
  kernels::GemmVersion gemm() const { return gemm_; }
  std::size_t layers() const { return spec_.widths.size() - 1; }

  // (Handing out the parameters to write marks the 16-bit working copy train_step_mixed keeps
  // as stale: its next step rounds them afresh.)
  std::span<float> parameters() {
    // Written only when set: threads that share a model and read its weights through the
    // non-const accessors must not race on the flag (it is set only by a mixed step).
    if (mixed_.params_current) mixed_.params_current = false;
    return params_;
  }
  std::span<const float> parameters() const { return params_; }
  std::span<float> gradients() { return grads_; }
  std::span<const float> gradients() const { return grads_; }
  LayerView layer(std::size_t l);           // views into parameters()
  LayerView layer_gradient(std::size_t l);  // views into gradients()
  // Where layer l's parameters start in the flat buffers, plus the total at the end
  // (layers() + 1 entries): the natural bucket boundaries for an all-reduce.
  const std::vector<std::size_t>& layer_offsets() const { return offsets_; }

  // ---- storage held elsewhere (chapter 05's sharded trainers, ZeRO) ------------------------
  // release_parameters() / release_gradients() free the flat buffer (parameters() or
  // gradients() is then empty) and leave every layer unbound; a layer's parameters or gradients
  // must then be bound to a caller's buffer (layer_offsets()[l + 1] - layer_offsets()[l] floats,
  // W then b, as in the flat buffer) before forward or backward touches them, else
  // std::logic_error naming the layer. nullptr unbinds. The caller keeps the buffer alive while
  // it is bound. train_step (the fused update) needs the model's own storage.
  void release_parameters();
  void release_gradients();
  void bind_layer_parameters(std::size_t l, float* params);
  void bind_layer_gradients(std::size_t l, float* grads);

  // ---- by layer ---------------------------------------------------------------------------
  // Forward through layers [first, last) (first < last <= layers(), else std::invalid_argument
  // naming the range): in is batch x widths[first], batch >= 1; the output lands in
  // a.output(), batch x widths[last]. `in` is not copied: keep it alive and unchanged until
  // backward_layers on `a` is done (layer first's weight gradient reads it).
  void forward_layers(std::size_t first, std::size_t last, const float* in, std::size_t batch,
                      Activations& a) const;
  // Backward through layers [first, last), last to first, after forward_layers ran a range
  // containing them on `a`. dout (batch x widths[last]) is the loss's gradient with respect to
  // layer last - 1's output; the ReLU of that layer, if any, is applied here. Writes the
  // gradients of layers [first, last) into gradients(): overwriting them, or adding to them
  // when `accumulate` (micro-batches: the first overwrites, the others add; scale each
  // micro-batch's dout by its rows / the batch's rows, as softmax_xent_loss's total_rows does,
  // and the sum is the whole batch's mean-loss gradient). din, when not null, receives the
  // gradient with respect to the range's input (batch x widths[first]); the ReLU that produced
  // that input belongs to layer first - 1, whose backward applies it.
  // on_layer_done(l), when given, runs once per layer, l = last - 1 down to first, as soon as
  // layer l's gradient is final: the hook for all-reducing it while backward goes on below. It
  // may hand that gradient to another thread (backward does not touch it again), but must not
  // change the parameters before backward_layers returns.
  void backward_layers(std::size_t first, std::size_t last, Activations& a, const float* dout,
                       float* din, bool accumulate = false,
                       const std::function<void(std::size_t)>& on_layer_done = {});

  // The same backward in two halves, as zero-bubble pipeline schedules split it (Qi et al.,
  // "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv:2401.10241): backward_input_layers
  // ("B") computes every layer's output gradient in [first, last) and din, which is all the
  // stage below waits for, and keeps those gradients in `a`; backward_weight_layers ("W"),
  // any time later, computes the layers' weight and bias gradients from them and from the
  // activations, which must stay as forward left them. The pair writes the gradients that
  // backward_layers writes, bit for bit (the same GEMMs on the same operands). A second
  // backward_input_layers on `a` before its W is std::logic_error, as is a W without its B;
  // forward_layers on `a` drops a W left waiting.
  void backward_input_layers(std::size_t first, std::size_t last, Activations& a, const float* dout,
                             float* din);
  void backward_weight_layers(std::size_t first, std::size_t last, Activations& a,
                              bool accumulate = false);

  // ---- whole model, built on the above ----------------------------------------------------
  // Forward and backward on one batch: x is batch x widths[0], labels batch values in
  // [0, classes). Overwrites gradients() with the mean-loss gradient; returns the mean loss.
  // `correct`, when given, receives how many predictions were right.
  float forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                         std::size_t* correct = nullptr);
  // The same, and the gradient of the mean loss with respect to the input into dx (batch x
  // widths[0]): what a layer below the MLP would need, and what the gradient check tests.
  float forward_backward(const float* x, const std::uint8_t* labels, std::size_t batch,
                         std::size_t* correct, float* dx);
  // A whole training step: forward_backward, then opt.step(parameters(), gradients()), the same
  // bits, with each weight matrix's update fused into the GEMM that computes its gradient
  // (kernels::GemmSgd: the gradient is applied while it is in registers instead of written out
  // and read back; each layer's input gradient is computed first, from the weights before the
  // update). Afterwards gradients() holds this step's bias gradients; what it holds for the
  // weights is unspecified (GEMM v4 applies them from registers, the other versions from there).
  // opt must be sized for parameters() (else std::invalid_argument).
  float train_step(const float* x, const std::uint8_t* labels, std::size_t batch, Sgd& opt,
                   std::size_t* correct = nullptr);
  // ---- mixed precision (precision.hpp) ----------------------------------------------------
  struct MixedStep {
    float loss = 0;        // the batch's mean loss (unscaled)
    bool finite = true;    // every 16-bit gradient finite: gradients() was written
    bool applied = false;  // train_step_mixed: the update was applied
  };
  // Forward and backward on one batch with 16-bit storage in `p` (bf16 or fp16; fp32 is
  // std::invalid_argument: that is forward_backward). The float32 parameters (the master copy)
  // are rounded into a 16-bit working copy; every layer's output and every gradient of an
  // output is held in 16 bits; each GEMM multiplies 16-bit operands and sums in float32
  // (gemm_bf16 where the CPU has AVX512_BF16, else the operands widened to float32 for
  // gemm()); bias and ReLU are applied in float32 before the output is rounded; the loss head
  // runs in float32 on the 16-bit logits. The loss's gradient is multiplied by `loss_scale`
  // (> 0) before it is rounded to 16 bits, so every gradient below it is scaled too. The weight
  // and bias gradients are stored in 16 bits (mixed_gradients(), scaled) and checked: when all
  // are finite, gradients() receives them divided by loss_scale, in float32, and `finite` is
  // true; else gradients() is left as it was. Needs the model's own storage (not released).
  // Evaluation (forward, evaluate) reads the float32 master weights. total_rows as
  // softmax_xent_loss takes it: a rank's share of a larger batch passes that batch's rows.
  // `grads` says what is done with the 16-bit gradients once stored (MixedGrads): the above
  // (unscale); or gradients() is never written, and `finite` says whether the 16-bit gradients
  // are (check: the update reads them itself, Sgd::step_16bit); or they are not even read
  // again, and `finite` is true (keep: a data-parallel step checks their sum after the
  // all-reduce, where a rank's own check would be a pass over them for nothing).
  // on_layer_done(l), when given, is called as soon as layer l's 16-bit gradients (weights and
  // bias) are stored, from the last layer down, while the layers below are still to be computed
  // (a data-parallel trainer all-reduces them meanwhile: they are not read here again; with
  // check, `finite` is from each layer's check before it was handed over;
  // std::invalid_argument with unscale).
  enum class MixedGrads { unscale, check, keep };
  MixedStep forward_backward_mixed(Precision p, const float* x, const std::uint8_t* labels,
                                   std::size_t batch, float loss_scale,
                                   std::size_t* correct = nullptr, std::size_t total_rows = 0,
                                   MixedGrads grads = MixedGrads::unscale,
                                   const std::function<void(std::size_t)>& on_layer_done = {});
  // The same from a batch already in 16 bits: x16 (batch x widths[0] values in `p`'s format, as
  // to_16bit rounds them) is read in place until the call returns, so the float32 batch is not
  // rounded by a pass of its own (gather_batch_16bit rounds it as it gathers it).
  MixedStep forward_backward_mixed(Precision p, const std::uint16_t* x16,
                                   const std::uint8_t* labels, std::size_t batch, float loss_scale,
                                   std::size_t* correct = nullptr, std::size_t total_rows = 0,
                                   MixedGrads grads = MixedGrads::unscale,
                                   const std::function<void(std::size_t)>& on_layer_done = {});
  // A whole mixed-precision training step, with each weight matrix's update fused into the GEMM
  // that computes its gradient, as train_step does in float32. Forward and the loss as
  // forward_backward_mixed; then every layer's output gradient (16-bit, scaled) from the weights
  // before the update, each checked as it is rounded; `decide(finite)` is then asked whether to
  // apply the update (the loss scaler's say: an FP16 step whose scaled gradients overflowed is
  // skipped), and if so each weight gradient is summed in float32, multiplied by 1 / loss_scale
  // (exact for a power of two, as the scaler keeps it) and applied by opt's momentum SGD as its
  // GEMM finishes it, the updated parameter also rounded into the 16-bit working copy the next
  // step multiplies with (with gemm_bf16 or GEMM v4 in registers, the weight gradients never
  // stored; the other GEMMs store them in float32 first);
  // the biases' from the column sums, as Sgd::step_range. What differs from
  // forward_backward_mixed then Sgd::step_16bit: the weight gradients are not rounded to 16 bits
  // (what overflows in FP16 is then the output gradients, which are stored). The loss is the
  // batch's mean (total_rows as the batch). Needs the model's own storage and opt sized for it.
  // Afterwards gradients() holds the step's (unscaled) bias gradients; the weights' entries are
  // unspecified, as after train_step.
  MixedStep train_step_mixed(Precision p, const float* x, const std::uint8_t* labels,
                             std::size_t batch, float loss_scale, Sgd& opt,
                             const std::function<bool(bool finite)>& decide,
                             std::size_t* correct = nullptr);
  // The same from a batch already in 16 bits, read in place (as forward_backward_mixed's).
  MixedStep train_step_mixed(Precision p, const std::uint16_t* x16, const std::uint8_t* labels,
                             std::size_t batch, float loss_scale, Sgd& opt,
                             const std::function<bool(bool finite)>& decide,
                             std::size_t* correct = nullptr);
  // For an update that writes the parameters and their 16-bit rounding together (Sgd::step_16bit
  // with params16): the parameters to write, and the 16-bit working copy in `p` to write beside
  // them, which the next mixed step in `p` then multiplies with instead of rounding the
  // parameters afresh. The caller must write the rounding of every parameter it leaves there.
  struct MixedUpdate {
    std::span<float> params;
    std::span<std::uint16_t> params16;
  };
  MixedUpdate mixed_update(Precision p);
  // The 16-bit working copy of the parameters: what the last mixed step multiplied with, or, after
  // train_step_mixed's update or a mixed_update, what the next will.
  std::span<const std::uint16_t> mixed_parameters() const { return mixed_.params; }
  // The 16-bit gradients of the last forward_backward_mixed, scaled by its loss_scale, laid
  // out as gradients() (bfloat16 or binary16 bits): what a data-parallel step all-reduces.
  std::span<const std::uint16_t> mixed_gradients() const { return mixed_.grads; }
  // The same, to be summed in place over the ranks (allreduce_ring_16bit) before the update.
  std::span<std::uint16_t> mixed_gradients() { return mixed_.grads; }
  // Bytes the 16-bit copies hold: parameters, gradients and activations, by capacity.
  std::size_t mixed_bytes() const;

  // Forward only: logits (batch x classes) into `logits`.
  void forward(const float* x, std::size_t batch, float* logits) const;
  // Mean loss and accuracy over n samples, in batches of `batch`.
  EvalResult evaluate(const float* x, const std::uint8_t* labels, std::size_t n,
                      std::size_t batch = 1000) const;

 private:
  MlpSpec spec_;
  kernels::GemmVersion gemm_;
  kernels::LineVector<float> params_, grads_;  // on cache lines (aligned.hpp)
  std::vector<std::size_t> offsets_;
  Activations step_acts_;  // forward_backward's, kept so that a training step does not allocate
  kernels::LineVector<float> dlogits_;

  void check_range(const char* who, std::size_t first, std::size_t last) const;
  float forward_loss(const char* who, const float* x, const std::uint8_t* labels, std::size_t batch,
                     std::size_t* correct);
  // backward_layers, and with `fuse` each layer's update (train_step) as its gradient is made.
  void backward(std::size_t first, std::size_t last, Activations& a, const float* dout, float* din,
                bool accumulate, const std::function<void(std::size_t)>& on_layer_done, Sgd* fuse);
  // Layer l's parameters and gradients: in the flat buffers, or where they are bound.
  const float* weights(std::size_t l) const;
  float* gradient_of(std::size_t l);
  std::vector<float*> bound_params_, bound_grads_;  // empty: the flat buffers hold them
  // forward_backward_mixed's buffers: the 16-bit copies, and float32 scratch (a GEMM's output,
  // widened operands, the logits).
  struct Mixed {
    explicit Mixed(MemoryAccount* a);
    kernels::LineVector<std::uint16_t> params, grads, input, delta;
    const std::uint16_t* x16 = nullptr;  // the step's 16-bit batch: `input`, or the caller's
    std::vector<kernels::LineVector<std::uint16_t>> outputs, deltas;  // deltas: train_step_mixed's
    // params holds round16(parameters()) in params_format: train_step_mixed's update wrote it,
    // and nothing has handed the parameters out to be written since.
    bool params_current = false;
    Precision params_format = Precision::fp32;
    kernels::LineVector<float> wide, a32, b32, logits, sums;
  } mixed_;
  void gemm16(Precision p, kernels::Trans ta, kernels::Trans tb, std::size_t m, std::size_t n,
              std::size_t k, const std::uint16_t* a, std::size_t lda, const std::uint16_t* b,
              std::size_t ldb, float* c, std::size_t ldc, const kernels::GemmSgd* sgd = nullptr,
              std::uint16_t* c16 = nullptr);
  // The mixed step's checks, the weights' cast, forward and loss head (shared by
  // forward_backward_mixed and train_step_mixed): leaves the 16-bit scaled output gradient of the
  // last layer in mixed_.delta; returns the mean loss.
  float forward_loss_mixed(const char* who, Precision p, const std::uint16_t* x16,
                           const std::uint8_t* labels, std::size_t batch, float loss_scale,
                           std::size_t* correct, std::size_t total_rows);
  // A float32 batch rounded into mixed_.input (the `cast` phase), for the float overloads.
  const std::uint16_t* round_input(const char* who, Precision p, const float* x, std::size_t batch);
};

}  // namespace concurdl::nn
