// The registry of commands (commands.hpp).
#include "concurdl/harness/commands.hpp"

#include <stdexcept>
#include <utility>

namespace concurdl {

namespace {
std::vector<Command>& command_list() {
  static std::vector<Command> list;  // filled during static initialisation
  return list;
}
}  // namespace

bool register_command(Command c) {
  for (const auto& existing : command_list())
    if (existing.name == c.name)
      throw std::logic_error("command '" + c.name + "' registered twice");
  command_list().push_back(std::move(c));
  return true;
}

const std::vector<Command>& commands() { return command_list(); }

}  // namespace concurdl
