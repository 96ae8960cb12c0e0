// Checkpoints: a round trip restores every bit; every kind of damage (missing, truncated at
// several points, trailing bytes, an absurd count, a flipped byte, a foreign magic, a future
// version, another architecture) is refused with a CheckpointError naming the file and the
// problem, and leaves the model and the optimiser as they were; saving is atomic (no temporary
// left, an old checkpoint replaced).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "concurdl/nn/checkpoint.hpp"
#include "test_util.hpp"

namespace concurdl::nn {
namespace {

namespace fs = std::filesystem;
using nn_test::same_bits;
using Bytes = std::vector<char>;

Bytes read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(b.data(), static_cast<std::streamsize>(b.size()));
}

// A model and optimiser with non-trivial contents: parameters from the seed, velocity filled.
struct Fixture {
  Mlp model;
  Sgd opt;
  explicit Fixture(const char* arch, std::uint64_t seed)
      : model(MlpSpec::parse(arch), seed), opt(model.parameters().size(), SgdOptions{}) {
    const auto v = nn_test::values(opt.velocity().size(), static_cast<std::uint32_t>(seed));
    std::copy(v.begin(), v.end(), opt.velocity().begin());
  }
};

class Checkpoint : public ::testing::Test {
 protected:
  nn_test::ScratchDir dir;
  fs::path file = dir.path() / "model.ckpt";
  Fixture saved{"7-5-4-3", 1};
  TrainState state{3, 141, 9};

  void SetUp() override { save_checkpoint(file, saved.model, saved.opt, state); }

  // Loading `path` into a fresh model fails with a message naming the file and `problem`,
  // and changes nothing.
  void expect_refused(const fs::path& path, const std::string& problem,
                      const char* arch = "7-5-4-3") {
    Fixture target(arch, 2);
    const std::vector<float> params(target.model.parameters().begin(),
                                    target.model.parameters().end());
    const std::vector<float> velocity(target.opt.velocity().begin(), target.opt.velocity().end());
    try {
      load_checkpoint(path, target.model, target.opt);
      ADD_FAILURE() << "accepted; expected: " << problem;
    } catch (const CheckpointError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path.string()), std::string::npos) << "does not name the file: " << msg;
      EXPECT_NE(msg.find(problem), std::string::npos) << "expected '" << problem << "' in: " << msg;
    }
    EXPECT_TRUE(same_bits(target.model.parameters(), params)) << "model changed by a failed load";
    EXPECT_TRUE(same_bits(target.opt.velocity(), velocity)) << "optimiser changed by a failed load";
  }
};

TEST_F(Checkpoint, RoundTripRestoresEveryBit) {
  Fixture target("7-5-4-3", 2);
  ASSERT_FALSE(same_bits(target.model.parameters(), saved.model.parameters()));
  const TrainState got = load_checkpoint(file, target.model, target.opt);
  EXPECT_EQ(got.epoch, 3u);
  EXPECT_EQ(got.step, 141u);
  EXPECT_EQ(got.seed, 9u);
  EXPECT_TRUE(same_bits(target.model.parameters(), saved.model.parameters()));
  EXPECT_TRUE(same_bits(target.opt.velocity(), saved.opt.velocity()));
}

TEST_F(Checkpoint, LayoutIsAsDocumented) {
  const Bytes b = read_bytes(file);
  ASSERT_GE(b.size(), 28u);
  EXPECT_EQ(std::string(b.data(), 8), "CDLCKPT1");
  std::uint32_t version = 0, header_len = 0;
  std::memcpy(&version, b.data() + 8, 4);
  std::memcpy(&header_len, b.data() + 12, 4);
  EXPECT_EQ(version, kCheckpointVersion);
  const std::string header(b.data() + 16, header_len);
  EXPECT_EQ(header.rfind("arch=7-5-4-3 epoch=3 step=141 seed=9", 0), 0u) << header;
  std::uint64_t count = 0;
  std::memcpy(&count, b.data() + 16 + header_len, 8);
  EXPECT_EQ(count, saved.model.parameters().size());
  EXPECT_EQ(b.size(), 16 + header_len + 8 + 2 * 4 * count + 4);
}

TEST_F(Checkpoint, MissingFileIsRefused) {
  expect_refused(dir.path() / "nope.ckpt", "no such file");
}

TEST_F(Checkpoint, TruncatedFileIsRefusedAtEveryCut) {
  const Bytes whole = read_bytes(file);
  const std::size_t header_end = 16 + 40;  // somewhere inside or just past the header text
  for (const std::size_t cut :
       {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{14}, std::size_t{20},
        header_end, whole.size() / 2, whole.size() - 4, whole.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(whole.size()));
    const fs::path cut_file = dir.path() / ("cut" + std::to_string(cut) + ".ckpt");
    write_bytes(cut_file, Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut)));
    expect_refused(cut_file, "truncated: file is " + std::to_string(cut) + " bytes");
  }
}

TEST_F(Checkpoint, TrailingBytesAndAnAbsurdCountAreRefused) {
  Bytes b = read_bytes(file);
  b.push_back('\0');
  write_bytes(file, b);
  expect_refused(file, "trailing bytes: file is " + std::to_string(b.size()) + " bytes");
  // A parameter count far beyond the file (as a damaged length field would give): refused by
  // size before any arithmetic on it can overflow.
  b.pop_back();
  std::uint32_t header_len = 0;
  std::memcpy(&header_len, b.data() + 12, 4);
  const std::uint64_t absurd = ~std::uint64_t{0} / 2;
  std::memcpy(b.data() + 16 + header_len, &absurd, 8);
  write_bytes(file, b);
  expect_refused(file, std::to_string(absurd) + " parameters");
}

TEST_F(Checkpoint, AFlippedByteFailsTheChecksum) {
  const Bytes whole = read_bytes(file);
  // In the header text, the parameters, the velocity and the CRC itself.
  for (const std::size_t at :
       {std::size_t{20}, whole.size() / 3, whole.size() * 2 / 3, whole.size() - 2}) {
    SCOPED_TRACE("byte " + std::to_string(at));
    Bytes damaged = whole;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    write_bytes(file, damaged);
    expect_refused(file, "checksum mismatch");
  }
}

TEST_F(Checkpoint, AForeignFileIsNotACheckpoint) {
  Bytes b = read_bytes(file);
  b[0] = 'X';
  write_bytes(file, b);
  expect_refused(file, "not a checkpoint");
  write_bytes(file, Bytes{'h', 'e', 'l', 'l', 'o', '\n'});
  expect_refused(file, "not a checkpoint");
}

TEST_F(Checkpoint, AFutureVersionIsRefused) {
  Bytes b = read_bytes(file);
  const std::uint32_t future = kCheckpointVersion + 1;
  std::memcpy(b.data() + 8, &future, 4);
  write_bytes(file, b);
  expect_refused(file, "unsupported format version " + std::to_string(future));
}

TEST_F(Checkpoint, AnotherArchitectureIsRefused) {
  expect_refused(file, "checkpoint is for 7-5-4-3, the model is 7-6-4-3", "7-6-4-3");
  expect_refused(file, "checkpoint is for 7-5-4-3, the model is 7-5-3", "7-5-3");
}

TEST_F(Checkpoint, SaveIsAtomicAndReplaces) {
  auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
    return names;
  };
  EXPECT_EQ(listing(), std::vector<std::string>{"model.ckpt"}) << "a temporary was left behind";
  Fixture other("7-5-4-3", 5);
  save_checkpoint(file, other.model, other.opt, TrainState{4, 200, 9});
  EXPECT_EQ(listing(), std::vector<std::string>{"model.ckpt"}) << "a temporary was left behind";
  Fixture target("7-5-4-3", 2);
  EXPECT_EQ(load_checkpoint(file, target.model, target.opt).epoch, 4u);
  EXPECT_TRUE(same_bits(target.model.parameters(), other.model.parameters()));
  // A directory that does not exist: a CheckpointError naming the file, nothing created.
  const fs::path nowhere = dir.path() / "missing-dir" / "x.ckpt";
  try {
    save_checkpoint(nowhere, other.model, other.opt, {});
    ADD_FAILURE() << "saved into a missing directory";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(nowhere.string()), std::string::npos) << e.what();
  }
  // A relative path (no directory part) works too.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  save_checkpoint("relative.ckpt", other.model, other.opt, {});
  fs::current_path(cwd);
  EXPECT_TRUE(fs::exists(dir.path() / "relative.ckpt"));
}

}  // namespace
}  // namespace concurdl::nn
