// The CPU kernels an MLP needs besides GEMM: reductions, element-wise ops and softmax
// cross-entropy, each with its cost (FLOPs, compulsory bytes) declared next to it.
//
// Threads: OpenMP with num_threads(compute_threads()) and static schedules, and only where the
// work pays for the team (kParallelMin below; smaller inputs run on the calling thread).
// Determinism: every reduction cuts its input into FIXED chunks (kReduceChunk elements, or
// rows), sums each chunk in a fixed order, and adds the chunk partials in chunk order on one
// thread. So the result depends neither on the thread count nor on timing: the same input
// gives the same bits at 1 thread or 8. Element-wise ops are trivially deterministic.
#pragma once

#include <cstddef>
#include <cstdint>

#include "concurdl/kernels/cost.hpp"

namespace concurdl::kernels {

// Elements per reduction chunk: the unit of work and of summation order.
inline constexpr std::size_t kReduceChunk = 4096;

// Below this many elements (4 MiB of floats) a kernel runs on the calling thread. Smaller
// inputs sit in L2, where one core streams them about as fast as a team would, and a team has
// a hidden cost besides waking it: after the region its workers spin-wait for the next one,
// and so does OpenBLAS's own thread pool after each GEMM, so mixing the two oversubscribes the
// cores. Measured on 2 busy cores, training 784-256-128-10 at batch 64 with --threads 2: 1.6 s
// per epoch with the SGD update on one thread, 6-10 s with it in a 2-thread OpenMP team
// (2.4 s with OMP_WAIT_POLICY=passive). Every MLP-sized op stays below this line.
inline constexpr std::size_t kParallelMin = std::size_t{1} << 20;

// ---- reductions -------------------------------------------------------------------------
// Partials are float within a chunk (8 interleaved accumulators, so the compiler vectorises
// without -ffast-math) and double across chunks.
float sum(const float* x, std::size_t n);
Cost sum_cost(std::size_t n);  // n flops; reads n floats

float dot(const float* x, const float* y, std::size_t n);
Cost dot_cost(std::size_t n);  // 2n flops; reads 2n floats

// The largest element; -infinity for n == 0. NaN propagates (a NaN anywhere gives NaN).
float max_value(const float* x, std::size_t n);
Cost max_cost(std::size_t n);  // n comparisons; reads n floats

// out[c] = beta * out[c] + sum over r of x[r * ldx + c]: the bias gradient over a batch
// (x = dY, rows = batch). Columns are split between threads; each column is summed in row order.
void column_sums(const float* x, std::size_t rows, std::size_t cols, std::size_t ldx, float* out,
                 float beta = 0.0f);
Cost column_sums_cost(std::size_t rows, std::size_t cols);

// ---- element-wise -----------------------------------------------------------------------
// y[r * ldy + c] += b[c]: the bias broadcast over the rows of a batch.
void add_bias_rows(float* y, std::size_t rows, std::size_t cols, std::size_t ldy, const float* b);
Cost add_bias_rows_cost(std::size_t rows,
                        std::size_t cols);  // rows*cols adds; y read+written, b read

// One element of the ReLU and of its gradient: what relu_forward and relu_backward compute,
// and GEMM epilogues (gemm.hpp) inline.
inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
inline float relu_grad(float act, float dx) { return act > 0.0f ? dx : 0.0f; }

// y = max(x, 0); y may be x (in place).
void relu_forward(const float* x, float* y, std::size_t n);
Cost relu_forward_cost(std::size_t n);

// dx *= (act > 0): the ReLU's gradient, masked by its OUTPUT act (act > 0 exactly where the
// input was > 0), so the pre-activation need not be kept.
void relu_backward(const float* act, float* dx, std::size_t n);
Cost relu_backward_cost(std::size_t n);

// One parameter's momentum-SGD step (nn::Sgd's rule), for a float or a vector of floats:
//   v = momentum * v + (g + weight_decay * p);  p -= lr * v
// The optimiser's loop and the update fused into a weight-gradient GEMM (GemmSgd, gemm.hpp)
// both go through it, so they contract the same multiply-adds and give the same bits.
template <class T>
inline void sgd_update(T& p, T& v, T g, float lr, float momentum, float weight_decay) {
  v = momentum * v + (g + weight_decay * p);
  p -= lr * v;
}

// sgd_update on the gradient sum * scale (a mixed-precision step's unscaling by a power of two),
// the product kept apart from the update's adds: an empty asm makes it opaque to the compiler,
// so that no compilation contracts it into an FMA with a later add (one that did and one that did
// not would round weight_decay * p differently). Every caller that must agree bit for bit (the
// fused GEMM epilogues and the loops they are checked against) goes through it.
template <class T>
inline void sgd_update_scaled(T& p, T& v, T sum, float scale, float lr, float momentum,
                              float weight_decay) {
  T g = sum * scale;
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  if constexpr (sizeof(T) == 64)
    asm("" : "+v"(g));
  else
    asm("" : "+x"(g));
#endif
  sgd_update(p, v, g, lr, momentum, weight_decay);
}

// y += a * x
void axpy(std::size_t n, float a, const float* x, float* y);
Cost axpy_cost(std::size_t n);  // 2n flops; x read, y read and written

// x *= a
void scale(std::size_t n, float a, float* x);
Cost scale_cost(std::size_t n);

// ---- softmax cross-entropy ----------------------------------------------------------------
// logits: rows x classes (contiguous); labels in [0, classes). Writes the softmax
// probabilities (rows x classes; may alias logits) and returns the mean over rows of
// -log p[label]. Numerically stable: each row's max is subtracted before exp, and the loss
// is computed as log(sum exp(z - max)) - (z[label] - max), never as log of a probability that
// underflowed to 0. Per-row losses are summed in double over fixed row chunks.
double softmax_xent_forward(const float* logits, const std::uint8_t* labels, std::size_t rows,
                            std::size_t classes, float* probs);
Cost softmax_xent_forward_cost(std::size_t rows, std::size_t classes);  // exp counted as 1 flop

// dlogits = (probs - onehot(labels)) / rows: the gradient of the MEAN loss. dlogits may alias
// probs.
void softmax_xent_backward(const float* probs, const std::uint8_t* labels, std::size_t rows,
                           std::size_t classes, float* dlogits);
Cost softmax_xent_backward_cost(std::size_t rows, std::size_t classes);

// How many rows have their largest score at the label (ties: the first maximum wins, as
// numpy.argmax).
std::size_t argmax_correct(const float* scores, const std::uint8_t* labels, std::size_t rows,
                           std::size_t classes);
Cost argmax_correct_cost(std::size_t rows, std::size_t classes);

}  // namespace concurdl::kernels
