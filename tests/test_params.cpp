#include <gtest/gtest.h>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/params.hpp"

using namespace concurdl;

TEST(Params, SizesWithSuffixes) {
  EXPECT_EQ(parse_size("n", "1024"), 1024);
  EXPECT_EQ(parse_size("n", "4K"), 4096);
  EXPECT_EQ(parse_size("n", "16M"), 16 << 20);
  EXPECT_EQ(parse_size("n", "2G"), std::int64_t{2} << 30);
}

TEST(Params, OverflowAndGarbageAreUsageErrorsNamingTheParameter) {
  try {
    parse_size("n", "99999999999999999999");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'n'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64 bits"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_size("n", "9000000000G"), UsageError);  // fits alone, overflows scaled
  EXPECT_THROW(parse_size("n", "0"), UsageError);
  EXPECT_THROW(parse_size("n", "-4"), UsageError);
  EXPECT_THROW(parse_size("n", "12x"), UsageError);
  EXPECT_THROW(parse_size("n", ""), UsageError);
  EXPECT_THROW(check_value("threads", AxisKind::count, "0"), UsageError);
  EXPECT_THROW(check_value("threads", AxisKind::count, "two"), UsageError);
  EXPECT_NO_THROW(check_value("threads", AxisKind::count, "8"));
  EXPECT_THROW(parse_real("x", "nan"), UsageError);
  EXPECT_DOUBLE_EQ(parse_real("x", "0.25"), 0.25);
}

TEST(Params, TypedAccessAndDescribe) {
  const Params p{{"threads", "4"}, {"variant", "v1"}, {"n", "1K"}};
  EXPECT_EQ(param_int(p, "threads"), 4);
  EXPECT_EQ(param_int(p, "n"), 1024);
  EXPECT_EQ(param_str(p, "variant"), "v1");
  EXPECT_THROW(param_str(p, "missing"), UsageError);
  EXPECT_EQ(describe(p), "n=1K, threads=4, variant=v1");
}

TEST(Params, SplitList) {
  EXPECT_EQ(split_list("1,2,4", "--threads"), (std::vector<std::string>{"1", "2", "4"}));
  EXPECT_THROW(split_list("1,,4", "--threads"), UsageError);
  EXPECT_THROW(split_list("", "--threads"), UsageError);
}

// One parser for every number a chart or report reads from a parameter: what some axis kind
// accepts, and nothing else, so `--set n=16m` is drawn at 16 Mi, not as a category.
TEST(Params, NumberValueAcceptsWhatTheAxesAccept) {
  EXPECT_EQ(number_value("8"), 8.0);
  EXPECT_EQ(number_value("-3"), -3.0);  // an integer axis
  EXPECT_EQ(number_value("0.5"), 0.5);
  EXPECT_EQ(number_value("1e-3"), 1e-3);
  EXPECT_EQ(number_value("16m"), 16.0 * (1 << 20));
  EXPECT_EQ(number_value("16M"), 16.0 * (1 << 20));
  EXPECT_EQ(number_value("1k"), 1024.0);
  EXPECT_EQ(number_value("4K"), 4096.0);
  EXPECT_EQ(number_value("2g"), 2.0 * (1 << 30));
  // Every value parse_size accepts has the same number here.
  for (const char* s : {"1", "1024", "4K", "16m", "16M", "2G", "3g"})
    EXPECT_EQ(number_value(s), static_cast<double>(parse_size("n", s))) << s;
  for (const char* s : {"0.25", "1e-3", "-7.5"})
    EXPECT_EQ(number_value(s), parse_real("x", s)) << s;
}

TEST(Params, NumberValueRejectsWhatNoAxisAccepts) {
  for (const char* s : {"", "v1_naive", "12x", "K", "m", "1.5K", "-4K", "0K", "9000000000G", "inf",
                        "nan", "1e999", " 8", "8 ", "0x10", "16 M", "1,024"})
    EXPECT_FALSE(number_value(s).has_value()) << "'" << s << "'";
  // And what parse_size rejects for a size is no number with a suffix either.
  EXPECT_THROW(parse_size("n", "1.5K"), UsageError);
  EXPECT_THROW(parse_size("n", "0K"), UsageError);
}
