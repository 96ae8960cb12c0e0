// The chapters' variant tables as the program registers them: every README block between
// `<!-- variants:ID -->` and `<!-- /variants -->` is the generated table (so a table is written
// once, in the code), and the experiments that measure two things at once (ch02/lock_throughput,
// ch03/loader_epoch) carry both in their records. Links every chapter's registrations.
//   Rewrite the READMEs' blocks after changing a row:
//     CONCURDL_UPDATE_README=1 build/bin/chapter_variants_tests --gtest_filter='Readme*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/build_info.hpp"
#include "concurdl/core/hardware.hpp"
#include "concurdl/core/variants.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/runner.hpp"
#include "concurdl/harness/variant_docs.hpp"
#include "readme_capabilities.hpp"

namespace {

namespace fs = std::filesystem;
using namespace concurdl;

class Readme : public ::testing::TestWithParam<const char*> {};

TEST_P(Readme, VariantTablesAreTheProgramsTables) {
  const std::string chapter = GetParam();
  if (readme_needs_what_this_build_lacks(chapter))
    GTEST_SKIP() << "built without MPI: " << chapter << "'s README describes MPI experiments";
  const fs::path readme = fs::path(build::source_dir) / "chapters" / chapter / "README.md";
  if (std::getenv("CONCURDL_UPDATE_README") != nullptr) {
    std::ifstream in(readme);
    std::stringstream text;
    text << in.rdbuf();
    const std::string updated = regenerate_variant_blocks(text.str());
    if (updated != text.str()) std::ofstream(readme) << updated;
  }
  for (const std::string& problem : check_readme_variants(readme, chapter))
    ADD_FAILURE() << problem
                  << "\n(regenerate: CONCURDL_UPDATE_README=1 chapter_variants_tests "
                     "--gtest_filter='Readme*')";
}

INSTANTIATE_TEST_SUITE_P(Chapters, Readme,
                         ::testing::Values("01-threads", "02-locks", "03-async-io",
                                           "04-gpu-kernels", "05-data-parallel",
                                           "06-model-parallel", "07-sync-async-training",
                                           "08-dataflow"),
                         [](const auto& info) {
                           std::string n = info.param;
                           return n.substr(0, 2);
                         });

// Every described variant axis belongs to a registered experiment that has that axis.
TEST(ChapterVariants, EveryDescriptionNamesAnExperimentAxis) {
  for (const VariantAxisDoc& d : variant_docs()) {
    const Experiment* e = find_experiment(d.experiment);
    ASSERT_NE(e, nullptr) << d.experiment << " is described but not registered";
    const bool has = std::any_of(e->axes.begin(), e->axes.end(),
                                 [&](const Axis& a) { return a.name == d.axis; });
    EXPECT_TRUE(has) << d.experiment << " has no axis " << d.axis;
  }
}

// One smoke-profile run of an experiment through the runner, without calibration.
std::vector<Record> smoke_run(const std::string& id,
                              std::map<std::string, std::vector<std::string>> set) {
  const Experiment* e = find_experiment(id);
  if (e == nullptr) return {};
  RunOptions opt;
  opt.profile = Profile::smoke;
  opt.progress = false;
  opt.set = std::move(set);
  return run_configs(expand({e}, opt), opt, {});
}

TEST(MergedExperiments, LockThroughputRecordsCarryJainsIndex) {
  const std::vector<Record> recs =
      smoke_run("ch02/lock_throughput", {{"threads", {"2"}}, {"cs", {"empty"}}});
  ASSERT_EQ(recs.size(), 6u) << "one record per lock";
  for (const Record& r : recs) {
    SCOPED_TRACE(describe(r.params));
    ASSERT_TRUE(r.valid) << r.validation;
    EXPECT_EQ(r.metric, "acquisitions_per_s");
    ASSERT_EQ(r.samples.size(), 1u);
    EXPECT_GT(r.samples[0], 0);
    ASSERT_EQ(r.metrics.count("jain_index"), 1u);
    const MetricSeries& j = r.metrics.at("jain_index");
    ASSERT_EQ(j.samples.size(), 1u);
    EXPECT_GE(j.samples[0], 0.5 - 1e-9) << "Jain's index of 2 threads is in [1/2, 1]";
    EXPECT_LE(j.samples[0], 1 + 1e-9);
  }
  EXPECT_EQ(find_experiment("ch02/lock_fairness"), nullptr) << "merged into ch02/lock_throughput";
}

TEST(MergedExperiments, LoaderEpochRecordsCarryOverlapEfficiencyAndTheModelsComponents) {
  const std::vector<Record> recs =
      smoke_run("ch03/loader_epoch", {{"records", {"512"}}, {"compute_ratio", {"1"}}});
  ASSERT_GE(recs.size(), 4u);
  for (const Record& r : recs) {
    SCOPED_TRACE(describe(r.params));
    ASSERT_TRUE(r.valid) << r.validation;
    const std::string& loader = r.params.at("loader");
    EXPECT_NE(loader.rfind("model_", 0), 0u) << "the models are overlays, not loaders";
    // sync and prefetch have no workers: measured once, recorded without the parameter.
    EXPECT_EQ(r.params.count("workers"), loader == "sync" || loader == "prefetch" ? 0u : 1u);
    for (const char* m : {"overlap_efficiency", "io_s", "compute_s"}) {
      ASSERT_EQ(r.metrics.count(m), 1u) << m;
      EXPECT_EQ(r.metrics.at(m).samples.size(), r.samples.size()) << m;
    }
    const double io = r.metrics.at("io_s").samples[0], c = r.metrics.at("compute_s").samples[0];
    EXPECT_GT(io, 0);
    EXPECT_NEAR(c, io, 1e-12) << "compute_ratio 1: compute = the measured io";
    // The sync loader overlaps nothing: its epoch is at least its compute plus every record's
    // latency paid in turn (throttled reads never finish early). Asserted as that bound, not
    // as an efficiency near 0: the efficiency compares against the io measured once at setup,
    // and a loaded machine can make the setup's sleeps wake late and the trial's not.
    if (loader == "sync") {
      const double latency = std::stod(r.params.at("latency_us")) * 1e-6;
      const double records = std::stod(r.params.at("records"));
      EXPECT_GE(r.stats.median, c + records * latency);
    }
  }
  EXPECT_EQ(find_experiment("ch03/overlap_efficiency"), nullptr) << "merged into ch03/loader_epoch";
}

// Rows that ignore an axis are measured once, without it, and still get their baseline.
TEST(InapplicableAxes, SerialRowsRunOnceWithoutAThreadCount) {
  for (const auto& [id, set] :
       std::vector<std::pair<std::string, std::map<std::string, std::vector<std::string>>>>{
           // Rows of our own only: oneTBB's (v5, v8, v3_tbb_task_group) synchronise inside
           // libtbb, which ThreadSanitizer cannot see, and the tsan preset runs this test too.
           {"ch01/sum_compute_bound",
            {{"n", {"64K"}}, {"threads", {"1", "2"}}, {"variant", {"v0_serial", "v7_local_sums"}}}},
           {"ch01/task_overhead",
            {{"tasks", {"1000"}},
             {"task", {"tiny"}},
             {"threads", {"1", "2"}},
             {"variant", {"v0_inline", "v2_pool", "v5_stealing_pool"}}}}}) {
    SCOPED_TRACE(id);
    const std::vector<Record> recs = smoke_run(id, set);
    int serial = 0;
    for (const Record& r : recs) {
      ASSERT_TRUE(r.valid) << describe(r.params) << ": " << r.validation;
      const std::string& v = r.params.at("variant");
      if (v != "v0_serial" && v != "v0_inline") continue;
      ++serial;
      EXPECT_EQ(r.params.count("threads"), 0u);
      EXPECT_EQ(r.derived.count("speedup"), 1u) << "its baseline is itself";
    }
    EXPECT_EQ(serial, 1) << "measured once, not once per thread count";
  }
}

// exercise_timing(): every timing has the impl axis and its id, and the reference side runs
// wherever it can (chapter 04's need a GPU: there they say why not, as `concurdl exercise` does).
TEST(ExerciseTimings, ReferenceSideRunsInEveryChapter) {
  int timed = 0;
  for (const Exercise& x : exercises()) {
    if (!x.timing.prepare) continue;
    SCOPED_TRACE(x.id);
    ++timed;
    EXPECT_EQ(x.timing.id, "ch" + x.chapter.substr(0, 2) + "/exercise_" + x.id);
    EXPECT_EQ(x.timing.chapter, x.chapter);
    EXPECT_EQ(x.timing.interleave, std::vector<std::string>{"impl"});
    if (x.timing.unavailable) {
      if (const std::string why = x.timing.unavailable(); !why.empty()) {
        EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
        continue;
      }
    }
    RunOptions opt;
    opt.profile = Profile::smoke;
    opt.progress = false;
    opt.repeat = 1;
    opt.set["impl"] = {"reference"};
    for (const Record& r : run_configs(expand({&x.timing}, opt), opt, {}))
      EXPECT_TRUE(r.valid) << describe(r.params) << ": " << r.validation;
  }
  EXPECT_GE(timed, 8);
}

// ch05/precision's rank threads bound where they fit, and its median step one of the
// repetition's steps: positive, and at most twice their mean (at least half of non-negative
// values lie at or above their median), the steps counted from the record's samples/s. A
// per-repetition total, or a unit off by a factor, fails.
TEST(PrecisionSpeed, RanksBoundWhereTheyFitAndTheMedianStepIsOneOfTheSteps) {
  // One record, 2 ranks in FP16 (the sanitizer presets run this test too: a training run each).
  const std::vector<Record> recs = smoke_run("ch05/precision", {{"trainer", {"ours"}},
                                                                {"gemm", {"v4_register"}},
                                                                {"arch", {"784-256-128-10"}},
                                                                {"ranks", {"2"}},
                                                                {"update", {"replicated"}},
                                                                {"precision", {"fp16"}}});
  ASSERT_EQ(recs.size(), 1u);
  for (const Record& r : recs) {
    SCOPED_TRACE(describe(r.params));
    ASSERT_TRUE(r.valid) << r.validation;
    // Every rank on a CPU of its own where each has one; otherwise said to be oversubscribed.
    const bool fits = std::stoul(r.params.at("ranks")) <= concurdl::hardware_threads();
    EXPECT_EQ(r.notes.count("cpu_binding"), fits ? 1u : 0u);
    EXPECT_EQ(r.notes.count("oversubscribed"), fits ? 0u : 1u);
    ASSERT_EQ(r.metrics.count("step_median_s"), 1u);
    const std::vector<double>& med = r.metrics.at("step_median_s").samples;
    ASSERT_EQ(med.size(), r.samples.size());
    const double rows = 64.0 * std::stod(r.params.at("ranks"));
    const double steps = r.derived.at("items_per_s") * r.stats.median / rows;
    ASSERT_GE(steps, 1.0);
    EXPECT_NEAR(steps, std::round(steps), 1e-6 * steps);
    for (std::size_t i = 0; i < med.size(); ++i) {
      EXPECT_GT(med[i], 0.0);
      EXPECT_LE(med[i], 2.0 * r.samples[i] / std::round(steps));
    }
  }
}

TEST(MergedExperiments, LoaderEpochRefusesAComputeRatioOfZero) {
  EXPECT_THROW(smoke_run("ch03/loader_epoch", {{"records", {"512"}}, {"compute_ratio", {"0"}}}),
               UsageError);
}

}  // namespace
