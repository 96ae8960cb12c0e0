// The training modes' registry: a row's flags are the command's, shared flags must be declared
// alike, a mode chosen by its own flags must own them and say how many ranks it asks for, and a
// mode reads its flags' values from DistributedOptions.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::nn {
namespace {

void no_run(const DistributedOptions&, const TrainConfig&, const Dataset&, const RankLoop&) {}

const ModeFlag kWidth{.name = "--test-width", .help = "a test flag", .min = 1, .max = 8};

TEST(TrainingModes, AFlagSharedByTwoModesIsListedOnceAndMustBeDeclaredAlike) {
  ASSERT_TRUE(register_training_mode({.name = "test-a", .flags = {kWidth}, .run = no_run}));
  ASSERT_TRUE(register_training_mode({.name = "test-b", .flags = {kWidth}, .run = no_run}));
  const std::vector<ModeFlag> flags = training_mode_flags();
  EXPECT_EQ(std::count_if(flags.begin(), flags.end(),
                          [](const ModeFlag& f) { return f.name == "--test-width"; }),
            1);
  ModeFlag wider = kWidth;
  wider.max = 16;
  EXPECT_THROW(register_training_mode({.name = "test-c", .flags = {wider}, .run = no_run}),
               std::logic_error);
  EXPECT_EQ(find_training_mode("test-c"), nullptr);
  EXPECT_TRUE(find_training_mode("test-b")->owns("--test-width"));
  EXPECT_FALSE(find_training_mode("test-b")->owns("--staleness"));
}

TEST(TrainingModes, AModeChosenByItsFlagsOwnsThemAndCountsItsRanks) {
  // Chosen by a flag it does not own.
  EXPECT_THROW(register_training_mode({.name = "test-d",
                                       .chosen_by = {"--test-other"},
                                       .chosen_as = "--test-other N",
                                       .ranks = [](const DistributedOptions&) { return 1; },
                                       .run = no_run}),
               std::logic_error);
  // Chosen by its flag, but no rank count.
  const ModeFlag stages{.name = "--test-stages", .help = "", .min = 1, .max = 8};
  EXPECT_THROW(register_training_mode({.name = "test-e",
                                       .flags = {stages},
                                       .chosen_by = {stages.name},
                                       .chosen_as = "--test-stages P",
                                       .run = no_run}),
               std::logic_error);
  ASSERT_TRUE(register_training_mode({.name = "test-f",
                                      .flags = {stages},
                                      .chosen_by = {stages.name},
                                      .chosen_as = "--test-stages P",
                                      .ranks =
                                          [](const DistributedOptions& o) {
                                            return static_cast<int>(o.number("--test-stages", 1));
                                          },
                                      .run = no_run}));
  const TrainingMode* m = find_training_mode("test-f");
  EXPECT_EQ(m->how_chosen(), "--test-stages P");
  DistributedOptions o;
  o.values["--test-stages"] = "3";
  EXPECT_EQ(m->ranks(o), 3);
  ASSERT_TRUE(register_training_mode({.name = "test-g", .run = no_run}));
  EXPECT_EQ(find_training_mode("test-g")->how_chosen(), "--mode test-g");
}

TEST(TrainingModes, OptionsGiveAModesValuesOrItsDefaults) {
  DistributedOptions o;
  o.values["--staleness"] = "2";
  o.values["--schedule"] = "gpipe";
  o.values["--recompute"] = "1";
  EXPECT_EQ(o.number("--staleness", -1), 2);
  EXPECT_EQ(o.number("--local-steps", 8), 8);
  EXPECT_EQ(o.text("--schedule", "1f1b"), "gpipe");
  EXPECT_EQ(o.text("--other", "1f1b"), "1f1b");
  EXPECT_TRUE(o.toggle("--recompute"));
  EXPECT_FALSE(o.toggle("--push-pull"));
  o.values["--staleness"] = "two";
  EXPECT_THROW((void)o.number("--staleness", -1), std::invalid_argument);
}

}  // namespace
}  // namespace concurdl::nn
