// torch_peer.hpp.
#include "concurdl/nn/torch_peer.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "concurdl/build_info.hpp"

namespace concurdl::nn {

namespace {

std::string torch_missing() {
  namespace fs = std::filesystem;
  if (!fs::exists(kPeerPython)) return "no /usr/bin/python3";
  if (!fs::exists(torch_peer_script())) return "no " + torch_peer_script().string();
  for (const char* dir :
       {"/usr/lib/python3/dist-packages/torch", "/usr/local/lib/python3/dist-packages/torch"})
    if (fs::exists(fs::path(dir) / "__init__.py")) return "";
  for (const char* root : {"/usr/local/lib", "/usr/lib"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.path().filename().string().rfind("python3", 0) == 0 &&
          (fs::exists(e.path() / "dist-packages/torch/__init__.py") ||
           fs::exists(e.path() / "site-packages/torch/__init__.py")))
        return "";
  }
  return "/usr/bin/python3 has no torch (apt-get install python3-torch)";
}

}  // namespace

std::filesystem::path torch_peer_script() {
  return std::filesystem::path(build::source_dir) / "kernels/nn/scripts/torch_peer.py";
}

const std::string& torch_why_not() {
  static const std::string why = torch_missing();
  return why;
}

nlohmann::json run_torch_peer(const std::string& flags) {
  const std::string cmd = fmt::format("OMP_NUM_THREADS=1 {} {} {} 2>&1", kPeerPython,
                                      torch_peer_script().string(), flags);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("PyTorch peer: cannot start " + cmd);
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) out += buf.data();
  const int status = ::pclose(pipe);
  const std::size_t at = out.rfind("{\"");
  if (at == std::string::npos || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("PyTorch peer: " + cmd + " failed: " + out.substr(0, 400));
  return nlohmann::json::parse(out.substr(at));
}

}  // namespace concurdl::nn
