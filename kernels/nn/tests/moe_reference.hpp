// The mixture-of-experts layer's forward in double (moe.hpp's formulas written out again, with
// routing of its own): the reference its gradients, and those of a model built on it, are
// checked against by finite differences (test_moe.cpp, test_moe_trainer.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "concurdl/nn/moe.hpp"

namespace concurdl::nn::moe_test {

// The layer's forward in double, over the same flat parameter layout, with its own routing;
// the scalar it returns is sum_t,j c_tj y_tj + aux, so dy = c.
struct Reference {
  MoeSpec s;
  std::vector<double> y;
  std::vector<MoeRoute> routes;
  double aux = 0;
  double margin = 0;  // smallest logit gap that decides a choice
  double kink = 0;    // smallest |pre-activation| of a kept choice's hidden unit

  double loss(const std::vector<double>& p, const std::vector<double>& x,
              const std::vector<double>& c, std::size_t T) {
    const std::size_t d = s.width, h = s.hidden, E = s.experts, k = s.top_k;
    std::vector<double> prob(T * E), f(E, 0), P(E, 0);
    routes.assign(T * k, MoeRoute{});
    margin = kink = std::numeric_limits<double>::infinity();
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> l(E);
      for (std::size_t i = 0; i < E; ++i) {
        l[i] = p[E * d + i];
        for (std::size_t j = 0; j < d; ++j) l[i] += p[i * d + j] * x[t * d + j];
      }
      const double m = *std::max_element(l.begin(), l.end());
      double sum = 0;
      for (std::size_t i = 0; i < E; ++i) sum += std::exp(l[i] - m);
      for (std::size_t i = 0; i < E; ++i) prob[t * E + i] = std::exp(l[i] - m) / sum;
      std::vector<std::size_t> order(E);
      for (std::size_t i = 0; i < E; ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return l[a] > l[b]; });
      for (std::size_t c2 = 0; c2 < k && c2 + 1 < E; ++c2)
        margin = std::min(margin, l[order[c2]] - l[order[c2 + 1]]);
      double total = 0;
      for (std::size_t q = 0; q < k; ++q) total += prob[t * E + order[q]];
      for (std::size_t q = 0; q < k; ++q) {
        routes[t * k + q].expert = static_cast<std::uint32_t>(order[q]);
        routes[t * k + q].gate =
            static_cast<float>(prob[t * E + order[q]] / (k == 1 ? 1.0 : total));
      }
      f[order[0]] += 1.0 / static_cast<double>(T);
      for (std::size_t i = 0; i < E; ++i) P[i] += prob[t * E + i] / static_cast<double>(T);
    }
    const std::size_t cap = s.dropless ? T : moe_capacity(T, E, k, s.capacity_factor);
    std::vector<std::size_t> used(E, 0);
    for (std::size_t q = 0; q < k; ++q)
      for (std::size_t t = 0; t < T; ++t) {
        MoeRoute& r = routes[t * k + q];
        r.kept = used[r.expert] < cap;
        if (r.kept) r.slot = static_cast<std::uint32_t>(used[r.expert]++);
      }
    const std::size_t esize = 2 * h * d + h + d;
    y.assign(T * d, 0);
    double out = 0;
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t j = 0; j < d; ++j) y[t * d + j] = s.residual ? x[t * d + j] : 0;
      double total = 0;
      for (std::size_t q = 0; q < k; ++q) total += prob[t * E + routes[t * k + q].expert];
      for (std::size_t q = 0; q < k; ++q) {
        const MoeRoute& r = routes[t * k + q];
        if (!r.kept) continue;
        const double g = prob[t * E + r.expert] / (k == 1 ? 1.0 : total);
        const double* w = p.data() + E * d + E + r.expert * esize;  // W1, b1, W2, b2
        std::vector<double> hid(h);
        for (std::size_t u = 0; u < h; ++u) {
          double z = w[h * d + u];
          for (std::size_t j = 0; j < d; ++j) z += w[u * d + j] * x[t * d + j];
          kink = std::min(kink, std::fabs(z));
          hid[u] = std::max(z, 0.0);
        }
        const double* w2 = w + h * d + h;
        for (std::size_t j = 0; j < d; ++j) {
          double o = w2[d * h + j];
          for (std::size_t u = 0; u < h; ++u) o += w2[j * h + u] * hid[u];
          y[t * d + j] += g * o;
        }
      }
      for (std::size_t j = 0; j < d; ++j) out += c[t * d + j] * y[t * d + j];
    }
    aux = 0;
    for (std::size_t i = 0; i < E; ++i) aux += f[i] * P[i];
    aux *= static_cast<double>(s.aux_alpha) * static_cast<double>(E);
    return out + aux;
  }
};

}  // namespace concurdl::nn::moe_test
