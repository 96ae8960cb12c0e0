// Reductions, element-wise ops and softmax cross-entropy (ops.hpp). Each parallel reduction is a
// static OpenMP loop over a fixed partition (chunks of kReduceChunk elements, blocks of rows or
// columns) whose size never depends on the thread count, so every result is bit-identical at
// any number of threads; `if(...)` keeps inputs too small to pay for the team on one thread.
// The element-wise ops split [0, n) however (for_range), and run inputs below kParallelMin as
// plain loops on the calling thread.
#include "concurdl/kernels/ops.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/kernels/threads.hpp"

namespace concurdl::kernels {

namespace {

constexpr std::size_t kLanes = 8;  // interleaved accumulators: independent adds that vectorise

constexpr double fl(std::size_t n) { return static_cast<double>(n); }
constexpr double kF = sizeof(float);

// Sums f(begin, end) over fixed chunks of [0, n), the partials added in chunk order.
template <class ChunkFn>
double reduce_chunks(std::size_t n, std::size_t chunk, bool parallel, ChunkFn f) {
  const std::size_t chunks = (n + chunk - 1) / chunk;
  if (chunks <= 1) return n == 0 ? 0.0 : f(std::size_t{0}, n);
  std::vector<double> partial(chunks);
#pragma omp parallel for num_threads(compute_threads()) schedule(static) if (parallel)
  for (std::size_t i = 0; i < chunks; ++i) partial[i] = f(i * chunk, std::min(n, (i + 1) * chunk));
  double s = 0;
  for (const double p : partial) s += p;
  return s;
}

// e^x for x <= 0 (a logit minus its row's max), in float operations only, so that a loop of
// it vectorises (std::exp is a call per element: 640 of them were ~2.5 us of a training step's
// 3.9 us loss on the Zen 5 guest, 1.3 us after). x = n ln 2 + r with n = round(x / ln 2) (adding
// 1.5 * 2^23 rounds to nearest) and |r| <= ln 2 / 2, ln 2 in two parts (Cody-Waite) so that r
// is exact to a float; e^r by its Taylor series to r^6 (truncation below 1.2e-7 relative at
// |r| = 0.35); 2^n added to the exponent field. Within 4 ulp of e^x (test_ops). x below -87
// gives e^-87 (~1.6e-38, not 0): a probability that small is 0 to the loss and the gradient
// alike. NaN stays NaN. The same instructions for every element of a block, so the bits depend
// on the data alone, never on the thread count.
inline float exp_lanes(float in) {
  const bool nan = in != in;  // NaN stays NaN, as std::exp keeps it, and n stays a number
  const float x = nan ? 0.0f : in < -87.0f ? -87.0f : in;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504f + kShift) - kShift;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860676533018e-06f;
  float e = 1.0f / 720.0f;
  e = e * r + 1.0f / 120.0f;
  e = e * r + 1.0f / 24.0f;
  e = e * r + 1.0f / 6.0f;
  e = e * r + 0.5f;
  e = e * r + 1.0f;
  e = e * r + 1.0f;
  const float scaled =
      std::bit_cast<float>(std::bit_cast<std::int32_t>(e) + (static_cast<std::int32_t>(n) << 23));
  return nan ? in : scaled;
}

float combine_lanes(const float (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

float chunk_sum(const float* x, std::size_t n) {
  float acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) acc[j] += x[i + j];
  float s = combine_lanes(acc);
  for (; i < n; ++i) s += x[i];
  return s;
}

float chunk_dot(const float* x, const float* y, std::size_t n) {
  float acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) acc[j] += x[i + j] * y[i + j];
  float s = combine_lanes(acc);
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

void check_labels(const char* who, const std::uint8_t* labels, std::size_t rows,
                  std::size_t classes) {
  if (classes == 0 && rows > 0) throw std::invalid_argument(std::string(who) + ": no classes");
  for (std::size_t r = 0; r < rows; ++r)
    if (labels[r] >= classes)
      throw std::invalid_argument(std::string(who) + ": label " + std::to_string(labels[r]) +
                                  " of row " + std::to_string(r) + " is not a class (0.." +
                                  std::to_string(classes - 1) + ")");
}

}  // namespace

// ---- reductions -------------------------------------------------------------------------

float sum(const float* x, std::size_t n) {
  return static_cast<float>(
      reduce_chunks(n, kReduceChunk, n >= kParallelMin,
                    [x](std::size_t b, std::size_t e) { return double{chunk_sum(x + b, e - b)}; }));
}
Cost sum_cost(std::size_t n) { return {fl(n), kF * fl(n)}; }

float dot(const float* x, const float* y, std::size_t n) {
  return static_cast<float>(reduce_chunks(
      n, kReduceChunk, n >= kParallelMin,
      [x, y](std::size_t b, std::size_t e) { return double{chunk_dot(x + b, y + b, e - b)}; }));
}
Cost dot_cost(std::size_t n) { return {2 * fl(n), 2 * kF * fl(n)}; }

float max_value(const float* x, std::size_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (n == 0) return kNegInf;
  const std::size_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<float> partial(chunks, kNegInf);
  std::vector<unsigned char> saw_nan(chunks, 0);
#pragma omp parallel for num_threads(compute_threads()) schedule(static) if (n >= kParallelMin)
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t b = c * kReduceChunk, e = std::min(n, b + kReduceChunk);
    float acc[kLanes];
    std::fill(acc, acc + kLanes, kNegInf);
    bool nan = false;
    std::size_t i = b;
    for (; i + kLanes <= e; i += kLanes)
      for (std::size_t j = 0; j < kLanes; ++j) {
        const float v = x[i + j];
        nan |= v != v;
        acc[j] = v > acc[j] ? v : acc[j];
      }
    float m = *std::max_element(acc, acc + kLanes);
    for (; i < e; ++i) {
      nan |= x[i] != x[i];
      m = x[i] > m ? x[i] : m;
    }
    partial[c] = m;
    saw_nan[c] = nan ? 1 : 0;
  }
  if (std::find(saw_nan.begin(), saw_nan.end(), 1) != saw_nan.end())
    return std::numeric_limits<float>::quiet_NaN();
  return *std::max_element(partial.begin(), partial.end());
}
Cost max_cost(std::size_t n) { return {fl(n), kF * fl(n)}; }

void column_sums(const float* x, std::size_t rows, std::size_t cols, std::size_t ldx, float* out,
                 float beta) {
  constexpr std::size_t kBlock = 64;  // columns per task: 4 cache lines of each row
  const std::size_t blocks = (cols + kBlock - 1) / kBlock;
  // Whole blocks of columns per thread (for_range: a plain loop below kParallelMin, which GCC
  // vectorises; an OpenMP loop whose `if` kept it on one thread did not, and the bias gradients
  // of a training step took 2.5 us): each column summed over the rows in order, whatever the
  // split.
  for_range(blocks, rows * cols >= kParallelMin && blocks > 1, [=](std::size_t b0, std::size_t b1) {
    for (std::size_t blk = b0; blk < b1; ++blk) {
      const std::size_t c0 = blk * kBlock, w = std::min(cols, c0 + kBlock) - c0;
      float acc[kBlock] = {};
      for (std::size_t r = 0; r < rows; ++r) {
        const float* row = x + r * ldx + c0;
        for (std::size_t j = 0; j < w; ++j) acc[j] += row[j];
      }
      for (std::size_t j = 0; j < w; ++j)
        out[c0 + j] = beta == 0.0f ? acc[j] : beta * out[c0 + j] + acc[j];
    }
  });
}
Cost column_sums_cost(std::size_t rows, std::size_t cols) {
  return {fl(rows) * fl(cols), kF * (fl(rows) * fl(cols) + fl(cols))};
}

// ---- element-wise -----------------------------------------------------------------------

void add_bias_rows(float* y, std::size_t rows, std::size_t cols, std::size_t ldy, const float* b) {
  for_range(rows, rows * cols >= kParallelMin, [=](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      float* row = y + r * ldy;
      for (std::size_t c = 0; c < cols; ++c) row[c] += b[c];
    }
  });
}
Cost add_bias_rows_cost(std::size_t rows, std::size_t cols) {
  return {fl(rows) * fl(cols), kF * (2 * fl(rows) * fl(cols) + fl(cols))};
}

void relu_forward(const float* x, float* y, std::size_t n) {
  for_range(n, n >= kParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) y[i] = relu(x[i]);
  });
}
Cost relu_forward_cost(std::size_t n) { return {fl(n), 2 * kF * fl(n)}; }

void relu_backward(const float* act, float* dx, std::size_t n) {
  for_range(n, n >= kParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) dx[i] = relu_grad(act[i], dx[i]);
  });
}
Cost relu_backward_cost(std::size_t n) { return {fl(n), 3 * kF * fl(n)}; }

void axpy(std::size_t n, float a, const float* x, float* y) {
  for_range(n, n >= kParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) y[i] += a * x[i];
  });
}
Cost axpy_cost(std::size_t n) { return {2 * fl(n), 3 * kF * fl(n)}; }

void scale(std::size_t n, float a, float* x) {
  for_range(n, n >= kParallelMin, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) x[i] *= a;
  });
}
Cost scale_cost(std::size_t n) { return {fl(n), 2 * kF * fl(n)}; }

// ---- softmax cross-entropy ----------------------------------------------------------------

double softmax_xent_forward(const float* logits, const std::uint8_t* labels, std::size_t rows,
                            std::size_t classes, float* probs) {
  check_labels("softmax_xent_forward", labels, rows, classes);
  if (rows == 0) return 0.0;
  // Rows per chunk: the unit of the loss's summation order, independent of the thread count.
  const std::size_t chunk =
      std::max<std::size_t>(1, kReduceChunk / std::max<std::size_t>(1, classes));
  const std::size_t chunks = (rows + chunk - 1) / chunk;
  // A block of rows at a time: each row's max subtracted (p = z - max), then exp over the
  // whole block as one flat loop, which vectorises (exp_lanes), then each row's sum, in order.
  constexpr std::size_t kBlockRows = 64;
  auto chunk_loss = [=](std::size_t c) {
    double loss = 0;
    const std::size_t r_end = std::min(rows, (c + 1) * chunk);
    for (std::size_t r0 = c * chunk; r0 < r_end; r0 += kBlockRows) {
      const std::size_t r1 = std::min(r_end, r0 + kBlockRows);
      float z_label[kBlockRows];
      for (std::size_t r = r0; r < r1; ++r) {
        const float* z = logits + r * classes;
        float* p = probs + r * classes;
        float m = z[0];
        for (std::size_t k = 1; k < classes; ++k) m = z[k] > m ? z[k] : m;
        z_label[r - r0] = z[labels[r]] - m;  // read before p (which may be z) is written
        for (std::size_t k = 0; k < classes; ++k) p[k] = z[k] - m;
      }
      float* block = probs + r0 * classes;
      for (std::size_t i = 0; i < (r1 - r0) * classes; ++i) block[i] = exp_lanes(block[i]);
      for (std::size_t r = r0; r < r1; ++r) {
        float* p = probs + r * classes;
        float s = 0;
        for (std::size_t k = 0; k < classes; ++k) s += p[k];
        const float inv = 1.0f / s;
        for (std::size_t k = 0; k < classes; ++k) p[k] *= inv;
        loss += std::log(double{s}) - double{z_label[r - r0]};
      }
    }
    return loss;
  };
  // The chunks' losses added in chunk order either way. Below kParallelMin (a training batch's
  // 64 x 10 logits) no OpenMP region and no vector of partial sums: 4.2 -> ~2 us a step.
  double total = 0;
  if (rows * classes < kParallelMin) {
    for (std::size_t c = 0; c < chunks; ++c) total += chunk_loss(c);
    return total / fl(rows);
  }
  std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for num_threads(compute_threads()) schedule(static)
  for (std::size_t c = 0; c < chunks; ++c) partial[c] = chunk_loss(c);
  for (const double p : partial) total += p;
  return total / fl(rows);
}
Cost softmax_xent_forward_cost(std::size_t rows, std::size_t classes) {
  // per element: max, subtract, exp, add, scale
  return {5 * fl(rows) * fl(classes), kF * 2 * fl(rows) * fl(classes) + fl(rows)};
}

void softmax_xent_backward(const float* probs, const std::uint8_t* labels, std::size_t rows,
                           std::size_t classes, float* dlogits) {
  check_labels("softmax_xent_backward", labels, rows, classes);
  if (rows == 0) return;
  const float inv = 1.0f / static_cast<float>(rows);
  for_range(rows, rows * classes >= kParallelMin, [=](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const float* p = probs + r * classes;
      float* d = dlogits + r * classes;
      for (std::size_t k = 0; k < classes; ++k)
        d[k] = (p[k] - (k == labels[r] ? 1.0f : 0.0f)) * inv;
    }
  });
}
Cost softmax_xent_backward_cost(std::size_t rows, std::size_t classes) {
  return {2 * fl(rows) * fl(classes), kF * 2 * fl(rows) * fl(classes) + fl(rows)};
}

std::size_t argmax_correct(const float* scores, const std::uint8_t* labels, std::size_t rows,
                           std::size_t classes) {
  if (classes == 0) return 0;
  const std::size_t chunk = std::max<std::size_t>(1, kReduceChunk / classes);
  const bool parallel = rows * classes >= kParallelMin;
  const double n = reduce_chunks(rows, chunk, parallel, [=](std::size_t b, std::size_t e) {
    std::size_t hits = 0;
    for (std::size_t r = b; r < e; ++r) {
      const float* s = scores + r * classes;
      std::size_t best = 0;
      for (std::size_t k = 1; k < classes; ++k)
        if (s[k] > s[best]) best = k;
      hits += best == labels[r] ? 1 : 0;
    }
    return static_cast<double>(hits);
  });
  return static_cast<std::size_t>(n);
}
Cost argmax_correct_cost(std::size_t rows, std::size_t classes) {
  return {fl(rows) * fl(classes), kF * fl(rows) * fl(classes) + fl(rows)};
}

}  // namespace concurdl::kernels
