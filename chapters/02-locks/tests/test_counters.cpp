// The counter table (counters.hpp): every variant's total is exact at 1, 2, 4 and 8 threads, and
// the micro-benchmark's unit of work adds exactly what it says.
//   ch02_tests --gtest_filter='Counter*'
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <string_view>

#include "concurdl/core/testing.hpp"
#include "concurdl/locks/counters.hpp"
#include "concurdl/locks/queue_variants.hpp"  // kThreadSanitizer

// gtest finds PrintTo by argument-dependent lookup: in the row type's namespace. It names the
// row in test listings (and so in CTest) instead of dumping its bytes.
namespace concurdl::locks {
void PrintTo(const CounterVariant& v, std::ostream* os) { *os << v.name; }
}  // namespace concurdl::locks

namespace {

using namespace concurdl::locks;
using concurdl::testing::within_seconds;

class CounterSuite : public ::testing::TestWithParam<CounterVariant> {};

TEST_P(CounterSuite, TotalIsExact) {
  within_seconds(90, [] {
    const std::uint64_t per_thread = kThreadSanitizer ? 5'000 : 100'000;
    for (unsigned threads : {1u, 2u, 4u, 8u})
      EXPECT_EQ(GetParam().count(threads, per_thread), threads * per_thread)
          << threads << " threads";
  });
}

TEST_P(CounterSuite, UncontendedBatchAddsExactly) {
  const std::uint64_t before = GetParam().add_uncontended(0);
  EXPECT_EQ(GetParam().add_uncontended(1000), before + 1000);
}

INSTANTIATE_TEST_SUITE_P(Counters, CounterSuite, ::testing::ValuesIn(kCounterVariants),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CounterTable, RowsAreNamedAndDistinct) {
  std::set<std::string_view> names;
  for (const CounterVariant& v : kCounterVariants) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
    EXPECT_FALSE(v.what.empty());
    EXPECT_EQ(kCounterVariants.lookup(v.name), &v);
  }
}

TEST(CounterTable, ShardsArePadded) {
  // One slot per cache line, or v4 would be false sharing instead of no sharing.
  ShardedCounter c(3);
  c.add(0);
  c.add(2);
  c.add(2);
  EXPECT_EQ(c.total(), 3u);
}

}  // namespace
