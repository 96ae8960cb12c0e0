// torch_peer.hpp.
#include "concurdl/nn/torch_peer.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "concurdl/build_info.hpp"

namespace concurdl::nn {

namespace fs = std::filesystem;

std::string torch_version_in(const fs::path& site_packages) {
  std::ifstream in(site_packages / "torch" / "version.py");
  if (!in || !fs::exists(site_packages / "torch" / "__init__.py")) return "";
  std::stringstream text;
  text << in.rdbuf();
  static const std::regex version(R"re(__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"])re");
  std::smatch m;
  const std::string s = text.str();
  return std::regex_search(s, m, version) ? m[1].str() : std::string("unknown");
}

namespace {

// The directories an interpreter imports packages from, as Debian and a virtual environment lay
// them out: ROOT/lib/python3*/{site,dist}-packages where ROOT is the folder above bin/ (a venv's
// bin/python is a link to the base interpreter, so the path is taken as named, not resolved),
// and for Debian's own /usr/bin/python3 also /usr/lib/python3/dist-packages and /usr/local's.
std::vector<fs::path> site_dirs(const fs::path& python) {
  std::vector<fs::path> roots = {python.parent_path().parent_path()};
  if (python.parent_path() == "/usr/bin") roots.push_back("/usr/local");
  std::vector<fs::path> out;
  for (const fs::path& root : roots) {
    out.push_back(root / "lib/python3/dist-packages");
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root / "lib", ec))
      if (e.path().filename().string().rfind("python3", 0) == 0)
        for (const char* sub : {"site-packages", "dist-packages"}) out.push_back(e.path() / sub);
  }
  return out;
}

TorchPython probe(const std::string& python) {
  TorchPython t;
  t.python = python;
  if (!fs::exists(python)) {
    t.why_not = fmt::format("no {}", python);
    return t;
  }
  if (!fs::exists(torch_peer_script())) {
    t.why_not = "no " + torch_peer_script().string();
    return t;
  }
  for (const fs::path& dir : site_dirs(python))
    if (std::string v = torch_version_in(dir); !v.empty()) {
      t.version = v;
      return t;
    }
  t.why_not = python == kPeerPython
                  ? fmt::format("{} has no torch (apt-get install python3-torch)", python)
                  : fmt::format("{} has no torch ({} -m pip install torch)", python, python);
  return t;
}

std::vector<std::string> named_pythons() {
  const char* env = std::getenv(kPeerPythonEnv);
  std::vector<std::string> out;
  if (env != nullptr) {
    std::stringstream list(env);
    for (std::string item; std::getline(list, item, ',');)
      if (!item.empty()) out.push_back(item);
  }
  if (out.empty()) out.push_back(kPeerPython);
  return out;
}

// "2.9" of "2.9.1+cu128".
std::string major_minor(const std::string& version) {
  const auto first = version.find('.');
  if (first == std::string::npos) return version;
  const auto second = version.find_first_not_of("0123456789", first + 1);
  return version.substr(0, second);
}

}  // namespace

bool TorchPython::can_compile() const {
  return why_not.empty() && !version.empty() && std::isdigit(version[0]) != 0 &&
         std::atoi(version.c_str()) >= 2;
}

const std::vector<TorchPython>& torch_pythons() {
  static const std::vector<TorchPython> all = [] {
    std::vector<TorchPython> out;
    for (const std::string& python : named_pythons()) {
      TorchPython t = probe(python);
      if (t.why_not.empty()) {
        t.row = out.empty() ? "pytorch" : "pytorch_" + major_minor(t.version);
        for (const TorchPython& o : out)
          if (o.row == t.row) t.row += fmt::format("_{}", out.size() + 1);
      }
      out.push_back(std::move(t));
    }
    return out;
  }();
  return all;
}

const TorchPython* torch_python_of_row(const std::string& row, bool& compiled) {
  constexpr std::string_view kCompiled = "_compiled";
  compiled = row.size() > kCompiled.size() &&
             row.compare(row.size() - kCompiled.size(), kCompiled.size(), kCompiled) == 0;
  const std::string eager = compiled ? row.substr(0, row.size() - kCompiled.size()) : row;
  for (const TorchPython& t : torch_pythons())
    if (t.why_not.empty() && t.row == eager) return &t;
  return nullptr;
}

std::filesystem::path torch_peer_script() {
  return std::filesystem::path(build::source_dir) / "kernels/nn/scripts/torch_peer.py";
}

std::filesystem::path torch_all_to_all_script() {
  return torch_peer_script().parent_path() / "torch_all_to_all.py";
}

const std::string& torch_why_not() { return torch_pythons().front().why_not; }

nlohmann::json run_torch_peer(const std::string& flags, const std::string& python) {
  return run_torch_script(torch_peer_script(), flags, python);
}

nlohmann::json run_torch_script(const std::filesystem::path& script, const std::string& flags,
                                const std::string& python) {
  const std::string interpreter = python.empty() ? torch_pythons().front().python : python;
  const std::string cmd =
      fmt::format("OMP_NUM_THREADS=1 '{}' {} {} 2>&1", interpreter, script.string(), flags);
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
