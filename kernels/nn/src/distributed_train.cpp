// The registry of data-parallel training backends (distributed_train.hpp).
#include "concurdl/nn/distributed_train.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

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

void straggle(double factor, double compute_s) {
  if (factor > 1.0 && compute_s > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>((factor - 1.0) * compute_s));
}

namespace {
std::vector<TrainingMode>& modes() {
  static std::vector<TrainingMode> list;
  return list;
}
}  // namespace

bool register_training_mode(TrainingMode m) {
  if (m.name == "sync" || find_training_mode(m.name) != nullptr)
    throw std::logic_error("register_training_mode: '" + m.name + "' registered twice");
  if (!m.run) throw std::logic_error("register_training_mode: '" + m.name + "' has no run");
  modes().push_back(std::move(m));
  return true;
}

const TrainingMode* find_training_mode(std::string_view name) {
  for (const TrainingMode& m : modes())
    if (m.name == name) return &m;
  return nullptr;
}

std::vector<std::string> training_mode_names() {
  std::vector<std::string> out = {"sync"};
  for (const TrainingMode& m : modes()) out.push_back(m.name);
  return out;
}

std::vector<std::string> distributed_backend_names() {
  std::vector<std::string> out;
  for (const DistributedBackend& b : backends()) out.push_back(b.name);
  return out;
}

}  // namespace concurdl::nn
