// Lesson-number markers (lesson_numbers.hpp): parsed with their options, resolved against a run
// written here, formatted as the lessons print them, rewritten in place; a marker that names no
// record, several records or a stale number is reported with its line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/harness/lesson_numbers.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/stats.hpp"

namespace {

namespace fs = std::filesystem;
using namespace concurdl;

Record record(const std::string& variant, const std::string& threads, double seconds) {
  Record r;
  r.experiment = "ch01/demo";
  r.chapter = "01-threads";
  r.params = {{"variant", variant}, {"threads", threads}};
  r.samples = {seconds};
  r.stats.median = r.stats.min = r.stats.max = seconds;
  r.stats.n = 1;
  r.derived["items_per_s"] = 1e6 / seconds;
  return r;
}

class LessonNumbersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cdl-lesson-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "ref");
    RunFile f;
    f.records = {record("slow", "1", 0.0152), record("slow", "2", 0.0080),
                 record("fast", "2", 0.0040)};
    f.records[2].metrics["forbidden_per_million"] = {"", false, {3, 9, 5}, {}};
    f.records[2].metrics["forbidden_per_million"].stats = summarize(std::vector<double>{3, 9, 5});
    Record serial = record("serial", "1", 0.02);
    serial.params.erase("threads");  // an axis that does not apply to it
    f.records.push_back(serial);
    f.calibration.mem_bandwidth_bytes_per_s = 49.24e9;
    write_run(dir_ / "ref", f);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LessonNumbersTest, ParsesEveryPartAndOption) {
  const std::string text =
      "a\nb <!-- n ch01/demo variant=fast,threads=2 median t3 vs:variant=slow run:other "
      "unit:x -->4.00 ms<!-- /n --> c";
  const auto markers = parse_number_markers(text);
  ASSERT_EQ(markers.size(), 1u);
  const NumberMarker& m = markers[0];
  EXPECT_EQ(m.line, 2u);
  EXPECT_EQ(m.experiment, "ch01/demo");
  EXPECT_EQ(m.select, (Params{{"variant", "fast"}, {"threads", "2"}}));
  EXPECT_EQ(m.versus, (Params{{"variant", "slow"}}));
  EXPECT_EQ(m.field, "median");
  EXPECT_EQ(m.format, "t3");
  EXPECT_EQ(m.run, "other");
  EXPECT_EQ(m.unit, "x");
  EXPECT_EQ(m.text, "4.00 ms");
}

TEST_F(LessonNumbersTest, MalformedMarkersNameTheirLine) {
  for (const std::string bad :
       {"x\n<!-- n ch01/demo variant=fast median -->1<!-- /n -->",  // no format
        "x\n<!-- n ch01/demo variant=fast median q7 -->1<!-- /n -->",
        "x\n<!-- n ch01/demo variant median f1 -->1<!-- /n -->",
        "x\n<!-- n ch01/demo - median f1 color:red -->1<!-- /n -->",
        "x\n<!-- n ch01/demo - median f1 -->1 and never closed",
        "x\n<!-- n ch01/demo - median f1\n -->1<!-- /n -->"}) {
    SCOPED_TRACE(bad);
    try {
      parse_number_markers(bad);
      ADD_FAILURE() << "accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    }
  }
}

TEST_F(LessonNumbersTest, FormatsAsLessonsPrintThem) {
  EXPECT_EQ(format_number(1.2849, "x2", ""), "1.28×");
  EXPECT_EQ(format_number(28.66, "x1", ""), "28.7×");
  EXPECT_EQ(format_number(0.8938, "f3", ""), "0.894");
  EXPECT_EQ(format_number(22614, "g3", ""), "22600");
  EXPECT_EQ(format_number(0.871, "p0", ""), "87%");
  EXPECT_EQ(format_number(144321, "s3", ""), "144K");
  EXPECT_EQ(format_number(999700, "s3", ""), "1.00M");
  EXPECT_EQ(format_number(49.24e9, "s3", "B/s"), "49.2 GB/s");
  EXPECT_EQ(format_number(0.0152, "t3", ""), "15.2 ms");
  EXPECT_EQ(format_number(8.7e-7, "t2", ""), "870 ns");
  EXPECT_EQ(format_number(4.6, "t2", ""), "4.6 s");
  EXPECT_EQ(format_number(3.0, "f1", "GB"), "3.0 GB");
  EXPECT_EQ(format_number(0.89384, "f4", ""), "0.8938");
  EXPECT_EQ(format_number(22593, "g4", ""), "22590");
}

TEST_F(LessonNumbersTest, ResolvesRecordsPeersAndCalibration) {
  RunLibrary runs(dir_, "ref");
  auto value = [&](const std::string& marker) {
    return marker_value(parse_number_markers(marker + "x<!-- /n -->").at(0), runs);
  };
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=slow,threads=1 median t3 -->"), 0.0152);
  // Lower is better for seconds: the peer's time over this one's.
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=fast,threads=2 median x2 vs:variant=slow -->"),
                   2.0);
  // The serial record has no threads: a peer lacking an axis still matches.
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=fast,threads=2 median x2 vs:variant=serial -->"),
                   5.0);
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=fast items_per_s s3 -->"), 2.5e8);
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=fast items_per_s t3 inv -->"), 4e-9);
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=fast forbidden_per_million f0 -->"), 5);
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=fast forbidden_per_million.max f0 -->"), 9);
  EXPECT_DOUBLE_EQ(value("<!-- n ch01/demo variant=fast forbidden_per_million.min f0 -->"), 3);
  EXPECT_DOUBLE_EQ(value("<!-- n calibration - mem_bandwidth_bytes_per_s s3 -->"), 49.24e9);
}

TEST_F(LessonNumbersTest, RewritesInPlaceAndReportsStaleOrMissing) {
  RunLibrary runs(dir_, "ref");
  const std::string lesson =
      "# Lesson\n"
      "Two threads take <!-- n ch01/demo variant=slow,threads=2 median t3 -->9 ms<!-- /n -->, "
      "<!-- n ch01/demo variant=fast,threads=2 median x1 vs:variant=slow -->2.0×<!-- /n --> "
      "slower than fast.\n"
      "<!-- n ch01/demo variant=slow median t3 -->?<!-- /n -->\n"
      "<!-- n ch01/demo variant=none median t3 -->?<!-- /n -->\n"
      "<!-- n ch01/demo variant=fast nope t3 -->?<!-- /n -->\n"
      "<!-- n ch01/demo variant=fast median t3 run:missing -->?<!-- /n -->\n";
  const fs::path file = dir_ / "README.md";
  std::ofstream(file) << lesson;
  std::size_t count = 0;
  const auto problems = check_numbers(file, runs, count);
  EXPECT_EQ(count, 6u);
  ASSERT_EQ(problems.size(), 5u);
  EXPECT_NE(problems[0].find(":2: the lesson says '9 ms', the run says '8.00 ms'"),
            std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find(":3: ref has 2 records"), std::string::npos) << problems[1];
  EXPECT_NE(problems[2].find(":4: ref has no record of ch01/demo with {variant=none}"),
            std::string::npos)
      << problems[2];
  EXPECT_NE(problems[3].find("has no field 'nope'"), std::string::npos) << problems[3];
  EXPECT_NE(problems[4].find("run 'missing' cannot be loaded"), std::string::npos) << problems[4];

  const std::string fixed = regenerate_numbers(
      "a <!-- n ch01/demo variant=slow,threads=2 median t3 -->9 ms<!-- /n --> b", runs);
  EXPECT_EQ(fixed, "a <!-- n ch01/demo variant=slow,threads=2 median t3 -->8.00 ms<!-- /n --> b");
  EXPECT_EQ(regenerate_numbers(fixed, runs), fixed);
}

}  // namespace
