// Every schedule in schedule.hpp's table, at 1, 2, 4 and 8 threads, must render exactly the
// serial image: each row written once, by someone, with the same integer counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/threads/schedule.hpp"

namespace {

using namespace concurdl::threads;

using concurdl::testing::within_seconds;

MandelbrotView small_view(int rows, int cols) {
  MandelbrotView v;
  v.rows = rows;
  v.cols = cols;
  v.max_iter = 200;  // small, so the tsan build stays fast; the rows are still uneven
  return v;
}

void expect_matches_serial(const ScheduleVariant& variant, const MandelbrotView& view) {
  const std::vector<std::uint32_t> want = mandelbrot_serial(view);
  for (int threads : {1, 2, 4, 8}) {
    std::unique_ptr<ThreadPool> pool;
    if (variant.runner == Runner::pool)
      pool = std::make_unique<ThreadPool>(static_cast<unsigned>(threads));
    // A sentinel no pixel can have (max_iter is small): a row nobody rendered cannot pass.
    std::vector<std::uint32_t> got(image_size(view), 0xFFFFFFFFu);
    variant.render(view, got.data(), threads, pool.get());
    std::size_t wrong = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i] && wrong++ == 0) first = i;
    EXPECT_EQ(wrong, 0u) << "threads=" << threads << " rows=" << view.rows << ": first wrong pixel "
                         << first << " (row " << first / view.cols << ") is " << got[first]
                         << ", serial " << want[first];
  }
}

class ScheduleVariants : public ::testing::TestWithParam<ScheduleVariant> {};

TEST_P(ScheduleVariants, MatchesTheSerialImage) {
  within_seconds(60, [] { expect_matches_serial(GetParam(), small_view(48, 96)); });
}

// Row counts that do not divide evenly, and fewer rows than threads: blocks must still cover
// every row exactly once.
TEST_P(ScheduleVariants, UnevenAndTinyRowCounts) {
  within_seconds(60, [] {
    for (int rows : {1, 3, 37}) expect_matches_serial(GetParam(), small_view(rows, 24));
  });
}

INSTANTIATE_TEST_SUITE_P(Schedule, ScheduleVariants, ::testing::ValuesIn(kScheduleVariants),
                         [](const auto& info) { return std::string(info.param.name); });

// The premise of the lesson: the rows really are uneven, and not symmetric about the middle
// (two contiguous blocks would otherwise balance by accident).
TEST(ScheduleView, RowsAreUnevenAndAsymmetric) {
  MandelbrotView v = small_view(64, 128);
  const std::vector<std::uint32_t> image = mandelbrot_serial(v);
  std::vector<std::uint64_t> row_work(static_cast<std::size_t>(v.rows), 0);
  for (int r = 0; r < v.rows; ++r)
    for (int c = 0; c < v.cols; ++c)
      row_work[static_cast<std::size_t>(r)] += image[static_cast<std::size_t>(r * v.cols + c)];
  std::uint64_t first_half = 0, second_half = 0, lightest = UINT64_MAX, heaviest = 0;
  for (int r = 0; r < v.rows; ++r) {
    const std::uint64_t w = row_work[static_cast<std::size_t>(r)];
    (r < v.rows / 2 ? first_half : second_half) += w;
    lightest = std::min(lightest, w);
    heaviest = std::max(heaviest, w);
  }
  EXPECT_GT(heaviest, 10 * lightest);
  EXPECT_GT(first_half, 3 * second_half / 2) << "two static blocks would be nearly balanced";
}

TEST(ScheduleView, PoolVariantsRejectAMissingOrWrongSizedPool) {
  const MandelbrotView v = small_view(4, 4);
  std::vector<std::uint32_t> image(image_size(v));
  ThreadPool two(2);
  for (const ScheduleVariant& variant : kScheduleVariants) {
    if (variant.runner != Runner::pool) continue;
    EXPECT_THROW(variant.render(v, image.data(), 2, nullptr), std::invalid_argument)
        << variant.name;
    EXPECT_THROW(variant.render(v, image.data(), 3, &two), std::invalid_argument) << variant.name;
  }
}

}  // namespace
