// The runner's declared metrics: an optional one is in every sample of a record or in none, and
// a record that never measured it leaves it out (not 0).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "concurdl/harness/calibrate.hpp"
#include "concurdl/harness/runner.hpp"
#include "runner_test_util.hpp"

using namespace concurdl;
using concurdl::test::configs_of;

namespace {

const bool registered = [] {
  // A declared metric that one trial (a peer that does not count it) leaves out of every
  // sample, one that measures it, one that has it in some samples only, one that omits a
  // required metric.
  register_experiment({
      .id = "test/runner_optional_metric",
      .chapter = "98-runner-test",
      .title = "optional metrics",
      .axes = {{"variant", {"measured", "left_out", "some", "required_missing"}}},
      .metrics = {{"held_bytes", "B", false, "what it held", true},
                  {"steps", "", false, "steps taken"}},
      .prepare =
          [](const Params& p, GroupCache&) {
            const std::string v = p.at("variant");
            auto n = std::make_shared<int>(0);
            Trial t;
            t.measure = [=] {
              Sample s(1.0);
              if (v != "required_missing") s.metrics["steps"] = 3;
              if (v == "measured" || (v == "some" && ++*n % 2 == 0)) s.metrics["held_bytes"] = 64;
              return s;
            };
            return t;
          },
  });
  return true;
}();

}  // namespace

// A metric not measured is left out of the record, not 0; in some samples only, it is an error.
TEST(Runner, AnOptionalMetricIsInEverySampleOrLeftOut) {
  RunOptions opt;
  opt.progress = false;
  opt.repeat = 3;
  const auto records = run_configs(configs_of("test/runner_optional_metric", opt), opt, {});
  std::map<std::string, const Record*> by;
  for (const Record& r : records) by[r.params.at("variant")] = &r;
  ASSERT_EQ(by.size(), 4u);
  ASSERT_TRUE(by["measured"]->valid) << by["measured"]->validation;
  EXPECT_EQ(by["measured"]->metrics.at("held_bytes").samples.size(), 3u);
  ASSERT_TRUE(by["left_out"]->valid) << by["left_out"]->validation;
  EXPECT_EQ(by["left_out"]->metrics.count("held_bytes"), 0u);
  EXPECT_EQ(by["left_out"]->metrics.at("steps").samples.size(), 3u);
  EXPECT_FALSE(by["some"]->valid);
  EXPECT_NE(by["some"]->validation.find("'held_bytes' is in some"), std::string::npos)
      << by["some"]->validation;
  EXPECT_FALSE(by["required_missing"]->valid);
  EXPECT_NE(by["required_missing"]->validation.find("no metric 'steps'"), std::string::npos)
      << by["required_missing"]->validation;
}
