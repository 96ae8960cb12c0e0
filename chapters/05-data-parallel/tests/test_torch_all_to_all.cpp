// PyTorch's all-to-all, the peer of ch05/all_to_all (kernels/nn/scripts/torch_all_to_all.py):
// over gloo on 3 processes (not a power of two) every sample's last call and the untimed call
// before timing deliver every element, and the script reports the torch it ran; its check
// counts a block delivered to the wrong place; and without torch it says why and exits 3, which
// the experiment turns into a row left out with that reason. The first two run where the
// peer's Python has torch (CONCURDL_TORCH_PYTHON, torch_peer.hpp) and are skipped elsewhere.
//   ch05_tests --gtest_filter='AllToAllTorchPeer*'
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "concurdl/core/testing.hpp"
#include "concurdl/nn/torch_peer.hpp"

namespace {

namespace fs = std::filesystem;
namespace nn = concurdl::nn;
using concurdl::testing::within_seconds;

constexpr int kDeadline = 300;  // starting 3 processes that import torch takes seconds a piece

struct Ran {
  int status = -1;  // the exit status, -1 when it did not exit
  std::string out;  // stdout and stderr
};

Ran run(const std::string& cmd) {
  Ran r;
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) r.out += buf.data();
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(AllToAllTorchPeer, EveryElementReachesItsRankOnThreeProcesses) {
  if (!nn::torch_why_not().empty()) GTEST_SKIP() << nn::torch_why_not();
  nlohmann::json j;
  within_seconds(kDeadline, [&] {
    j = nn::run_torch_script(nn::torch_all_to_all_script(),
                             "--ranks 3 --bytes 12300 --iters 4 --repeat 2");
  });
  EXPECT_EQ(j.at("wrong_before").get<double>(), 0) << j.dump();
  ASSERT_EQ(j.at("seconds").size(), 2u) << j.dump();
  ASSERT_EQ(j.at("wrong").size(), 2u) << j.dump();
  for (const auto& s : j.at("seconds")) EXPECT_GT(s.get<double>(), 0) << j.dump();
  for (const auto& w : j.at("wrong")) EXPECT_EQ(w.get<double>(), 0) << j.dump();
  EXPECT_EQ(j.at("torch").get<std::string>(), nn::torch_pythons().front().version);
  EXPECT_EQ(j.at("backend").get<std::string>(), "gloo");
}

// The script's check, on one rank's buffers without an exchange: with its own send buffer
// copied in as if received, rank 0 of 2 finds the block it keeps right and the second block
// wrong in every float; with the block rank 1 sends it put in that place, nothing wrong.
TEST(AllToAllTorchPeer, TheCheckCountsABlockInTheWrongPlace) {
  if (!nn::torch_why_not().empty()) GTEST_SKIP() << nn::torch_why_not();
  const fs::path script = nn::torch_all_to_all_script();
  const std::string code =
      "import sys, torch; sys.path.insert(0, '" + script.parent_path().string() +
      "'); import torch_all_to_all as m\n"
      "b = m.Blocks(torch, 0, 2, 10); b.fill(); b.recv.copy_(b.send); own = b.wrong()\n"
      "b.recv[5:].copy_(b.expected(1, 0)); print(own, b.wrong())\n";
  const Ran r = run("'" + nn::torch_pythons().front().python + "' -B -c \"" + code + "\"");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
  EXPECT_EQ(last, "5 0\n") << r.out;
}

// Without torch (a torch that fails to import, first on the path) the script prints why on its
// last line and exits 3; the caller gets that line in its error.
TEST(AllToAllTorchPeer, WithoutTorchItSaysWhy) {
  const std::string python = fs::exists(nn::torch_pythons().front().python)
                                 ? nn::torch_pythons().front().python
                                 : std::string(nn::kPeerPython);
  if (!fs::exists(python)) GTEST_SKIP() << "no " << python;
  const fs::path dir =
      fs::temp_directory_path() / ("concurdl-no-torch-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "torch.py") << "raise ImportError('no torch here')\n";
  const Ran r = run("PYTHONPATH='" + dir.string() + "' '" + python + "' " +
                    nn::torch_all_to_all_script().string() + " --ranks 2 --bytes 4096");
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 3) << r.out;
  const std::size_t line = r.out.rfind("{\"");
  ASSERT_NE(line, std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(line));
  EXPECT_NE(j.at("skipped").get<std::string>().find("has no torch (no torch here)"),
            std::string::npos)
      << r.out;
}

}  // namespace
