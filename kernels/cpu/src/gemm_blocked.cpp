// GEMM v4 (packed panels, register tile, OpenMP); v3, the cache blocking it builds on, is in
// gemm_v3.cpp.
//
// v4 follows BLIS/GotoBLAS: the five loops around a micro-kernel. Row-major, so the vector
// lanes run along a row of C (the N dimension); that makes op(B) the operand whose micro-panels
// stream from L2 and op(A) the one whose micro-panel stays in L1:
//
//   for ic in M step MC            A block (MC x KC) packed into MR-row panels     -> L3
//     for pc in K step KC            (beta applies on the first pc, then C += ...)
//       for jc in N step NC          B block (KC x NC) packed into NR-column panels -> L2
//         for ir in MC step MR       A micro-panel (MR x KC)                         -> L1
//           for jr in NC step NR     B micro-panel (KC x NR), streamed from L2
//             micro-kernel: C[MR x NR] (+)= A-panel * B-panel, the C tile in registers
//
// Packing copies each operand once per block into the order the micro-kernel reads it (unit
// stride, aligned, zero-padded to whole panels), whatever its transpose and leading dimension:
// the micro-kernel sees one layout. Three shortcuts skip a copy that would not pay for itself:
// with few columns of C the kernel reads A where it lies (read_a_directly), with a short K it
// reads B where it lies (read_b_directly), and a batch of rows times a transposed weight matrix,
// C = X Wᵀ, is computed as Cᵀ = W Xᵀ so that W, the large operand, is the one read in place
// (compute_transposed). The last panel of rows runs a kernel for just those rows, a last panel of
// columns half a tile wide one for just those columns (the micro-kernels: gemm_v4_kernel.hpp).
// Threads split C statically into rectangles of whole tiles
// (one each, no barriers); each C element is computed by one thread with the same K order and
// the same instructions, so the result has the same bits for any thread count.
#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "concurdl/kernels/threads.hpp"
#include "gemm_impl.hpp"
#include "gemm_v4.hpp"
#include "gemm_v4_kernel.hpp"

namespace concurdl::kernels::detail {

// ---------------------------------------------------------------------------------------------
// v4: packed panels and a register tile (the tile's size and the cache blocks: gemm_v4.hpp).
namespace {
using namespace v4;

// Whether the micro-kernel reads A where it lies instead of a packed copy. Packing pays for
// itself when each A micro-panel meets many B panels; with few (the forward pass of a training
// step computed as Zᵀ = W Xᵀ: 64 samples are two panels of 32) copying A costs more than it saves:
// W, 784 x 256 floats, took ~17 us a step to pack on the Zen 5 guest, for 5 uses of each panel.
// Read directly, the MR rows of a micro-panel are MR streams lda floats apart, which the L1 holds
// only when they do not all fall in the same sets: never for a row length of a multiple of 512
// floats (2 KiB), where packing stays.
// Up to eight panels: 64 x 256 x 128 (a training step's layer 1 input gradient) ~20 -> ~18 us,
// square GEMMs of 192 and 256 ~10% faster (Zen 5 guest, 1 thread); four was the limit before.
// A 16-bit A read where it lies is widened a few values of its rows at a time by the kernel
// (micro_kernel_rows), whatever its stride: the broadcasts come from the kernel's small buffer,
// not from the rows. Measured, not derived: the 64 x 1024 x 1024 forward product in fp16, its
// 1024-value rows read this way, took 594 us against 769 for float32's, which packs those rows
// (Zen 5 guest, 1 thread; packed, a 16-bit A is scattered into the panel's order value by value).
constexpr std::size_t kDirectMaxPanels = 8, kAliasingFloats = 512;
static_assert(kDirectMaxPanels * kNR <= kNC);  // a direct A meets a single block of B
bool read_a_directly(const GemmArgs& g) {
  return g.ta == Trans::no && ceil_div(g.n, kNR) <= kDirectMaxPanels &&
         (g.half != Half::none || g.lda % kAliasingFloats != 0);
}

// B read where it lies rather than packed: a B that is not transposed (its micro-panel's rows
// are rows of B, ldb floats apart), float32 or FP16 (widened by the kernel, one VCVTPH2PS a
// vector, for every row panel that reads it), with a short K (a weight gradient's K is the
// batch; the second layer's input gradient's, 128) and whole or half panels only (so that no
// tile reads past the end of a row of B). Its micro-panel is then kc rows of 128 bytes (64 in
// FP16), ldb values apart, read from L2 by every row panel as the packed copy would be. The
// chapter's MLP at batch 64 (Zen 5 guest, 1 thread, the GEMMs alone): the first weight gradient
// (B the 64 x 784 batch) 107-109 -> 105-106 us, the second layer's input gradient (B its
// 128 x 256 weights) 18.3-18.5 -> 16.6-16.9 us; the whole float32 training step, interleaved
// builds, 294-297 -> 293-294 us. FP16's step with the update fused (train_step_mixed), three
// interleaved rounds: 308-314 -> 301-312 us, its ratio to float32's 0.964-0.976 -> 0.979-0.984.
// A longer K was not measured; B is packed there as before. bfloat16 is packed too (this CPU
// multiplies it in gemm_bf16; elsewhere its widening in the kernel is not measured).
constexpr std::size_t kDirectBMaxK = 128;
template <Trans TB, Half H>
bool read_b_directly(const GemmArgs& g) {
  return TB == Trans::no && (H == Half::none || H == Half::fp16) && g.k <= kDirectBMaxK &&
         g.n % kHalfNR == 0;
}

// One thread's share: the BLIS loops over the block C[i0 .. i1, j0 .. j1], with its own packed
// panels, so threads never wait for each other's packing.
// H: the operands' storage (gemm_v4.hpp's packing); the micro-kernel multiplies float32, so
// 16-bit operands are widened as they are packed, or (a direct A) as the kernel reads them.
template <Trans TA, Trans TB, Half H>
void v4_rectangle(const GemmArgs& g, std::size_t i0, std::size_t i1, std::size_t j0,
                  std::size_t j1) {
  thread_local PackBuffer a_buf, b_buf;
  const bool direct = TA == Trans::no && read_a_directly(g);
  const bool direct_b = read_b_directly<TB, H>(g);
  const std::size_t kc_max = std::min(kKC, g.k);
  float* const a_pack =
      direct ? nullptr : a_buf.get(ceil_div(std::min(kMC, i1 - i0), kMR) * kMR * kc_max);
  float* const b_pack =
      direct_b ? nullptr : b_buf.get(kc_max * ceil_div(std::min(kNC, j1 - j0), kNR) * kNR);
  // What the last K block's tiles do with their sums besides storing them, if anything.
  TileFinish last;
  if (g.epilogue != nullptr) last.sgd = g.epilogue->sgd;
  if (tiles_round(g.epilogue)) {
    last.c16 = g.epilogue->c16;
    last.c16_format = g.epilogue->c16_format;
  }
  const TileFinish* const fused = last.sgd != nullptr || last.c16 != nullptr ? &last : nullptr;
  for (std::size_t ic = i0; ic < i1; ic += kMC) {
    const std::size_t mc = std::min(kMC, i1 - ic);
    for (std::size_t pc = 0; pc < g.k; pc += kKC) {
      const std::size_t kc = std::min(kKC, g.k - pc);
      const float beta = pc == 0 ? g.beta : 1.0f;  // later K blocks add to what the first wrote
      const TileFinish* const fin = pc + kc == g.k ? fused : nullptr;  // the last K block's
      if (!direct)
        for (std::size_t r = 0; r * kMR < mc; ++r)
          pack_a_panel<TA, H>(g, ic + r * kMR, std::min(kMR, mc - r * kMR), pc, kc,
                              a_pack + r * kMR * kc);
      for (std::size_t jc = j0; jc < j1; jc += kNC) {
        const std::size_t nc = std::min(kNC, j1 - jc);
        if (!direct_b)
          for (std::size_t s = 0; s * kNR < nc; ++s)
            pack_b_panel<TB, H>(g, pc, kc, jc + s * kNR, std::min(kNR, nc - s * kNR),
                                b_pack + s * kNR * kc);
        // B's micro-panels: packed (float32), or where B lies: float32, or FP16 widened by the
        // kernel as it reads them (BH).
        const auto panels = [&]<Half BH>() {
          const auto& kernels = direct ? kDirectKernels<BH> : kPackedKernels<BH>;
          const auto& half_kernels = direct ? kDirectHalfKernels<BH> : kPackedHalfKernels<BH>;
          for (std::size_t i = 0; i < mc; i += kMR) {  // A micro-panel stays in L1 across this row
            const std::size_t rows = std::min(kMR, mc - i);
            for (std::size_t j = 0; j < nc; j += kNR) {
              const AElem<BH>* bp;
              if constexpr (BH == Half::none)
                bp = direct_b ? g.b + pc * g.ldb + jc + j : b_pack + j * kc;
              else
                bp = g.b16 + pc * g.ldb + jc + j;
              const std::size_t ldb = direct_b ? g.ldb : kNR;
              const std::size_t at = (ic + i) * g.ldc + jc + j;
              float* c = g.c + at;
              const std::size_t cols = std::min(kNR, nc - j);
              // A's micro-panel: packed, float32 where it lies, or 16-bit where it lies (widened
              // into t_widened by the first B panel's kernel, read from there by the others).
              const auto tile = [&](const auto& whole, const auto& half, const auto* ap,
                                    std::size_t lda) {
                if (cols == kNR)  // whole tiles, and the last panel's rows straight into C
                  whole[rows](kc, ap, lda, bp, ldb, g.alpha, beta, c, g.ldc, fin, at);
                else if (cols == kHalfNR)
                  half[rows](kc, ap, lda, bp, ldb, g.alpha, beta, c, g.ldc, fin, at);
                else
                  edge_tile(whole[rows], kc, ap, lda, bp, ldb, g.alpha, beta, c, g.ldc, rows, cols,
                            fin, at);
              };
              if (!direct)
                tile(kernels, half_kernels, a_pack + i * kc, g.lda);
              else if constexpr (H == Half::none)
                tile(kernels, half_kernels, g.a + (ic + i) * g.lda + pc, g.lda);
              else if (j == 0)
                tile(kDirect16Kernels<H, BH>, kDirect16HalfKernels<H, BH>,
                     g.a16 + (ic + i) * g.lda + pc, g.lda);
              else
                tile(kernels, half_kernels, static_cast<const float*>(t_widened), kRowLd);
            }
          }
        };
        if constexpr (H == Half::fp16 && TB == Trans::no) {
          if (direct_b) {
            panels.template operator()<Half::fp16>();
            continue;
          }
        }
        panels.template operator()<Half::none>();
      }
    }
  }
}

// How `threads` threads split C: a grid of tm x tn rectangles (tm * tn = threads), each a whole
// number of MR x NR tiles, chosen to minimise the tiles of the largest rectangle, then the
// panels it packs. Depends on the shape and the count only, never on timing.
struct Grid {
  std::size_t tm = 1, tn = 1;
};
Grid split(std::size_t m, std::size_t n, std::size_t threads) {
  const std::size_t mp = ceil_div(m, kMR), np = ceil_div(n, kNR);
  Grid best;
  std::size_t best_area = SIZE_MAX, best_edge = SIZE_MAX;
  for (std::size_t tm = 1; tm <= threads; ++tm) {
    if (threads % tm != 0) continue;
    const std::size_t tn = threads / tm;
    const std::size_t rows = ceil_div(mp, tm), cols = ceil_div(np, tn);
    const std::size_t area = rows * cols, edge = rows * kMR + cols * kNR;
    if (area < best_area || (area == best_area && edge < best_edge)) {
      best = {tm, tn};
      best_area = area;
      best_edge = edge;
    }
  }
  return best;
}

// Below this many multiply-adds (2M: ~10 us on a Zen 5 core, ~30 us on older ones) a team costs
// more than it saves, and on a busy machine a worker that has to wait for a core can cost
// milliseconds. At 2^21 the 64 x 256 x 128 GEMMs of a training step's second layer are in:
// measured at 2 threads (Zen 5 guest), their three GEMMs 73 -> 43 us a step, the step from
// 208K to 262K samples/s; at 2^22 (the value before) they ran on one thread.
constexpr double kParallelMinMacs = 1 << 21;

// C = A Bᵀ with few rows and many columns, the forward pass of a training step (64 samples times
// Wᵀ, W 256 x 784 as a layer stores it), is computed as its transpose Cᵀ = B Aᵀ: there W is A,
// whose micro-panels the kernel reads where they lie (read_a_directly), and only the 64 rows of
// X are packed; each thread then copies its rectangle of Cᵀ back into C, 8 x 8 at a time. The
// same products in the same order of p: the same bits as the direct computation. Only for
// beta == 0 (C is written, not updated), for whole panels of rows (32, 64, 96 or 128: a batch of
// 14 rows would fill 14 of a transposed tile's 32 columns), and when W's rows do not alias in
// the L1. Also when C has fewer columns than one panel (the last layer's 10 classes): computed
// directly, every tile would be 10 useful columns of 32 through a scratch tile; transposed, its
// 10 rows are one panel of whole tiles (that GEMM 2.9 -> 1.4 us on the Zen 5 guest, 1 thread).
// Its panel limits are the four panels A was read in place up to when it was measured (that
// limit is eight now, kDirectMaxPanels; these stay: C = X Wᵀ of 64 x 256 must still be computed
// transposed, W read in place, rather than with Wᵀ packed).
// 16-bit operands too, whatever W's stride: W, as A, is then widened as the kernel reads it
// (read_a_directly).
constexpr std::size_t kTransposedMaxPanels = 4;
bool compute_transposed(const GemmArgs& g) {
  return g.ta == Trans::no && g.tb == Trans::yes && g.beta == 0.0f && g.m % kNR == 0 &&
         g.m / kNR <= kTransposedMaxPanels &&
         (ceil_div(g.n, kNR) > kTransposedMaxPanels || g.n < kNR) &&
         (g.half != Half::none || g.ldb % kAliasingFloats != 0);
}

template <Trans TA, Trans TB>
void v4_packed(const GemmArgs& g) {
  const double macs =
      static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  const int threads = macs >= kParallelMinMacs ? compute_threads() : 1;
  const bool transposed = TA == Trans::no && TB == Trans::yes && compute_transposed(g);
  thread_local PackBuffer ct_buf;  // the calling thread's: the team writes its rectangles
  GemmArgs w = g;                  // the product the team computes: C, or Cᵀ into ct_buf
  if (transposed) {
    w.m = g.n;
    w.n = g.m;
    w.a = g.b;
    w.lda = g.ldb;
    w.b = g.a;
    w.ldb = g.lda;
    w.a16 = g.b16;
    w.b16 = g.a16;
    w.c = ct_buf.get(g.m * g.n);
    w.ldc = g.m;
    w.epilogue = nullptr;  // C's finish, once Cᵀ is copied back
  }
  // Each thread takes one rectangle of C: no barriers, no shared buffers. The team may be
  // smaller than asked (nested regions), so the grid is made from the team's real size.
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::size_t team = 1, me = 0;
#ifdef _OPENMP
    team = static_cast<std::size_t>(omp_get_num_threads());
    me = static_cast<std::size_t>(omp_get_thread_num());
#endif
    // Transposed, the threads split W's rows: each reads its own share of W. Split by columns
    // (the batch), each would read all of W, and the optimiser's update after the backward pass
    // would then find W's lines in the other core's cache (SGD 16 -> 24 us a step at 2 threads).
    // A narrow C (fewer columns than a panel: Cᵀ has one panel of rows) has no rows of W to
    // share out, and is split as any product is.
    const Grid grid =
        transposed && ceil_div(w.m, kMR) >= team ? Grid{team, 1} : split(w.m, w.n, team);
    const std::size_t mp = ceil_div(w.m, kMR), np = ceil_div(w.n, kNR);
    const std::size_t ti = me / grid.tn, tj = me % grid.tn;
    // Rectangle ti of tm: tiles [ti * mp / tm, (ti + 1) * mp / tm), in elements, clipped to C.
    const std::size_t i0 = std::min(w.m, ti * mp / grid.tm * kMR);
    const std::size_t i1 = std::min(w.m, (ti + 1) * mp / grid.tm * kMR);
    const std::size_t j0 = std::min(w.n, tj * np / grid.tn * kNR);
    const std::size_t j1 = std::min(w.n, (tj + 1) * np / grid.tn * kNR);
    if (i0 < i1 && j0 < j1) {
      if (g.half == Half::fp16)
        v4_rectangle<TA, TB, Half::fp16>(w, i0, i1, j0, j1);
      else if (g.half == Half::bf16)
        v4_rectangle<TA, TB, Half::bf16>(w, i0, i1, j0, j1);
      else
        v4_rectangle<TA, TB, Half::none>(w, i0, i1, j0, j1);
      // The epilogue (gemm.hpp) on this thread's rectangle of C, while it is in this core's cache.
      // With sgd, or c16 alone, the rectangle's tiles applied it themselves.
      if (transposed) {
        transpose_back(w.c, w.ldc, g.c, g.ldc, i0, i1, j0, j1);
        finish_c(g, j0, j1, i0, i1);
      } else if (g.epilogue == nullptr ||
                 (g.epilogue->sgd == nullptr && !tiles_round(g.epilogue))) {
        finish_c(g, i0, i1, j0, j1);
      }
    }
  }
}

}  // namespace

void gemm_v4(const GemmArgs& g) {
  if (g.k == 0) {
    scale_c(g);
    return finish_c(g, 0, g.m, 0, g.n);
  }
  if (g.ta == Trans::no)
    g.tb == Trans::no ? v4_packed<Trans::no, Trans::no>(g) : v4_packed<Trans::no, Trans::yes>(g);
  else
    g.tb == Trans::no ? v4_packed<Trans::yes, Trans::no>(g) : v4_packed<Trans::yes, Trans::yes>(g);
}

}  // namespace concurdl::kernels::detail

namespace concurdl::kernels {
GemmBlocking gemm_v4_blocking() {
  using namespace detail;
  return {.mr = kMR, .nr = kNR, .kc = kKC, .mc = kMC, .nc = kNC, .lanes = kLanes};
}
}  // namespace concurdl::kernels
