// `concurdl list`, shared by the command line (cli.cpp) and its tests.
#pragma once

#include <string>
#include <vector>

namespace concurdl {

// Chapters, experiments (their axes, each variant with its one line of what changed, figures)
// and exercises; `targets` are chapters or experiment ids, none = everything. With `markdown`,
// the variant tables of those experiments as the README blocks that hold them (between
// `<!-- variants:ID -->` and `<!-- /variants -->`). Unknown targets are a UsageError.
int list_main(const std::vector<std::string>& targets, bool markdown);

}  // namespace concurdl
