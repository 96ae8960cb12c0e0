// The registry of data-parallel training backends (distributed_train.hpp).
#include "concurdl/nn/distributed_train.hpp"

#include <stdexcept>

namespace concurdl::nn {

namespace {
std::vector<DistributedBackend>& backends() {
  static std::vector<DistributedBackend> list;
  return list;
}
}  // namespace

bool register_distributed_backend(DistributedBackend b) {
  if (find_distributed_backend(b.name) != nullptr)
    throw std::logic_error("register_distributed_backend: '" + b.name + "' registered twice");
  if (!b.run) throw std::logic_error("register_distributed_backend: '" + b.name + "' has no run");
  backends().push_back(std::move(b));
  return true;
}

const DistributedBackend* find_distributed_backend(std::string_view name) {
  for (const DistributedBackend& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<std::string> distributed_backend_names() {
  std::vector<std::string> out;
  for (const DistributedBackend& b : backends()) out.push_back(b.name);
  return out;
}

}  // namespace concurdl::nn
