#include "concurdl/harness/cli.hpp"

int main(int argc, char** argv) { return concurdl::cli_main(argc, argv); }
