// The committed reference runs (results/reference/*/results.json) were written by earlier
// versions of the schema and of the experiments: every one must still load, and its charts and
// report must still be built, whatever was renamed or merged since.
#include <gtest/gtest.h>

#include <filesystem>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/report.hpp"

using namespace concurdl;
namespace fs = std::filesystem;

TEST(ReferenceRuns, EveryCommittedRunLoadsAndItsReportIsBuilt) {
  const fs::path root = fs::path(build::source_dir) / "results" / "reference";
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " is not there";
  int runs = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    const fs::path file = entry.path() / "results.json";
    if (!fs::is_regular_file(file)) continue;
    SCOPED_TRACE(file.string());
    RunFile run;
    ASSERT_NO_THROW(run = load_run(file));
    EXPECT_FALSE(run.records.empty());
    EXPECT_LE(run.schema_version, kSchemaVersion);
    std::vector<ChartSpec> charts;
    EXPECT_NO_THROW(charts = build_charts({run}));
    // Experiments still registered are charted from the old records.
    bool registered = false;
    for (const Record& r : run.records) {
      const Experiment* e = find_experiment(r.experiment);
      registered = registered || (e != nullptr && !e->figures.empty());
    }
    if (registered) {
      EXPECT_FALSE(charts.empty());
    }
    ++runs;
  }
  EXPECT_GE(runs, 1);
}
