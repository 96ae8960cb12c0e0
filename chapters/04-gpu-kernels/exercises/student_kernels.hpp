// The kernels around the students' phases (exercises/student_kernels.cu; CUDA builds only):
// what exercises.cpp times against the chapter's own.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace concurdl::gpu {

// Exercise 4.1: C = A B row-major (m x k by k x n) with the student's tile phases.
void student_gemm(const float* a, const float* b, float* c, int m, int n, int k,
                  cudaStream_t stream);
// Exercise 4.2: *out = the sum of in[0, n) with the student's thread and warp sums (it zeroes
// *out first, on the stream).
void student_reduce(const float* in, std::size_t n, float* out, cudaStream_t stream);

}  // namespace concurdl::gpu
