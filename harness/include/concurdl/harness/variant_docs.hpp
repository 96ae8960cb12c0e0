// Variant tables as documentation: the Markdown table of one experiment's variant axis (from
// the descriptions VariantTable::axis() records, core/variants.hpp), and the README blocks that
// hold it, so that a table is written once, in the code.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/core/variants.hpp"

namespace concurdl {

// One experiment's variant table as Markdown (no markers):
//   | variant | what changed, and what it does to the numbers |
// with a `profiles` column when a row is full-only and a `needs` column when a row needs a
// capability. The same on every machine: every row is listed, whether or not it can run here.
std::string variants_markdown(const VariantAxisDoc& doc);

// README blocks: `<!-- variants:ch02/lock_throughput -->` ... `<!-- /variants -->` hold the
// generated table of that experiment, so that it is written once, in the code.
inline constexpr std::string_view kVariantsOpen = "<!-- variants:";
inline constexpr std::string_view kVariantsClose = "<!-- /variants -->";
// The block for `doc`: the open marker, the table, the close marker.
std::string variants_block(const VariantAxisDoc& doc);
// `readme` with every block's table regenerated. Throws std::runtime_error naming the line of a
// block without its close marker.
std::string regenerate_variant_blocks(const std::string& readme);
// What is wrong with the README of `chapter` (a folder, "02-locks"): a block that differs from
// the generated table, names an experiment without a variant table, or is not closed; and an
// experiment of the chapter with a row that no block shows (one whose rows are all in another
// experiment's block needs none). Empty: all is well.
std::vector<std::string> check_readme_variants(const std::filesystem::path& readme,
                                               std::string_view chapter);

}  // namespace concurdl
