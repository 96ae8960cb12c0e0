// The `concurdl` command line. main() is one call so that test programs can link the same CLI
// with extra (test-only) chapters.
#pragma once

namespace concurdl {
int cli_main(int argc, char** argv);
}  // namespace concurdl
