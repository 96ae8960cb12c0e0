// The registries of data-parallel training backends and training modes, and the modes' flags
// (distributed_train.hpp).
#include "concurdl/nn/distributed_train.hpp"

#include <algorithm>
#include <charconv>
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

bool TrainingMode::owns(std::string_view flag) const {
  return std::any_of(flags.begin(), flags.end(), [&](const ModeFlag& f) { return f.name == flag; });
}

bool register_training_mode(TrainingMode m) {
  auto refuse = [&](const std::string& why) {
    throw std::logic_error("register_training_mode: '" + m.name + "' " + why);
  };
  if (m.name == "sync" || find_training_mode(m.name) != nullptr) refuse("registered twice");
  if (!m.run) refuse("has no run");
  for (const std::string& flag : m.chosen_by)
    if (!m.owns(flag)) refuse("is chosen by " + flag + ", which is not among its flags");
  if (!m.chosen_by.empty() && (!m.ranks || m.chosen_as.empty()))
    refuse("is chosen by its flags but says no rank count or no chosen_as");
  for (const ModeFlag& f : m.flags)
    for (const ModeFlag& g : training_mode_flags())
      if (f.name == g.name && (f.kind != g.kind || f.min != g.min || f.max != g.max))
        refuse("declares " + f.name + " otherwise than another mode does");
  modes().push_back(std::move(m));
  return true;
}

std::vector<ModeFlag> training_mode_flags() {
  std::vector<ModeFlag> out;
  for (const TrainingMode& m : modes())
    for (const ModeFlag& f : m.flags)
      if (std::none_of(out.begin(), out.end(), [&](const ModeFlag& g) { return g.name == f.name; }))
        out.push_back(f);
  return out;
}

long long DistributedOptions::number(std::string_view flag, long long otherwise) const {
  const auto it = values.find(flag);
  if (it == values.end()) return otherwise;
  long long v = 0;
  const std::string& t = it->second;
  const auto [stop, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || stop != t.data() + t.size())
    throw std::invalid_argument(std::string(flag) + ": '" + t + "' is not a whole number");
  return v;
}

std::string DistributedOptions::text(std::string_view flag, std::string_view otherwise) const {
  const auto it = values.find(flag);
  return std::string(it == values.end() ? otherwise : std::string_view(it->second));
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
