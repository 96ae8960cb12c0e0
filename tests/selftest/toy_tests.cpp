// The toy chapter's typed suite: reference and student implementations through the same tests,
// as every chapter does. Not registered with CTest (exercise 99.2 is wrong on purpose); the CLI
// tests run it through `concurdl-selftest exercise 99` and check the verdicts.
#include <gtest/gtest.h>

#include "concurdl/core/testing.hpp"
#include "toy_sum.hpp"

template <int K>
struct Impl {
  static std::int64_t sum(std::int64_t n) {
    return K == 0 ? toy::serial_sum(n) : toy::student_sum(K, n);
  }
};

template <class T>
class ToySum : public ::testing::Test {};

struct ImplNames {
  template <class T>
  static std::string GetName(int i) {
    return i == 0 ? "reference" : "ex99_" + std::to_string(i);
  }
};

using Impls =
    ::testing::Types<Impl<0>, Impl<1>, Impl<2>, Impl<3>, Impl<4>, Impl<5>, Impl<6>, Impl<7>>;
TYPED_TEST_SUITE(ToySum, Impls, ImplNames);

TYPED_TEST(ToySum, SmallSums) {
  CDL_TRY_EXERCISE(for (std::int64_t n
                        : {0, 1, 2, 10}) EXPECT_EQ(TypeParam::sum(n), n * (n - 1) / 2)
                   << "n=" << n);
}

TYPED_TEST(ToySum, MatchesSerialReference) {
  CDL_TRY_EXERCISE(EXPECT_EQ(TypeParam::sum(100000), toy::serial_sum(100000)));
}
