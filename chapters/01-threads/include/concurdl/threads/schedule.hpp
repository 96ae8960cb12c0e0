// Load imbalance: a Mandelbrot image, row by row, split among threads six ways. A row that
// crosses the set costs up to max_iter iterations per pixel, a row outside it a handful, so
// equal numbers of rows are not equal amounts of work. The lesson: a static split in contiguous
// blocks leaves threads idle while one finishes the heavy block; interleaving rows (static,1),
// handing them out on demand (dynamic, an atomic counter) or in shrinking chunks (guided)
// balances the load, at the price of a little scheduling overhead per chunk.
//
// Run: concurdl run ch01/schedule_imbalance      Tests: ch01_tests --gtest_filter='Schedule*'
//
// The window is the upper half-plane only (y from 0 up), on purpose: the full Mandelbrot set is
// symmetric about the real axis, so two contiguous blocks of rows would get equal work by
// accident and hide the imbalance at two threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/threads/thread_pool.hpp"

namespace concurdl::threads {

struct MandelbrotView {
  int rows = 256;  // what the schedules split
  int cols = 512;
  int max_iter = 512;
  double x_min = -2.2, x_max = 0.8;  // real part, left to right
  double y_min = 0.0, y_max = 1.2;   // imaginary part, first row to last
};

// One row of escape-iteration counts. Every variant calls this very function: `noinline` keeps
// the compiler from inlining it into one schedule and contracting its floating-point arithmetic
// differently (FMA) there, which would change a few counts and break the exact comparison.
[[gnu::noinline]] inline void mandelbrot_row(const MandelbrotView& v, int row, std::uint32_t* out) {
  const double dx = (v.x_max - v.x_min) / v.cols;
  const double dy = (v.y_max - v.y_min) / v.rows;
  const double ci = v.y_min + (row + 0.5) * dy;
  for (int c = 0; c < v.cols; ++c) {
    const double cr = v.x_min + (c + 0.5) * dx;
    double zr = 0, zi = 0;
    int k = 0;
    for (; k < v.max_iter; ++k) {  // 8 FLOPs per iteration
      const double zr2 = zr * zr, zi2 = zi * zi;
      if (zr2 + zi2 > 4.0) break;
      zi = 2.0 * zr * zi + ci;
      zr = zr2 - zi2 + cr;
    }
    out[c] = static_cast<std::uint32_t>(k);
  }
}

inline constexpr double kMandelbrotFlopsPerIteration = 8;

inline std::size_t image_size(const MandelbrotView& v) {
  return static_cast<std::size_t>(v.rows) * static_cast<std::size_t>(v.cols);
}

// The reference every variant must equal exactly (integer counts: no tolerance needed).
inline std::vector<std::uint32_t> mandelbrot_serial(const MandelbrotView& v) {
  std::vector<std::uint32_t> image(image_size(v));
  for (int r = 0; r < v.rows; ++r) mandelbrot_row(v, r, image.data() + std::size_t(r) * v.cols);
  return image;
}

// Total iterations of an image: the work actually done (FLOPs = 8 x this).
inline std::uint64_t total_iterations(const std::vector<std::uint32_t>& image) {
  std::uint64_t s = 0;
  for (std::uint32_t k : image) s += k;
  return s;
}

// Every variant fills `image` (rows x cols) using `threads` threads. Pool variants run on
// `pool`, which must have exactly `threads` workers (made once, outside the timed region, as a
// framework keeps its pool); OpenMP variants ignore it (OpenMP keeps its own team alive).
using RenderFn = void (*)(const MandelbrotView& v, std::uint32_t* image, int threads,
                          ThreadPool* pool);

namespace detail {
inline std::uint32_t* row_ptr(const MandelbrotView& v, std::uint32_t* image, int r) {
  return image + std::size_t(r) * std::size_t(v.cols);
}
inline void require_pool(ThreadPool* pool, int threads) {
  if (pool == nullptr || pool->size() != static_cast<unsigned>(threads))
    throw std::invalid_argument(
        "schedule: a pool variant needs a ThreadPool with `threads` workers");
}
}  // namespace detail

// schedule(static): rows / threads contiguous rows each. Zero overhead, but the thread that gets
// the rows through the set's body does most of the work while the others wait at the barrier.
inline void render_omp_static(const MandelbrotView& v, std::uint32_t* image, int threads,
                              ThreadPool*) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < v.rows; ++r) mandelbrot_row(v, r, detail::row_ptr(v, image, r));
}

// schedule(static, 1): rows dealt round-robin, like cards. Neighbouring rows cost about the
// same, so every thread gets a fair sample of heavy and light rows, still with no runtime cost.
inline void render_omp_static_chunk1(const MandelbrotView& v, std::uint32_t* image, int threads,
                                     ThreadPool*) {
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int r = 0; r < v.rows; ++r) mandelbrot_row(v, r, detail::row_ptr(v, image, r));
}

// schedule(dynamic): a thread takes the next row when it is free (a shared counter). Balances
// any work distribution, at one atomic operation per row.
inline void render_omp_dynamic(const MandelbrotView& v, std::uint32_t* image, int threads,
                               ThreadPool*) {
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int r = 0; r < v.rows; ++r) mandelbrot_row(v, r, detail::row_ptr(v, image, r));
}

// schedule(guided): big chunks first (remaining / threads), shrinking towards one row: fewer
// trips to the counter than dynamic, small chunks at the end to even out the finish.
inline void render_omp_guided(const MandelbrotView& v, std::uint32_t* image, int threads,
                              ThreadPool*) {
#pragma omp parallel for num_threads(threads) schedule(guided)
  for (int r = 0; r < v.rows; ++r) mandelbrot_row(v, r, detail::row_ptr(v, image, r));
}

// The pool, one task per worker, each a contiguous block: omp_static done by hand, with the
// same imbalance plus a queue round trip per task.
inline void render_pool_static_blocks(const MandelbrotView& v, std::uint32_t* image, int threads,
                                      ThreadPool* pool) {
  detail::require_pool(pool, threads);
  std::vector<std::future<void>> done;
  done.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    const int begin = static_cast<int>(std::int64_t(v.rows) * t / threads);
    const int end = static_cast<int>(std::int64_t(v.rows) * (t + 1) / threads);
    done.push_back(pool->submit([&v, image, begin, end] {
      for (int r = begin; r < end; ++r) mandelbrot_row(v, r, detail::row_ptr(v, image, r));
    }));
  }
  for (auto& f : done) f.get();  // also the happens-before edge that publishes the rows
}

// The pool, one task per worker, each pulling the next row from a shared atomic counter until
// none is left: omp_dynamic done by hand (self-scheduling), one fetch_add per row.
inline void render_pool_dynamic_rows(const MandelbrotView& v, std::uint32_t* image, int threads,
                                     ThreadPool* pool) {
  detail::require_pool(pool, threads);
  std::atomic<int> next_row{0};
  std::vector<std::future<void>> done;
  done.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    done.push_back(pool->submit([&v, image, &next_row] {
      // relaxed: the counter only hands out distinct rows; the futures publish the results.
      for (int r; (r = next_row.fetch_add(1, std::memory_order_relaxed)) < v.rows;)
        mandelbrot_row(v, r, detail::row_ptr(v, image, r));
    }));
  }
  for (auto& f : done) f.get();
}

// Who runs a row's threads: OpenMP's team, or a ThreadPool of `threads` workers.
enum class Runner { openmp, pool };
struct ScheduleVariant : VariantInfo {
  Runner runner;
  RenderFn render;
};

// Simplest first. A new schedule is a new function and a new row; nothing else changes.
inline constexpr ScheduleVariant kScheduleRows[] = {
    {{"omp_static",
      "contiguous blocks of rows: no overhead, but the heavy rows land on one thread and the "
      "others wait at the join"},
     Runner::openmp,
     render_omp_static},
    {{"omp_static_chunk1",
      "rows dealt round-robin: each thread samples heavy and light rows alike, so the load "
      "evens out"},
     Runner::openmp,
     render_omp_static_chunk1},
    {{"omp_dynamic",
      "the next free thread takes the next row: balances any load, one atomic per row"},
     Runner::openmp,
     render_omp_dynamic},
    {{"omp_guided",
      "shrinking chunks: dynamic's balance with fewer trips to the shared counter, but the "
      "first chunk (remaining/threads) can be the heavy half"},
     Runner::openmp,
     render_omp_guided},
    {{"pool_static_blocks",
      "ThreadPool, one contiguous block per worker: omp_static by hand, and as unbalanced"},
     Runner::pool,
     render_pool_static_blocks},
    {{"pool_dynamic_rows",
      "ThreadPool, workers pull rows from an atomic counter (one fetch_add per row): dynamic "
      "by hand"},
     Runner::pool,
     render_pool_dynamic_rows},
};
inline constexpr VariantTable kScheduleVariants{kScheduleRows};

}  // namespace concurdl::threads
