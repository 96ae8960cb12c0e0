// Single-precision GEMM, row-major: C = alpha * op(A) * op(B) + beta * C, where op(A) is M x K
// and op(B) is K x N. Four versions of the suite's own, each a step of the lesson, and
// OpenBLAS's cblas_sgemm as the peer:
//   v1_naive      i-j-k loops: the inner loop walks B down a column (stride N): a cache miss
//                 per multiply-add once B outgrows the cache
//   v2_ikj        i-k-j loops: the inner loop walks B and C along rows (unit stride), so it
//                 vectorises; no reuse beyond one row
//   v3_blocked    cache blocking: C is computed in tiles whose A and B panels stay in cache
//   v4_register   blocking with packed panels and an MR x NR register tile (the micro-kernel
//                 keeps the C tile in vector registers across the K loop), OpenMP over tiles
//   openblas      cblas_sgemm
// Every version takes the same arguments (transposes, leading dimensions, alpha, beta) and is
// validated against a double-precision reference (reference.hpp). Threads: v4 and OpenBLAS
// use compute_threads() (threads.hpp); v1-v3 are single-threaded by design.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/kernels/cost.hpp"

namespace concurdl::kernels {

enum class Trans : bool { no = false, yes = true };

enum class GemmVersion { v1_naive, v2_ikj, v3_blocked, v4_register, openblas };

// The versions as a variant table (variants.hpp), in lesson order: the experiments' "variant"
// axis and the tests iterate over it. CUDA versions will be rows needing Capability::cuda.
struct GemmVariant : VariantInfo {
  GemmVersion version;
  bool multithreaded;  // runs on compute_threads(); v1-v3 use one thread by design
};
const VariantTable<GemmVariant>& gemm_variants();

// "v1_naive", ... "openblas" (the table's names); and back (returns false on an unknown name).
std::string_view gemm_version_name(GemmVersion v);
bool parse_gemm_version(std::string_view name, GemmVersion& out);
const std::vector<GemmVersion>& gemm_versions();  // all five, in lesson order

// Row-major: op(A) is m x k, stored as A (m x k, lda >= k) or, transposed, A (k x m, lda >= m);
// likewise B; C is m x n with ldc >= n. m, n or k may be 0. beta == 0 means C is written, never
// read (so it may hold NaN or garbage). Throws std::invalid_argument on a leading dimension
// smaller than its row. Safe to call from several threads at once (v4's packing buffers are per
// thread). v4 gives the same bits for any compute_threads().
void gemm(GemmVersion v, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
          float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
          float* c, std::size_t ldc);

// An element-wise finish of C, fused into the product: each part of C gets it from the thread
// that computed it, while it is in that core's cache (v4: each thread's rectangle; the other
// versions: all of C on the calling thread once it is done). In order: C(i, j) += bias[j];
// with relu, C(i, j) = C(i, j) > 0 ? C(i, j) : 0; with relu_of (m x n, leading dimension
// ld_relu_of), C(i, j) = relu_of(i, j) > 0 ? C(i, j) : 0 (a ReLU's gradient, relu_of being
// its output). The expressions of ops.hpp's add_bias_rows, relu_forward and relu_backward, so
// the bits are those of the product followed by those calls; a layer's forward and backward
// no longer read C back on one thread after the GEMM's team wrote it.
//
// Or, instead of any of those, a fused optimiser step: C is the gradient of params (m x n, laid
// out as C, leading dimension ldc), and each element of the product, once computed, is applied
// as sgd_update (ops.hpp) to params and velocity: the same bits as the product stored in C and
// then a momentum-SGD pass over C, without C's round trip through the cache (a weight gradient
// of 784 x 256 is 800 KiB: written by the GEMM and read back by the update, it went through L3).
// C must still be an m x n buffer (leading dimension ldc) and its contents afterwards are
// unspecified (v4 does not write it on a whole tile; partial sums of a long K, edge tiles and
// the other versions go through it). C, params and velocity must not overlap each other or A
// and B (the same pointer twice is std::invalid_argument). alpha must be 1 and beta 0: other
// values would round the gradient differently once fused.
//
// The gradient each element receives is the product times grad_scale (1 unless set: a mixed-
// precision step's 1 / loss scale, a power of two, so the division is exact). With params16, the
// updated parameter is also rounded (to nearest even) into params16 at the same offset, in the
// 16-bit format `params16_format`: the next mixed-precision step's working copy, written while
// the parameter is in a register rather than by a pass of its own.
enum class Half : unsigned char { none, fp16, bf16 };
struct GemmSgd {
  float* params = nullptr;
  float* velocity = nullptr;
  float lr = 0.0f, momentum = 0.0f, weight_decay = 0.0f;
  float grad_scale = 1.0f;
  std::uint16_t* params16 = nullptr;
  Half params16_format = Half::none;
};
// GemmSgd's update applied to a 16-bit gradient (format's bits) that was summed elsewhere: per
// parameter, g = widen(grads16[i]), with grad_scale != 1 sgd_update_scaled (g * grad_scale kept
// apart from the update's adds), else sgd_update; params and velocity updated in place, and
// params16 (when not null) the parameters rounded to format. A vector at a time: the same bits
// as those element-wise calls and to_bf16 / to_fp16 of the results.
void sgd_update_16bit(Half format, float* params, float* velocity, const std::uint16_t* grads16,
                      float grad_scale, float lr, float momentum, float weight_decay,
                      std::uint16_t* params16, std::size_t n);

// Or C rounded (to nearest even) into c16, in the 16-bit format c16_format, laid out as C
// (leading dimension ldc), after the bias and ReLU if any: a mixed-precision step's 16-bit
// weight gradient written by the GEMM rather than by a pass of its own over a float32 C (the
// first layer's 784 x 256 gradient: 800 KiB written, read back and rounded). The same bits as
// the float32 C and to_bf16 / to_fp16 of it. C must still be an m x n buffer; its contents
// afterwards are unspecified (v4 does not write the tiles it rounds, edge tiles included: they
// round from a scratch tile; partial sums of a long K, a bias or ReLU, the transposed shortcut
// and the other versions go through C). Not with sgd; c16 must not
// overlap C, A or B.
struct GemmEpilogue {
  const float* bias = nullptr;
  bool relu = false;
  const float* relu_of = nullptr;
  std::size_t ld_relu_of = 0;
  const GemmSgd* sgd = nullptr;
  std::uint16_t* c16 = nullptr;
  Half c16_format = Half::none;
};
void gemm(GemmVersion v, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
          float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
          float* c, std::size_t ldc, const GemmEpilogue& epilogue);

// The same product with both operands 16-bit (fp16 or bf16 bits, as `format` says), widened to
// float32 while they are packed, or, for an A that v4 reads where it lies (its shortcuts, above
// gemm_blocked.cpp's loops), a few values of each row at a time as the micro-kernel reads them
// (F16C's VCVTPH2PS for fp16 where the build targets it; a shift for bf16): GEMM v4's loops,
// tiles and order of sums, so the bits are those of widening both operands into float32 buffers
// and calling gemm(v4_register, ...), without those buffers and the passes that fill them. The
// epilogue as gemm takes it. alpha is 1. std::invalid_argument for Half::none or a leading
// dimension smaller than its row.
void gemm_16bit(Half format, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                const std::uint16_t* a, std::size_t lda, const std::uint16_t* b, std::size_t ldb,
                float beta, float* c, std::size_t ldc, const GemmEpilogue& epilogue = {});

// 2mnk FLOPs (plus mn for beta != 0 is not counted, as BLAS benchmarks do not); bytes: A and B
// read once, C read (beta != 0) and written once.
Cost gemm_cost(std::size_t m, std::size_t n, std::size_t k, bool reads_c = true);

// v4's blocking as compiled for this target (-march decides the vector width): the register
// tile is mr x nr, the A micro-panel mr x kc, the B block kc x nc, the A block mc x kc.
struct GemmBlocking {
  std::size_t mr, nr, kc, mc, nc, lanes;
};
GemmBlocking gemm_v4_blocking();

// The kernel family OpenBLAS picked for this CPU ("SkylakeX", "Haswell", ...). A build with
// DYNAMIC_ARCH falls back to "Prescott" (SSE3) on a CPU it does not recognise, e.g. a VM that
// hides the CPU model: then it is no fair peer, and OPENBLAS_CORETYPE=SkylakeX (or Haswell)
// in the environment of the program fixes it.
std::string openblas_core();
// True when openblas_core() names a kernel older than the vector extensions this CPU has.
bool openblas_core_is_generic();

}  // namespace concurdl::kernels
