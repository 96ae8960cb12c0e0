// CPU references (reference.hpp).
#include "concurdl/gpu/reference.hpp"

#include <stdexcept>

#include "concurdl/gpu/index.hpp"

namespace concurdl::gpu {

void vector_add_ref(std::span<const float> a, std::span<const float> b, std::span<float> c) {
  if (a.size() != b.size() || a.size() != c.size())
    throw std::invalid_argument("vector_add_ref: the three arrays differ in length");
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
}

void copy_strided_ref(std::span<const float> in, std::span<float> out, std::size_t stride) {
  if (in.size() != out.size())
    throw std::invalid_argument("copy_strided_ref: in and out differ in length");
  const std::size_t n = in.size();
  for (std::size_t i = 0; i < n; ++i) out[i] = in[strided_source(i, stride, n)];
}

std::vector<float> gemm_ref(std::span<const float> a, std::span<const float> b, int m, int n,
                            int k) {
  const auto mu = static_cast<std::size_t>(m), nu = static_cast<std::size_t>(n),
             ku = static_cast<std::size_t>(k);
  if (a.size() != mu * ku || b.size() != ku * nu)
    throw std::invalid_argument("gemm_ref: A or B does not have the shape given");
  std::vector<float> c(mu * nu);
  for (std::size_t i = 0; i < mu; ++i)
    for (std::size_t j = 0; j < nu; ++j) {
      double acc = 0;
      for (std::size_t x = 0; x < ku; ++x)
        acc += static_cast<double>(a[i * ku + x]) * b[x * nu + j];
      c[i * nu + j] = static_cast<float>(acc);
    }
  return c;
}

double sum_ref(std::span<const float> x) {
  double s = 0;
  for (const float v : x) s += v;
  return s;
}

float sum_float(std::span<const float> x) {
  float part[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= x.size(); i += 8)
    for (std::size_t k = 0; k < 8; ++k) part[k] += x[i + k];
  float s = 0;
  for (; i < x.size(); ++i) s += x[i];
  for (const float p : part) s += p;
  return s;
}

std::vector<float> small_integers(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>((seed >> 16) % 5) - 2);
  }
  return v;
}

std::vector<float> test_values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) * 0x1.0p-23f - 1.0f;
  }
  return v;
}

}  // namespace concurdl::gpu
