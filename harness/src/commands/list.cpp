// `concurdl list`: what the program can run, with each variant's one line of what changed,
// and the variant tables as Markdown for the chapters' READMEs.
#include "list.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "concurdl/build_info.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/variant_docs.hpp"

namespace concurdl {

namespace {

struct Selection {
  std::vector<const ChapterInfo*> chapters;
  std::vector<const Experiment*> experiments;
  std::vector<const ChapterInfo*> whole;  // chapters asked for as a whole: with their exercises
};

Selection select_targets(const std::vector<std::string>& targets) {
  Selection s;
  auto add_chapter = [&](const ChapterInfo* c) {
    if (std::find(s.chapters.begin(), s.chapters.end(), c) == s.chapters.end())
      s.chapters.push_back(c);
  };
  auto add_experiment = [&](const Experiment* e) {
    if (std::find(s.experiments.begin(), s.experiments.end(), e) == s.experiments.end())
      s.experiments.push_back(e);
  };
  if (targets.empty())
    for (const ChapterInfo& c : chapters()) {
      add_chapter(&c);
      s.whole.push_back(&c);
    }
  for (const std::string& t : targets) {
    if (const Experiment* e = find_experiment(t)) {
      add_chapter(find_chapter(e->chapter));
      add_experiment(e);
    } else if (const ChapterInfo* c = find_chapter(t)) {
      add_chapter(c);
      s.whole.push_back(c);
      for (const Experiment& x : experiments())
        if (x.chapter == c->folder) add_experiment(&x);
    } else {
      throw UsageError(
          fmt::format("unknown chapter or experiment '{}' (concurdl list shows them)", t));
    }
  }
  if (targets.empty())
    for (const Experiment& x : experiments()) add_experiment(&x);
  return s;
}

void print_variants(const Axis& ax, const VariantAxisDoc& doc) {
  std::size_t width = 0;
  for (const VariantDoc& r : doc.rows) width = std::max(width, r.name.size());
  for (const VariantDoc& r : doc.rows) {
    std::string notes;
    if (std::string why = needs_missing(r.needs); !why.empty())
      notes = fmt::format(" [not here: needs {}]", why);
    else if (!r.quick || (!ax.quick.empty() &&
                          std::find(ax.quick.begin(), ax.quick.end(), r.name) == ax.quick.end()))
      notes = " [full profile only]";
    fmt::print("        {:<{}}  {}{}\n", r.name, width, r.what, notes);
  }
}

void print_experiment(const Experiment& e) {
  fmt::print("  {:<32} {}\n", e.id, e.title);
  if (e.mpi)
    fmt::print("      across MPI ranks: runs only with 'concurdl run --ranks N'{}\n",
               build::have_mpi ? "" : " (this concurdl was built without MPI)");
  if (!e.recorded_by.empty()) {
    fmt::print("      recorded by 'concurdl {}' (not measured by run)\n", e.recorded_by);
  } else if (!e.microbenchmark_filter.empty()) {
    fmt::print("      micro-benchmarks matching '{}' (Google Benchmark)\n",
               e.microbenchmark_filter);
  } else {
    const VariantAxisDoc* doc = find_variant_doc(e.id);
    for (const Axis& ax : e.axes) {
      fmt::print("      {:<12} {}", ax.name, fmt::join(ax.values, ","));
      if (!ax.quick.empty()) fmt::print("   (quick: {})", fmt::join(ax.quick, ","));
      if (ax.min) fmt::print("   (at least {})", *ax.min);
      if (ax.max != 0) fmt::print("   (at most {})", ax.max);
      fmt::print("\n");
      if (doc != nullptr && doc->axis == ax.name) print_variants(ax, *doc);
    }
    for (const Inapplicable& rule : e.inapplicable) {
      std::vector<std::string> when;
      for (const auto& [k, v] : rule.when) when.push_back(k + "=" + v);
      fmt::print("      where {}: no {}\n", fmt::join(when, ", "), fmt::join(rule.axes, ", "));
    }
  }
  for (const Metric& m : e.metrics)
    fmt::print("      metric  {}{}: {}\n", m.name, m.unit.empty() ? "" : " (" + m.unit + ")",
               m.what);
  for (const Figure& fig : e.figures) fmt::print("      figure  {}: {}\n", fig.id, fig.title);
}

}  // namespace

int list_main(const std::vector<std::string>& targets, bool markdown) {
  const Selection s = select_targets(targets);
  if (markdown) {
    bool first = true;
    for (const Experiment* e : s.experiments)
      if (const VariantAxisDoc* doc = find_variant_doc(e->id)) {
        fmt::print("{}{}", first ? "" : "\n", variants_block(*doc));
        first = false;
      }
    return 0;
  }
  for (const ChapterInfo* c : s.chapters) {
    fmt::print("{}  {}\n", c->folder, c->title);
    for (const Experiment* e : s.experiments)
      if (e->chapter == c->folder) print_experiment(*e);
    if (std::find(s.whole.begin(), s.whole.end(), c) != s.whole.end())
      for (const Exercise* x : exercises_of(c->folder))
        fmt::print("  exercise {:<8} {}\n", x->id, x->title);
  }
  return 0;
}

}  // namespace concurdl
