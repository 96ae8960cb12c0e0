// The `concurdl` command line. main() is one call so that test programs can link the same CLI
// with extra (test-only) chapters. Besides its own commands it dispatches to those registered in
// commands.hpp (the training stack's `train`, a chapter's worker process).
#pragma once

#include "concurdl/harness/commands.hpp"

namespace concurdl {

int cli_main(int argc, char** argv);

}  // namespace concurdl
