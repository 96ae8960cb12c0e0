// Exercise 5.1: the student's ring all-reduce (exercises/student_ring.hpp) through the same
// checks as the reference v4_ring: 1, 2, 3, 4 and 8 ranks, sizes that do and do not divide by
// the rank count (0 and fewer floats than ranks included), in place and out of place. While the
// stub has CDL_TODO the student's tests are skipped as "not attempted".
//   ch05_tests --gtest_filter='Ring/RingEx5_1.*/student_*'      (what `concurdl exercise ch05`
//   runs)
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "../exercises/student_ring.hpp"
#include "collective_checks.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/threads_backend.hpp"

namespace {

using namespace concurdl::dp;
using namespace concurdl::dp::testing;
using concurdl::testing::within_seconds;

struct Impl {
  const char* name;
  AllReduceFn fn;
};
const Impl kImpls[] = {{"reference", &allreduce_ring}, {"student", &student_allreduce_ring}};

class RingEx5_1 : public ::testing::TestWithParam<std::tuple<Impl, int>> {};

TEST_P(RingEx5_1, EqualsTheSerialSum) {
  const Impl impl = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  CDL_TRY_EXERCISE(for (std::size_t count
                        : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{7},
                           std::size_t{1000}, (std::size_t{1} << 16) + 3}) {
    for (bool in_place : {true, false}) {
      SCOPED_TRACE(std::to_string(count) + " floats, " + (in_place ? "in place" : "out of place"));
      std::atomic<std::size_t> wrong{0};
      within_seconds(60, [&] {
        run_threads(ranks, [&](Communicator& comm) {
          wrong += wrong_all_reduce(comm, impl.fn, count, in_place);
        });
      });
      EXPECT_EQ(wrong.load(), 0u);
    }
  });
}

// Twenty in a row with changing sizes and tags: a message left over from one call would be
// taken by the next.
TEST_P(RingEx5_1, BackToBack) {
  const Impl impl = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  CDL_TRY_EXERCISE({
    std::atomic<std::size_t> wrong{0};
    within_seconds(60, [&] {
      run_threads(ranks, [&](Communicator& comm) {
        for (int it = 0; it < 20; ++it) {
          AlgoOptions opts;
          opts.tag = 100 + it % 3;
          wrong += wrong_all_reduce(comm, impl.fn, static_cast<std::size_t>(it * 37 % 101),
                                    it % 2 == 0, opts);
        }
      });
    });
    EXPECT_EQ(wrong.load(), 0u);
  });
}

INSTANTIATE_TEST_SUITE_P(Ring, RingEx5_1,
                         ::testing::Combine(::testing::ValuesIn(kImpls),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
