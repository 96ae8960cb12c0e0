// CPU references of chapter 04's kernels, in plain C++: every GPU version is checked against
// them before and after it is timed, and they run (and are tested, and measured against the CPU
// roofline by ch04/cpu_reference) on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace concurdl::gpu {

// c = a + b, element by element.
void vector_add_ref(std::span<const float> a, std::span<const float> b, std::span<float> c);
// out[i] = in[strided_source(i, stride, n)].
void copy_strided_ref(std::span<const float> in, std::span<float> out, std::size_t stride);
// C = A B, row-major (A m x k, B k x n), accumulated in double and rounded once: the product the
// GEMM tests hold every version to (exactly, on small integers).
std::vector<float> gemm_ref(std::span<const float> a, std::span<const float> b, int m, int n,
                            int k);

// The sum in double: the reference the float sums are judged against.
double sum_ref(std::span<const float> x);
// The same sum in float, one thread: what the CPU experiment times (8 interleaved partial sums,
// so the compiler vectorises it without -ffast-math).
float sum_float(std::span<const float> x);

// Inputs for the sums: small integers in {-2, ..., 2} as floats. Every partial sum of them is
// an integer far below 2^24, so a float sum is exact in any order: the check of a reduction is
// equality with the double sum, and a single element lost or counted twice shows.
std::vector<float> small_integers(std::size_t n, std::uint32_t seed);

// Deterministic inputs in [-1, 1): the suite's own generator, the same on every machine.
std::vector<float> test_values(std::size_t n, std::uint32_t seed);

}  // namespace concurdl::gpu
