// Commands beyond the built-in ones (`concurdl train`, a chapter's worker process): a compute
// library registers its own at static initialisation, as experiments register themselves
// (experiment.hpp), and the command line (cli.hpp) dispatches to them by name. Registering
// knows nothing of how the command line is parsed, so any layer may register a command.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace concurdl {

// `run` gets the arguments after the command's name (its own --help included) and returns the
// exit code; it throws UsageError for bad input (exit 2, one line on stderr), like the others:
//   static const bool registered = concurdl::register_command({"train", "...", &train_main});
struct Command {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};
// Adds `c`; a second command of the same name is std::logic_error. Returns true (for a
// namespace-scope `const bool registered = register_command(...)`).
bool register_command(Command c);
// In the order registered.
const std::vector<Command>& commands();

}  // namespace concurdl
