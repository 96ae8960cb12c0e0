// The CPU references (reference.hpp) the GPU versions are judged against.
//   ch04_tests --gtest_filter='Reference*'
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "concurdl/gpu/index.hpp"
#include "concurdl/gpu/reference.hpp"

namespace {

using namespace concurdl::gpu;

TEST(Reference, VectorAddAndStridedCopy) {
  const auto a = test_values(1001, 1), b = test_values(1001, 2);
  std::vector<float> c(1001);
  vector_add_ref(a, b, c);
  for (std::size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], a[i] + b[i]);
  copy_strided_ref(a, c, 32);
  for (std::size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], a[strided_source(i, 32, 1001)]);
  std::vector<float> shorter(10);
  EXPECT_THROW(vector_add_ref(a, b, shorter), std::invalid_argument);
  EXPECT_THROW(copy_strided_ref(a, shorter, 32), std::invalid_argument);
}

// Small integers sum exactly in float in any order, so a sum is checked by equality: the
// float sum equals the double sum, and a sum that lost one non-zero element does not.
TEST(Reference, SmallIntegersSumExactlyInFloat) {
  for (const std::size_t n : {1ul, 7ul, 1000ul, 1'000'003ul, std::size_t{1} << 24}) {
    const auto x = small_integers(n, 3);
    EXPECT_EQ(static_cast<double>(sum_float(x)), sum_ref(x)) << n;
    std::size_t last = n;
    while (last > 0 && x[last - 1] == 0.0f) --last;
    if (last > 0) {
      const std::span<const float> lost_one(x.data(), last - 1);
      EXPECT_NE(sum_ref(lost_one), sum_ref(x)) << n;
    }
    for (const float v : x) ASSERT_TRUE(v == std::round(v) && v >= -2.0f && v <= 2.0f);
  }
  EXPECT_EQ(test_values(5, 9), test_values(5, 9));
  for (const float v : test_values(1000, 4)) ASSERT_TRUE(v >= -1.0f && v < 1.0f);
}

}  // namespace
