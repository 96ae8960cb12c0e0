// Every registration the build compiled is in the program: each experiment and exercise that a
// source file of this build registers (the build's compile_commands.json says which files were
// compiled) appears in `concurdl list`. A registration runs from a static initializer, and an
// object file nothing references is dropped from a static archive without a word: this is the
// test that notices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "concurdl/build_info.hpp"

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string run_list() {
  const std::string cmd = std::string(CONCURDL_BIN) + " list 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  pclose(pipe);
  return out;
}

// Whether a preprocessor condition is known to hold in this build: a capability the build has.
// Anything else (another macro, an #else branch) is not known, and what it guards is not looked
// for.
bool known_true(const std::string& condition) {
  namespace b = concurdl::build;
  const std::pair<const char*, bool> caps[] = {
      {"CONCURDL_HAVE_MPI", b::have_mpi},   {"CONCURDL_WITH_MPI", b::have_mpi},
      {"CONCURDL_HAVE_CUDA", b::have_cuda}, {"CONCURDL_WITH_CUDA", b::have_cuda},
      {"CONCURDL_HAVE_NCCL", b::have_nccl}, {"CONCURDL_HAVE_URING", b::have_uring}};
  for (const auto& [name, have] : caps)
    if (condition.find(name) != std::string::npos && condition.find('!') == std::string::npos &&
        condition.find("&&") == std::string::npos && condition.find("||") == std::string::npos)
      return have;
  return false;
}

// The text with what this build's preprocessor would drop, or might, blanked out: lines inside
// an #if/#ifdef whose condition is not known_true, and inside any #else branch.
std::string compiled_text(const std::string& text) {
  std::string out;
  std::vector<bool> live;  // per open #if: whether its current branch is known to compile
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::string t = line.substr(std::min(line.find_first_not_of(" \t"), line.size()));
    if (t.rfind("#if", 0) == 0) {
      live.push_back(known_true(t));
    } else if (t.rfind("#el", 0) == 0) {
      if (!live.empty()) live.back() = false;
    } else if (t.rfind("#endif", 0) == 0) {
      if (!live.empty()) live.pop_back();
    }
    const bool on = std::all_of(live.begin(), live.end(), [](bool b) { return b; });
    out += (on ? line : std::string()) + "\n";
  }
  return out;
}

// The ids a source registers: the first `.id = "..."` after each register_experiment( or
// register_exercise( call, within the call's first lines (an id built at run time, as the
// Google Benchmark bridge's, is not a literal and is not looked for).
std::vector<std::pair<std::string, std::string>> registered_ids(const std::string& source) {
  const std::string text = compiled_text(source);
  std::vector<std::pair<std::string, std::string>> out;
  static const std::regex call(
      R"((register_experiment|register_exercise)\(\s*(\{|Exercise|exercise_))");
  static const std::regex id(R"(\.id\s*=\s*"([^"]+)\")");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator();
       ++it) {
    const std::size_t from = static_cast<std::size_t>(it->position(0));
    const std::string window = text.substr(from, 400);
    std::smatch m;
    if (std::regex_search(window, m, id)) out.emplace_back((*it)[1].str(), m[1].str());
  }
  return out;
}

TEST(Registrations, EveryCompiledRegistrationIsInConcurdlList) {
  const fs::path commands = fs::path(concurdl::build::binary_dir) / "compile_commands.json";
  if (!fs::exists(commands)) GTEST_SKIP() << commands << " is not there";
  const std::string listing = run_list();
  ASSERT_NE(listing.find("01-threads"), std::string::npos) << listing.substr(0, 400);
  const fs::path src = concurdl::build::source_dir;
  std::set<std::string> files;
  for (const auto& entry : nlohmann::json::parse(slurp(commands))) {
    const fs::path file = entry.at("file").get<std::string>();
    const std::string rel = fs::relative(file, src).generic_string();
    // The program's own sources, not the tests' (the toy chapter lives in tests/selftest).
    if (rel.rfind("chapters/", 0) == 0 || rel.rfind("kernels/", 0) == 0 ||
        rel.rfind("harness/", 0) == 0)
      files.insert(file.string());
  }
  ASSERT_FALSE(files.empty());
  std::size_t found = 0;
  for (const std::string& file : files) {
    for (const auto& [kind, id] : registered_ids(slurp(file))) {
      ++found;
      // `concurdl list` prints "  ch01/false_sharing  Title" and "  exercise 1.2  title".
      const std::string line =
          kind == "register_experiment" ? "\n  " + id + " " : "\n  exercise " + id + " ";
      EXPECT_NE(listing.find(line), std::string::npos)
          << file << " registers " << id << ", which `concurdl list` does not show: its object "
          << "file was left out of the program (a static initializer in an archive nothing "
          << "references)";
    }
  }
  // The scan itself works: the ladder of chapter 01 and the calibration are among them.
  EXPECT_GT(found, 40u);
}

// The scan would see a registration dropped: a source that registers an id the program lacks.
TEST(Registrations, TheScanFindsTheIdsOfACall) {
  const auto ids = registered_ids(
      "const bool r = register_experiment({\n    .id = \"calibrate/rank_pingpong\",\n"
      "    .chapter = \"calibrate\"});\nbool e = register_exercise(Exercise{.id = \"5.3\",");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0].second, "calibrate/rank_pingpong");
  EXPECT_EQ(ids[1].first, "register_exercise");
  EXPECT_EQ(ids[1].second, "5.3");
  EXPECT_EQ(run_list().find("\n  calibrate/no_such_thing "), std::string::npos);
  // What the preprocessor may drop is not looked for; what this build compiles is.
  const auto guarded = registered_ids(
      "#if CONCURDL_HAVE_SOMETHING_ELSE\nregister_experiment({.id = \"ch99/a\"});\n#else\n"
      "register_experiment({.id = \"ch99/b\"});\n#endif\nregister_experiment({.id = \"ch99/c\"});");
  ASSERT_EQ(guarded.size(), 1u);
  EXPECT_EQ(guarded[0].second, "ch99/c");
}

}  // namespace
