// Every numeric axis of every experiment and exercise timing declares its largest value
// (Axis::max), so that an absurd `--set` is a usage error naming the axis before anything runs,
// never a failed allocation recorded as an invalid run or a run that does not end. For each
// limit, expand() takes the limit itself and refuses one more (and one less than a declared
// min). Linked with every chapter, the kernels and the calibration, as `concurdl` is.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/exercise.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/runner.hpp"

namespace {

using namespace concurdl;

// Numeric axes without a limit, each with the reason. Keep this short: a limit is almost
// always known (memory, a counter's width, a run's length).
const std::map<std::pair<std::string, std::string>, std::string> kExempt = {
    {{"kernels/train", "seed"}, "a seed picks a sequence: every value costs the same"},
};

bool numeric(const Axis& a) { return a.kind != AxisKind::text; }

// The registered experiments and the exercises' timings (which run through expand() too).
std::vector<const Experiment*> every_experiment() {
  std::vector<const Experiment*> out;
  for (const Experiment& e : experiments()) out.push_back(&e);
  for (const Exercise& x : exercises())
    if (x.timing.prepare) out.push_back(&x.timing);
  return out;
}

// What expand() says about `--set axis=value`: "" when it takes it.
std::string expand_error(const Experiment& e, const std::string& axis, const std::string& value) {
  RunOptions opt;
  opt.set[axis] = {value};
  try {
    expand({&e}, opt);
  } catch (const UsageError& x) {
    return x.what();
  }
  return "";
}

TEST(AxisLimits, TheSuiteHasExperimentsOfEveryChapter) {
  // Guards the test below against passing on an empty registry (a link that dropped them).
  std::map<std::string, int> per_chapter;
  for (const Experiment* e : every_experiment()) ++per_chapter[e->chapter];
  for (const char* chapter : {"00-calibration", "01-threads", "02-locks", "03-async-io", "kernels"})
    EXPECT_GT(per_chapter[chapter], 0) << chapter;
}

TEST(AxisLimits, EveryNumericAxisDeclaresItsLargestValue) {
  for (const Experiment* e : every_experiment())
    for (const Axis& a : e->axes) {
      if (!numeric(a) || kExempt.count({e->id, a.name})) continue;
      EXPECT_NE(a.max, 0) << e->id << " axis '" << a.name
                          << "' has no max: declare the largest value it takes (what fits in "
                             "memory, what its counters hold, what ends in reasonable time), or "
                             "exempt it here with the reason";
    }
}

TEST(AxisLimits, ExemptionsNameAxesThatExistWithoutALimit) {
  for (const auto& [where, why] : kExempt) {
    const Experiment* e = find_experiment(where.first);
    ASSERT_NE(e, nullptr) << where.first << " (" << why << ")";
    bool found = false;
    for (const Axis& a : e->axes)
      if (a.name == where.second) {
        found = true;
        EXPECT_TRUE(numeric(a)) << where.first << " " << where.second;
        EXPECT_EQ(a.max, 0) << where.first << " " << where.second << " has a max now: drop the "
                            << "exemption";
      }
    EXPECT_TRUE(found) << where.first << " has no axis '" << where.second << "'";
  }
}

TEST(AxisLimits, ExpandTakesTheLimitAndRefusesOneMore) {
  int checked = 0;
  for (const Experiment* e : every_experiment())
    for (const Axis& a : e->axes) {
      if (!numeric(a)) continue;
      const std::string named = "parameter '" + a.name + "'";
      if (a.max != 0) {
        ++checked;
        EXPECT_EQ(expand_error(*e, a.name, std::to_string(a.max)), "")
            << e->id << " refuses its own max " << a.name << "=" << a.max;
        const std::string e_over = expand_error(*e, a.name, std::to_string(a.max + 1));
        EXPECT_NE(e_over.find(named), std::string::npos)
            << e->id << " " << a.name << "=" << a.max + 1 << ": '" << e_over << "'";
        EXPECT_NE(e_over.find(std::to_string(a.max)), std::string::npos) << e_over;
      }
      if (a.min) {
        EXPECT_EQ(expand_error(*e, a.name, std::to_string(*a.min)), "")
            << e->id << " refuses its own min " << a.name << "=" << *a.min;
        const std::string e_under = expand_error(*e, a.name, std::to_string(*a.min - 1));
        EXPECT_NE(e_under.find(named), std::string::npos)
            << e->id << " " << a.name << "=" << *a.min - 1 << ": '" << e_under << "'";
      }
    }
  EXPECT_GT(checked, 50) << "the suite's experiments have more numeric axes than that";
}

TEST(AxisLimits, ThreadAxesStopAtTheSharedLimit) {
  for (const std::vector<std::string>& counts : {thread_counts(), thread_counts_up_to_cores()})
    for (const std::string& c : counts) EXPECT_LE(std::stoll(c), kMaxThreads) << c;
  EXPECT_LE(std::stoll(exercise_threads()), kMaxThreads);
}

}  // namespace
