// A block of a tiled GEMM kernel run on the CPU, as the GPU runs it: every thread's load, then
// (the __syncthreads) every thread's accumulate, tile after tile, then every thread's store;
// and the check that the result is the CPU's product for shapes that are and are not multiples
// of the tile. Small integers make every product exact. Used by the tests of v3
// (test_gemm_tiles.cpp) and of exercise 4.1 (test_exercises.cpp).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "concurdl/gpu/gemm_tiles.hpp"
#include "concurdl/gpu/reference.hpp"

namespace concurdl::gpu::sim {

inline const GemmShape kShapes[] = {{1, 1, 1},   {5, 7, 3},     {32, 32, 32}, {33, 65, 31},
                                    {64, 64, 8}, {70, 130, 17}, {128, 64, 96}};

// run(a, b, c, shape) must leave the product in c, for every shape of kShapes.
template <class Run>
void check_product(Run run, const char* version) {
  for (const GemmShape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << version << " " << s.m << " x " << s.n << " x " << s.k);
    const auto a = small_integers(static_cast<std::size_t>(s.m) * s.k, 1);
    const auto b = small_integers(static_cast<std::size_t>(s.k) * s.n, 2);
    std::vector<float> c(static_cast<std::size_t>(s.m) * s.n, -999.0f);
    run(a.data(), b.data(), c.data(), s);
    ASSERT_EQ(c, gemm_ref(a, b, s.m, s.n, s.k));
  }
}

// One Tile x Tile block of threads per tile of C, its phases run in the kernel's order.
template <int Tile, class Load, class Accumulate, class Store>
void run_tiled(const float* a, const float* b, float* c, GemmShape s, Load load,
               Accumulate accumulate, Store store) {
  std::vector<float> as(Tile * Tile), bs(Tile * Tile);
  for (int bx = 0; bx * Tile < s.n; ++bx)
    for (int by = 0; by * Tile < s.m; ++by) {
      std::vector<float> acc(Tile * Tile, 0.0f);
      for (int t = 0; t * Tile < s.k; ++t) {
        for (int ty = 0; ty < Tile; ++ty)
          for (int tx = 0; tx < Tile; ++tx) load(a, b, s, bx, by, t, tx, ty, as.data(), bs.data());
        for (int ty = 0; ty < Tile; ++ty)
          for (int tx = 0; tx < Tile; ++tx)
            acc[ty * Tile + tx] = accumulate(as.data(), bs.data(), tx, ty, acc[ty * Tile + tx]);
      }
      for (int ty = 0; ty < Tile; ++ty)
        for (int tx = 0; tx < Tile; ++tx) store(c, s, bx, by, tx, ty, acc[ty * Tile + tx]);
    }
}

}  // namespace concurdl::gpu::sim
