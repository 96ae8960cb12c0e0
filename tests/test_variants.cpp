// Variant tables (variants.hpp): finding rows, the usage errors for unknown and unusable rows,
// the filters by capability and profile, the axis and the inapplicable rules built from a
// table, and the Markdown that the chapters' READMEs hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/harness/variant_docs.hpp"

namespace {

using namespace concurdl;

struct ToyRow : VariantInfo {
  int payload;
};

// libtorch is never built, so the row that needs it is never offered; io_uring may or may not be.
constexpr ToyRow kToyRows[] = {
    {{"v0_plain", "the baseline"}, 0},
    {{"v1_slow", "one step further, slow: full profile only", {}, /*quick=*/false}, 1},
    {{"v2_torch", "needs a library no build has", Capability::torch}, 2},
    {{"v3_pipe", "a | in the text stays in its cell, a <tag> is text"}, 3},
};
constexpr VariantTable kToy{kToyRows};
constexpr VariantTable kToyLoaders{kToyRows, "loader"};

std::string usage_error_of(const auto& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(VariantTable, FindsRowsByNameAndByParameter) {
  EXPECT_EQ(kToy.find("v1_slow").payload, 1);
  EXPECT_EQ(kToy.find(Params{{"variant", "v3_pipe"}}).payload, 3);
  EXPECT_EQ(kToyLoaders.find(Params{{"loader", "v0_plain"}}).payload, 0);
  EXPECT_EQ(kToy.lookup("v2_torch"), &kToyRows[2]) << "lookup finds rows that cannot run too";
  EXPECT_EQ(kToy.lookup("nope"), nullptr);
  static_assert(kToy.size() == 4 && kToy.lookup("v1_slow") == &kToyRows[1]);
}

TEST(VariantTable, AnUnknownNameListsTheKnownOnes) {
  const std::string e = usage_error_of([] { kToy.find("v9_missing"); });
  EXPECT_NE(e.find("parameter 'variant'"), std::string::npos) << e;
  EXPECT_NE(e.find("'v9_missing'"), std::string::npos) << e;
  EXPECT_NE(e.find("v0_plain, v1_slow, v2_torch, v3_pipe"), std::string::npos) << e;
  const std::string l = usage_error_of([] { kToyLoaders.find(Params{{"loader", "x"}}); });
  EXPECT_NE(l.find("parameter 'loader': unknown loader 'x'"), std::string::npos) << l;
}

TEST(VariantTable, ARowWhoseNeedsAreMissingIsNotOfferedAndSaysWhatItNeeds) {
  const std::string e = usage_error_of([] { kToy.find("v2_torch"); });
  EXPECT_NE(e.find("'v2_torch' needs libtorch"), std::string::npos) << e;
  EXPECT_FALSE(capability_missing(Capability::torch).empty());
  EXPECT_EQ(kToy.names(Offer::all),
            (std::vector<std::string>{"v0_plain", "v1_slow", "v2_torch", "v3_pipe"}));
  EXPECT_EQ(kToy.names(Offer::here), (std::vector<std::string>{"v0_plain", "v1_slow", "v3_pipe"}));
  EXPECT_EQ(needs_missing({}), "");
  EXPECT_EQ(Needs(Capability::cuda | Capability::nccl).text(), "CUDA + NCCL");
}

TEST(VariantTable, TheQuickProfileLeavesOutFullOnlyRows) {
  EXPECT_EQ(kToy.names(Offer::quick), (std::vector<std::string>{"v0_plain", "v3_pipe"}));
  EXPECT_EQ(kToy.names(Offer::quick, {.all_quick = true}),
            (std::vector<std::string>{"v0_plain", "v1_slow", "v3_pipe"}));
  EXPECT_EQ(kToy.names(Offer::here, {.where = [](const ToyRow& r) { return r.payload >= 1; }}),
            (std::vector<std::string>{"v1_slow", "v3_pipe"}));
}

TEST(VariantTable, TheAxisOffersUsableRowsAndRecordsEveryRow) {
  const Axis a = kToy.axis("toy/axis");
  EXPECT_EQ(a.name, "variant");
  EXPECT_EQ(a.values, (std::vector<std::string>{"v0_plain", "v1_slow", "v3_pipe"}));
  EXPECT_EQ(a.quick, (std::vector<std::string>{"v0_plain", "v3_pipe"}));
  const VariantAxisDoc* doc = find_variant_doc("toy/axis");
  ASSERT_NE(doc, nullptr);
  ASSERT_EQ(doc->rows.size(), 4u) << "the docs list rows this machine cannot run too";
  EXPECT_FALSE(doc->rows[1].quick);
  EXPECT_EQ(doc->rows[2].needs, Needs(Capability::torch));
  // Described again with the same rows: fine; with others: a bug, found at start.
  EXPECT_NO_THROW(kToy.axis("toy/axis"));
  EXPECT_THROW(kToy.axis("toy/axis", {.all_quick = true}), std::logic_error);
  // A selection whose rows are all quick gives an axis whose quick values are its values.
  EXPECT_TRUE(kToy.axis("toy/quick_only", {.where = [](const ToyRow& r) { return r.quick; }})
                  .quick.empty());
}

TEST(VariantTable, InapplicableRulesNameEachSelectedRow) {
  const auto rules =
      kToyLoaders.inapplicable([](const ToyRow& r) { return r.payload < 2; }, {"workers"});
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].when, (Params{{"loader", "v0_plain"}}));
  EXPECT_EQ(rules[1].when, (Params{{"loader", "v1_slow"}}));
  EXPECT_EQ(rules[1].axes, (std::vector<std::string>{"workers"}));
}

TEST(VariantTable, MarkdownListsEveryRowWithProfileAndNeeds) {
  kToy.axis("toy/markdown");
  const std::string md = variants_markdown(*find_variant_doc("toy/markdown"));
  EXPECT_EQ(
      md,
      "| variant | what changed, and what it does to the numbers | profiles | needs |\n"
      "|---|---|---|---|\n"
      "| `v0_plain` | the baseline | quick, full | |\n"
      "| `v1_slow` | one step further, slow: full profile only | full | |\n"
      "| `v2_torch` | needs a library no build has | quick, full | libtorch |\n"
      "| `v3_pipe` | a \\| in the text stays in its cell, a \\<tag> is text | quick, full | |\n");
  kToy.axis("toy/markdown_plain", {.where = [](const ToyRow& r) { return r.payload == 0; }});
  EXPECT_EQ(variants_markdown(*find_variant_doc("toy/markdown_plain")),
            "| variant | what changed, and what it does to the numbers |\n"
            "|---|---|\n"
            "| `v0_plain` | the baseline |\n");
}

TEST(VariantTable, ReadmeBlocksAreRegeneratedInPlace) {
  kToyLoaders.axis("toy/readme", {.where = [](const ToyRow& r) { return r.needs.empty(); }});
  const std::string readme =
      "# Toy\n\nprose\n<!-- variants:toy/readme -->\n| stale |\n<!-- /variants -->\nmore prose\n";
  const std::string out = regenerate_variant_blocks(readme);
  EXPECT_EQ(out, "# Toy\n\nprose\n<!-- variants:toy/readme -->\n" +
                     variants_markdown(*find_variant_doc("toy/readme")) +
                     "<!-- /variants -->\nmore prose\n");
  EXPECT_EQ(regenerate_variant_blocks(out), out);
  EXPECT_THROW(regenerate_variant_blocks("<!-- variants:toy/readme -->\n| x |\n"),
               std::runtime_error);
}

}  // namespace
