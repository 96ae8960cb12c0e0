// What the commands share: the experiments a command line selects, the program's folder, a
// directory made or refused, the invalid records said, a run's report written.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli_detail.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/report.hpp"

namespace concurdl::cli_detail {

namespace fs = std::filesystem;

// A chapter's experiments: those across MPI ranks (Experiment::mpi) with --ranks, the others
// without it.
std::vector<const Experiment*> chapter_experiments(const std::string& folder, bool across_ranks) {
  std::vector<const Experiment*> out;
  for (const auto& e : experiments())
    if (e.chapter == folder && e.mpi == across_ranks) out.push_back(&e);
  return out;
}

// Chapters, chapter numbers ("ch01", "01", "1") and experiment ids; nothing = every chapter.
// With --ranks only the experiments across MPI ranks run, and without it only the others.
std::vector<const Experiment*> select(const std::vector<std::string>& targets, bool across_ranks) {
  std::vector<const Experiment*> out;
  auto add = [&](const Experiment* e) {
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  };
  if (targets.empty()) {
    for (const auto& e : experiments())
      if (e.chapter != kCalibrationChapter && e.recorded_by.empty() && e.mpi == across_ranks)
        add(&e);
    return out;
  }
  for (const auto& t : targets) {
    if (const Experiment* e = find_experiment(t)) {
      if (!e->recorded_by.empty())
        throw UsageError(
            fmt::format("{} is recorded by 'concurdl {}', not measured by run", t, e->recorded_by));
      if (e->mpi && !across_ranks)
        throw UsageError(fmt::format("{} runs across MPI ranks: give --ranks N", t));
      if (!e->mpi && across_ranks)
        throw UsageError(fmt::format("{} does not run across MPI ranks: leave out --ranks", t));
      add(e);
    } else if (const ChapterInfo* c = find_chapter(t)) {
      const auto in_chapter = chapter_experiments(c->folder, across_ranks);
      if (in_chapter.empty() && across_ranks)
        throw UsageError(fmt::format("chapter {} has no experiments across MPI ranks", c->folder));
      for (const Experiment* x : in_chapter)
        if (x->recorded_by.empty()) add(x);
    } else {
      throw UsageError(
          fmt::format("unknown chapter or experiment '{}' (concurdl list shows them)", t));
    }
  }
  return out;
}

fs::path program_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path();
}

void ensure_directory(const fs::path& dir, const char* what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw UsageError(fmt::format("{}: '{}' cannot be created: {}", what, dir.string(),
                                 ec ? ec.message() : "it is not a directory"));
}

bool all_valid(const std::vector<Record>& records) {
  return std::all_of(records.begin(), records.end(), [](const Record& r) { return r.valid; });
}

void print_invalid(const std::vector<Record>& records) {
  for (const auto& r : records)
    if (!r.valid)
      std::fprintf(stderr, "concurdl: INVALID %s {%s}: %s\n", r.experiment.c_str(),
                   describe(r.params).c_str(), r.validation.c_str());
}

void report_run(const RunFile& f, const fs::path& dir) {
  const ReportFiles rep = write_report({f}, {}, dir);
  for (const auto& w : rep.warnings) std::fprintf(stderr, "concurdl: warning: %s\n", w.c_str());
}

}  // namespace concurdl::cli_detail
