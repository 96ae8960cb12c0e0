// Variant tables: capabilities (built? usable here?) and the registry of variant descriptions
// that `concurdl list` prints and the README blocks are generated from (harness/variant_docs).
#include "concurdl/core/variants.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "concurdl/build_info.hpp"

#ifdef CONCURDL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace concurdl {

namespace {

constexpr std::size_t kCapabilityCount = std::size(kCapabilities);

std::size_t index_of(Capability c) { return static_cast<std::size_t>(c); }

// Built-in answers: how the program was built, and for CUDA whether a device answers.
std::string built_in_missing(Capability c) {
  switch (c) {
    case Capability::cuda:
      if (!build::have_cuda) return "built without CUDA (no nvcc found when configuring)";
#ifdef CONCURDL_WITH_CUDA
      {
        int n = 0;
        // Without a GPU this is an error (35, or 100), not just 0 devices.
        if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess)
          return fmt::format("no usable CUDA device ({})", cudaGetErrorString(e));
        if (n == 0) return "no CUDA device";
      }
#endif
      return "";
    case Capability::mpi:
      return build::have_mpi ? ""
                             : "built without MPI (apt-get install libopenmpi-dev, then configure "
                               "again)";
    case Capability::nccl:
      if (!build::have_nccl) return "built without NCCL (needs CUDA and NCCL when configuring)";
      return built_in_missing(Capability::cuda);
    case Capability::uring:
      return build::have_uring ? ""
                               : "built without liburing (apt-get install liburing-dev, then "
                                 "configure again)";
    case Capability::torch:
      return "built without libtorch (this build has no libtorch option)";
  }
  return "unknown capability";
}

struct Capabilities {
  std::mutex mu;
  std::array<std::function<std::string()>, kCapabilityCount> probes;
  std::array<std::optional<std::string>, kCapabilityCount> answers;
};

Capabilities& capabilities() {
  static Capabilities c;
  return c;
}

std::vector<VariantAxisDoc>& doc_list() {
  static std::vector<VariantAxisDoc> list;
  return list;
}

bool same_rows(const VariantAxisDoc& a, const VariantAxisDoc& b) {
  if (a.axis != b.axis || a.rows.size() != b.rows.size()) return false;
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    const VariantDoc &x = a.rows[i], &y = b.rows[i];
    if (x.name != y.name || x.what != y.what || x.needs != y.needs || x.quick != y.quick)
      return false;
  }
  return true;
}

}  // namespace

std::string Needs::text() const {
  std::string out;
  for (Capability c : kCapabilities)
    if (has(c)) out += (out.empty() ? "" : " + ") + std::string(capability_title(c));
  return out;
}

std::string_view capability_title(Capability c) {
  switch (c) {
    case Capability::cuda:
      return "CUDA";
    case Capability::mpi:
      return "MPI";
    case Capability::nccl:
      return "NCCL";
    case Capability::uring:
      return "io_uring";
    case Capability::torch:
      return "libtorch";
  }
  return "?";
}

std::string capability_missing(Capability c) {
  Capabilities& caps = capabilities();
  std::function<std::string()> probe;
  {
    std::lock_guard lock(caps.mu);
    if (const auto& a = caps.answers[index_of(c)]) return *a;
    probe = caps.probes[index_of(c)];
  }
  // Probed outside the lock: a probe may ask about another capability.
  std::string why = built_in_missing(c);
  if (why.empty() && probe) why = probe();
  std::lock_guard lock(caps.mu);
  caps.answers[index_of(c)] = why;
  return why;
}

std::string needs_missing(Needs n) {
  for (Capability c : kCapabilities)
    if (n.has(c))
      if (std::string why = capability_missing(c); !why.empty())
        return fmt::format("{}: {}", capability_title(c), why);
  return "";
}

bool register_capability_probe(Capability c, std::function<std::string()> why_not) {
  Capabilities& caps = capabilities();
  std::lock_guard lock(caps.mu);
  caps.probes[index_of(c)] = std::move(why_not);
  caps.answers[index_of(c)].reset();
  return true;
}

void describe_variants(VariantAxisDoc doc) {
  auto& list = doc_list();
  for (const VariantAxisDoc& d : list) {
    if (d.experiment != doc.experiment) continue;
    if (same_rows(d, doc)) return;
    throw std::logic_error(
        fmt::format("experiment '{}': variant axes '{}' and '{}' described "
                    "differently (one variant table per experiment)",
                    doc.experiment, d.axis, doc.axis));
  }
  list.push_back(std::move(doc));
}

const std::vector<VariantAxisDoc>& variant_docs() { return doc_list(); }

const VariantAxisDoc* find_variant_doc(std::string_view experiment) {
  for (const VariantAxisDoc& d : doc_list())
    if (d.experiment == experiment) return &d;
  return nullptr;
}

}  // namespace concurdl
