// For chapter tests (GoogleTest): run a check on an exercise implementation, turning the stub's
// NotImplemented into a skip that says "exercise 2.3 ticket lock not attempted".
//   TYPED_TEST(SumTest, MatchesSerial) { CDL_TRY_EXERCISE(check_sum<TypeParam>()); }
// Stubs throw on the calling thread (in a constructor or the first call), never inside a worker.
#pragma once

#include <gtest/gtest.h>

#include "concurdl/harness/errors.hpp"

#define CDL_TRY_EXERCISE(...)                          \
  try {                                                \
    __VA_ARGS__;                                       \
  } catch (const ::concurdl::NotImplemented& cdl_e_) { \
    GTEST_SKIP() << cdl_e_.what();                     \
  }
