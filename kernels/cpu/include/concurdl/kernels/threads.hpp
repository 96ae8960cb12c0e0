// How many threads the compute kernels use: the suite's own OpenMP kernels (GEMM v4, the
// element-wise ops) and OpenBLAS alike. One setting, so that "--threads 2" means two threads
// for every kernel a training step calls, and so that a run is reproducible: every kernel's
// work split depends only on this count, never on timing.
#pragma once

namespace concurdl::kernels {

// n >= 1. Also sets OpenBLAS's thread count. Not thread-safe against kernels running at the
// same time: set it between steps.
void set_compute_threads(int n);
// The current setting; initially the hardware threads of this process (its affinity mask).
int compute_threads();

}  // namespace concurdl::kernels
