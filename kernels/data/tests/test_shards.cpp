// The sharded record format and synthetic data sets: round trip and random access, determinism
// from the seed, and a DataError naming the file and byte offset for every kind of damage: a
// truncated shard, a corrupt header, a corrupt record, extra bytes, a missing, truncated or
// corrupt index.
//   data_tests --gtest_filter='Shards*:Synthetic*'
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "concurdl/data/error.hpp"
#include "concurdl/data/shards.hpp"
#include "concurdl/data/synthetic.hpp"
#include "test_util.hpp"

namespace {

using namespace concurdl::data;
using namespace data_test;

const SyntheticSpec kSpec{.records = 250, .payload_bytes = 100, .classes = 10, .seed = 5};

template <class F>
void expect_data_error(F f, const std::filesystem::path& file, std::uint64_t offset,
                       const std::string& also) {
  try {
    f();
    ADD_FAILURE() << "no error for " << file;
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.file(), file.string()) << what;
    EXPECT_EQ(e.offset(), offset) << what;
    EXPECT_NE(what.find("byte " + std::to_string(offset)), std::string::npos) << what;
    EXPECT_NE(what.find(also), std::string::npos) << what;
  }
}

void patch(const std::filesystem::path& p, std::uint64_t offset, std::byte value) {
  UniqueFd fd = open_file(p, O_RDWR);
  ASSERT_EQ(::pwrite(fd.get(), &value, 1, static_cast<off_t>(offset)), 1);
}

TEST(Shards, RoundTripAndRandomAccess) {
  ScratchDir dir;
  const DatasetInfo w = write_synthetic_dataset(dir.path() / "ds", kSpec, 100);
  ASSERT_EQ(w.shards.size(), 3u);
  const DatasetInfo info = read_index(dir.path() / "ds");
  EXPECT_EQ(info.records, 250u);
  EXPECT_EQ(info.record_size, 116u);
  EXPECT_EQ(info.shards[2].first_id, 200u);
  EXPECT_EQ(info.shards[2].count, 50u);
  verify_records(info);
  EXPECT_EQ(locate(info, 0).shard, 0u);
  EXPECT_EQ(locate(info, 0).offset, kShardHeaderBytes);
  EXPECT_EQ(locate(info, 199).shard, 1u);
  EXPECT_EQ(locate(info, 199).offset, kShardHeaderBytes + 99 * 116);
  EXPECT_THROW(locate(info, 250), std::out_of_range);

  ShardedDataset ds(dir.path() / "ds");
  std::vector<std::byte> rec(ds.record_size()), want(ds.record_size());
  for (std::uint64_t id = 0; id < 250; id += 13) {
    const RecordLocation loc = ds.locate(id);
    ASSERT_EQ(::pread(ds.fd(loc.shard), rec.data(), rec.size(), static_cast<off_t>(loc.offset)),
              static_cast<ssize_t>(rec.size()));
    synthetic_record(kSpec, id, want);
    EXPECT_EQ(rec, want) << "record " << id;
    EXPECT_EQ(decode_record_header(rec).label, synthetic_label(kSpec, id));
  }
}

TEST(Synthetic, DeterministicFromTheSeed) {
  std::vector<std::uint8_t> a(1000), b(1000), c(1000);
  synthetic_payload(kSpec, 17, a);
  synthetic_payload(kSpec, 17, b);
  SyntheticSpec other = kSpec;
  other.seed = 6;
  synthetic_payload(other, 17, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Labels use every class and stay in range.
  std::vector<int> seen(kSpec.classes, 0);
  for (std::uint64_t id = 0; id < 1000; ++id) ++seen.at(synthetic_label(kSpec, id));
  for (int s : seen) EXPECT_GT(s, 50);
  // Random files: a stream that can be entered at any 8-byte offset.
  std::vector<std::byte> whole(4096), tail(1024);
  fill_random(whole, 3);
  fill_random(tail, 3, 2048);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), whole.begin() + 2048));
  ScratchDir dir;
  EXPECT_EQ(write_random_file(dir.path() / "r", 4096, 3),
            crc32_of(std::span<const std::byte>(whole)));
}

TEST(Shards, TruncatedShardNamesFileAndOffset) {
  ScratchDir dir;
  const DatasetInfo info = write_synthetic_dataset(dir.path() / "ds", kSpec, 100);
  const auto shard = info.shards[1].path;
  const std::uint64_t cut = kShardHeaderBytes + 40 * 116 + 7;  // inside record 140
  std::filesystem::resize_file(shard, cut);
  expect_data_error([&] { read_index(dir.path() / "ds"); }, shard, cut, "record 140");
  std::filesystem::resize_file(shard, 100);  // inside the header
  expect_data_error([&] { read_index(dir.path() / "ds"); }, shard, 100, "header");
}

TEST(Shards, CorruptHeaderAndExtraBytes) {
  ScratchDir dir;
  const DatasetInfo info = write_synthetic_dataset(dir.path() / "ds", kSpec, 100);
  const auto shard = info.shards[0].path;
  patch(shard, 0, std::byte{'X'});
  expect_data_error([&] { read_index(dir.path() / "ds"); }, shard, 0, "CDLSHARD");
  patch(shard, 0, std::byte{'C'});
  patch(shard, 24, std::byte{99});  // the record count, under the header's CRC
  expect_data_error([&] { read_index(dir.path() / "ds"); }, shard, 40, "CRC");
  ScratchDir dir2;
  const DatasetInfo info2 = write_synthetic_dataset(dir2.path() / "ds", kSpec, 100);
  const auto last = info2.shards[2].path;
  const std::uint64_t size = std::filesystem::file_size(last);
  std::filesystem::resize_file(last, size + 3);
  expect_data_error([&] { read_index(dir2.path() / "ds"); }, last, size, "unexpected bytes");
}

TEST(Shards, CorruptRecordFoundByVerify) {
  ScratchDir dir;
  const DatasetInfo info = write_synthetic_dataset(dir.path() / "ds", kSpec, 100);
  const RecordLocation loc = locate(info, 123);
  patch(info.shards[loc.shard].path, loc.offset + 16 + 50, std::byte{0xAB});
  const DatasetInfo again = read_index(dir.path() / "ds");  // headers are fine
  expect_data_error([&] { verify_records(again); }, info.shards[loc.shard].path, loc.offset,
                    "record 123");
  patch(info.shards[loc.shard].path, loc.offset, std::byte{0x7F});  // now the id is wrong too
  expect_data_error([&] { verify_records(again); }, info.shards[loc.shard].path, loc.offset,
                    "sample id");
}

TEST(Shards, IndexProblems) {
  ScratchDir dir;
  expect_data_error([&] { read_index(dir.path()); }, dir.path() / kIndexFileName, 0,
                    "cannot be opened");
  write_synthetic_dataset(dir.path() / "ds", kSpec, 100);
  const auto index = dir.path() / "ds" / kIndexFileName;
  const Bytes original = read_all(index);
  Bytes cut(original.begin(), original.end() - 10);
  write_plain(index, cut);
  expect_data_error([&] { read_index(dir.path() / "ds"); }, index, cut.size(), "truncated");
  Bytes flipped = original;
  flipped[40] ^= 1;  // in the first shard entry
  write_plain(index, flipped);
  expect_data_error([&] { read_index(dir.path() / "ds"); }, index, original.size() - 4, "CRC");
  write_plain(index, original);
  std::filesystem::remove(dir.path() / "ds" / "shard-00001.cdls");
  expect_data_error([&] { read_index(dir.path() / "ds"); }, dir.path() / "ds" / "shard-00001.cdls",
                    0, "cannot be opened");
}

TEST(Shards, WriterRejectsBadRecords) {
  ScratchDir dir;
  EXPECT_THROW(ShardWriter(dir.path() / "a", 16, 10), std::invalid_argument);  // no payload
  EXPECT_THROW(ShardWriter(dir.path() / "b", 32, 0), std::invalid_argument);
  ShardWriter w(dir.path() / "c", 32, 10);
  std::vector<std::uint8_t> wrong(10);
  EXPECT_THROW(w.append(0, wrong), std::invalid_argument);
  std::vector<std::uint8_t> right(16);
  w.append(1, right);
  const DatasetInfo info = w.finish();
  EXPECT_EQ(info.records, 1u);
  verify_records(read_index(dir.path() / "c"));
}

TEST(Shards, EmptyDataSet) {
  ScratchDir dir;
  ShardWriter w(dir.path() / "e", 32, 10);
  w.finish();
  const DatasetInfo info = read_index(dir.path() / "e");
  EXPECT_EQ(info.records, 0u);
  EXPECT_TRUE(info.shards.empty());
}

}  // namespace
