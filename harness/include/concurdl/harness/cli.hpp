// The `concurdl` command line. main() is one call so that test programs can link the same CLI
// with extra (test-only) chapters.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace concurdl {

int cli_main(int argc, char** argv);

// A subcommand contributed by a library the program links (the training stack's `train`),
// registered from a static initializer like an experiment:
//   static const bool registered = concurdl::register_command({"train", "...", &train_main});
// `run` gets the arguments after the command's name (its own --help included) and returns the
// exit code; it throws UsageError for bad input (exit 2, one line on stderr), like the others.
struct Command {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};
bool register_command(Command c);
const std::vector<Command>& commands();

}  // namespace concurdl
