// The IDX reader: round trips (gzip and plain), and every kind of damage named by file and
// byte offset (bad magic, truncated header, truncated pixels, a cut gzip stream, trailing bytes,
// a count mismatch between images and labels). Then the real thing: Debian's Fashion-MNIST,
// 60000 + 10000 images of 28 x 28 with labels 0..9 (skipped, with a message, when the
// dataset-fashion-mnist package is not installed), and its conversion to shards.
//   data_tests --gtest_filter='Idx*:FashionMnist*'
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <string>

#include "concurdl/data/error.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/data/shards.hpp"
#include "test_util.hpp"

namespace {

using namespace concurdl::data;
using namespace data_test;

// Runs f, expects a DataError whose message names `file` and the byte `offset`.
template <class F>
void expect_data_error(F f, const std::filesystem::path& file, std::uint64_t offset,
                       const std::string& also = "") {
  try {
    f();
    ADD_FAILURE() << "no error for " << file;
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.file(), file.string()) << what;
    EXPECT_EQ(e.offset(), offset) << what;
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find("byte " + std::to_string(offset)), std::string::npos) << what;
    if (!also.empty()) {
      EXPECT_NE(what.find(also), std::string::npos) << what;
    }
  }
}

TEST(Idx, RoundTripGzipAndPlain) {
  ScratchDir dir;
  write_gz(dir.path() / "img.gz", idx_images(5, 3, 4));
  write_plain(dir.path() / "img.raw", idx_images(5, 3, 4));
  write_gz(dir.path() / "lab.gz", idx_labels(5));
  for (const char* name : {"img.gz", "img.raw"}) {
    const IdxImages img = read_idx_images(dir.path() / name);
    EXPECT_EQ(img.count, 5u);
    EXPECT_EQ(img.rows, 3u);
    EXPECT_EQ(img.cols, 4u);
    ASSERT_EQ(img.pixels.size(), 60u);
    EXPECT_EQ(img.image(2)[1], static_cast<std::uint8_t>((2 * 12 + 1) * 7));
  }
  const LabelledImages d = read_labelled_images(dir.path() / "img.gz", dir.path() / "lab.gz");
  EXPECT_EQ(d.size(), 5u);
  EXPECT_EQ(d.labels.labels[3], 3);
}

TEST(Idx, BadMagicNamesFileAndOffset) {
  ScratchDir dir;
  const auto labels = dir.path() / "labels.gz";
  write_gz(labels, idx_labels(4));
  expect_data_error([&] { read_idx_images(labels); }, labels, 0, "swapped");
  const auto junk = dir.path() / "junk.gz";
  write_gz(junk,
           Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!'});
  expect_data_error([&] { read_idx_labels(junk); }, junk, 0, "magic");
}

TEST(Idx, TruncatedHeaderAndData) {
  ScratchDir dir;
  Bytes img = idx_images(10, 28, 28);
  const auto header = dir.path() / "header.gz";
  write_gz(header, Bytes(img.begin(), img.begin() + 10));  // ends inside the row count
  expect_data_error([&] { read_idx_images(header); }, header, 10, "truncated");
  const auto pixels = dir.path() / "pixels.gz";
  write_gz(pixels, Bytes(img.begin(), img.begin() + 16 + 1000));  // 1000 of 7840 pixels
  expect_data_error([&] { read_idx_images(pixels); }, pixels, 16 + 1000, "truncated");
  const auto labels = dir.path() / "labels.raw";
  Bytes lab = idx_labels(100);
  lab.resize(8 + 50);
  write_plain(labels, lab);
  expect_data_error([&] { read_idx_labels(labels); }, labels, 8 + 50, "truncated");
}

TEST(Idx, CutGzipStreamIsAnError) {
  ScratchDir dir;
  const auto whole = dir.path() / "whole.gz";
  write_gz(whole, idx_images(50, 28, 28));
  Bytes gz = read_all(whole);
  gz.resize(gz.size() / 2);  // the compressed stream stops half-way
  const auto cut = dir.path() / "cut.gz";
  write_plain(cut, gz);
  try {
    read_idx_images(cut);
    ADD_FAILURE() << "a cut gzip stream went unnoticed";
  } catch (const DataError& e) {
    EXPECT_EQ(e.file(), cut.string());
    EXPECT_GT(e.offset(), 16u);  // somewhere in the pixels
    EXPECT_LT(e.offset(), 16u + 50 * 784);
  }
}

TEST(Idx, TrailingBytesAndImplausibleSizes) {
  ScratchDir dir;
  Bytes img = idx_images(2, 2, 2);
  img.push_back(0);
  const auto extra = dir.path() / "extra.gz";
  write_gz(extra, img);
  expect_data_error([&] { read_idx_images(extra); }, extra, 16 + 8, "after the last image");
  Bytes zero_rows;
  put_be32(zero_rows, 2051);
  put_be32(zero_rows, 1);
  put_be32(zero_rows, 0);
  put_be32(zero_rows, 28);
  const auto zr = dir.path() / "zero.gz";
  write_gz(zr, zero_rows);
  expect_data_error([&] { read_idx_images(zr); }, zr, 8, "implausible");
}

TEST(Idx, CountMismatchNamesTheLabelsFile) {
  ScratchDir dir;
  write_gz(dir.path() / "img.gz", idx_images(5, 2, 2));
  write_gz(dir.path() / "lab.gz", idx_labels(6));
  expect_data_error([&] { read_labelled_images(dir.path() / "img.gz", dir.path() / "lab.gz"); },
                    dir.path() / "lab.gz", 4, "holds 6 labels");
}

TEST(Idx, MissingFile) {
  ScratchDir dir;
  expect_data_error([&] { read_idx_labels(dir.path() / "nothere.gz"); }, dir.path() / "nothere.gz",
                    0, "cannot be opened");
}

class FashionMnistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why; !fashion_mnist_present(fashion_mnist_dir(), &why)) GTEST_SKIP() << why;
  }
};

TEST_F(FashionMnistTest, SixtyThousandPlusTenThousand28x28WithLabels0To9) {
  const FashionMnist fm = load_fashion_mnist();
  for (const auto* split : {&fm.train, &fm.test}) {
    const bool train = split == &fm.train;
    SCOPED_TRACE(train ? "train" : "test");
    EXPECT_EQ(split->images.count, train ? 60000u : 10000u);
    EXPECT_EQ(split->size(), train ? 60000u : 10000u);
    EXPECT_EQ(split->images.rows, 28u);
    EXPECT_EQ(split->images.cols, 28u);
    EXPECT_EQ(split->images.pixels.size(), split->size() * 784);
    // Fashion-MNIST is balanced: 6000 (train) / 1000 (test) images of each of the 10 classes.
    std::array<int, 10> per_class{};
    for (std::uint8_t l : split->labels.labels) {
      ASSERT_LT(l, 10);
      ++per_class[l];
    }
    for (int c : per_class) EXPECT_EQ(c, train ? 6000 : 1000);
  }
  // Pixel statistics match the published normalisation constants.
  double sum = 0;
  for (std::uint8_t px : fm.train.images.pixels) sum += px;
  EXPECT_NEAR(sum / fm.train.images.pixels.size() / 255.0, kFashionMnistMean, 0.001);
}

TEST_F(FashionMnistTest, ConvertsToShardsAndBack) {
  const FashionMnist fm = load_fashion_mnist();
  ScratchDir dir;
  const DatasetInfo info = write_labelled_images(dir.path() / "test", fm.test, 4096);
  EXPECT_EQ(info.records, 10000u);
  EXPECT_EQ(info.shards.size(), 3u);
  EXPECT_EQ(info.payload_bytes(), 784u);
  const DatasetInfo again = read_index(dir.path() / "test");
  verify_records(again);  // every id and CRC
  ShardedDataset ds(dir.path() / "test");
  std::vector<std::byte> rec(ds.record_size());
  for (std::uint64_t id : {0ull, 4095ull, 4096ull, 9999ull}) {
    const RecordLocation loc = ds.locate(id);
    ASSERT_EQ(::pread(ds.fd(loc.shard), rec.data(), rec.size(), static_cast<off_t>(loc.offset)),
              static_cast<ssize_t>(rec.size()));
    EXPECT_EQ(check_record(rec, id), "");
    EXPECT_EQ(decode_record_header(rec).label, fm.test.labels.labels[id]);
    const auto px = record_payload(rec);
    const auto want = fm.test.images.image(id);
    EXPECT_TRUE(std::equal(px.begin(), px.end(), want.begin(), want.end())) << "image " << id;
  }
}

}  // namespace
