// Words current in code as in docs: no source, script or document of the project speaks of the
// issue it was written for, the session it was written in, or what comes next. What is true now
// is written; history belongs in git. (The committed runs under results/ are data and are not
// read.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "concurdl/build_info.hpp"

namespace {

namespace fs = std::filesystem;

bool checked(const fs::path& p) {
  static const std::vector<std::string> kinds = {".cpp", ".hpp", ".h",  ".cu", ".cuh",
                                                 ".in",  ".md",  ".sh", ".py", ".cmake"};
  const std::string name = p.filename().string();
  if (name == "CMakeLists.txt" || name == "CMakePresets.json") return true;
  if (p.parent_path().filename() == "scripts" && p.extension().empty()) return true;  // scripts
  for (const std::string& k : kinds)
    if (p.extension() == k) return true;
  return false;
}

// A history word in one line of text; "" when there is none.
std::string history_word(const std::string& line) {
  static const std::regex words(
      R"(\bthe issue\b|\bissues? #?[0-9]+\b|\bcome next\b|\bso far only\b|)"
      R"(\b(this|that|the same|a later|an earlier|the last|the previous|the next) session\b)",
      std::regex::icase);
  if (line.find("http") != std::string::npos) return "";  // an address is not prose
  std::smatch m;
  return std::regex_search(line, m, words) ? m.str(0) : "";
}

TEST(Words, NoSourceOrDocSpeaksOfIssuesSessionsOrWhatComesNext) {
  const fs::path src = concurdl::build::source_dir;
  std::size_t files = 0;
  for (const char* top :
       {"chapters", "kernels", "harness", "core", "scripts", "cmake", "docs", "tests", ".ci"}) {
    if (!fs::exists(src / top)) continue;
    for (auto it = fs::recursive_directory_iterator(src / top); it != fs::end(it); ++it) {
      const std::string name = it->path().filename().string();
      if (it->is_directory() && (name.rfind("build", 0) == 0 || name == ".git")) {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file() || !checked(it->path())) continue;
      // This file names the words it looks for.
      if (it->path().filename() == "test_words.cpp") continue;
      ++files;
      std::ifstream in(it->path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        if (const std::string w = history_word(line); !w.empty())
          ADD_FAILURE() << fs::relative(it->path(), src).string() << ":" << n << ": \"" << w
                        << "\": say what is true now (history belongs in git): " << line;
    }
  }
  for (const char* top : {"README.md", "CMakeLists.txt"}) {
    std::ifstream in(src / top);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (const std::string w = history_word(line); !w.empty())
        ADD_FAILURE() << top << ":" << n << ": \"" << w << "\": " << line;
  }
  EXPECT_GT(files, 300u);
}

TEST(Words, TheLintSeesAHistoryWord) {
  EXPECT_EQ(history_word("// The issue's test: 100 000 tasks"), "The issue");
  EXPECT_EQ(history_word("its experiments come next, on the"), "come next");
  EXPECT_EQ(history_word("measured in the same session: 109 MB/s"), "the same session");
  const std::string numbered = std::string("fixed in iss") + "ue 12";  // spelt apart: the lint
  EXPECT_EQ(history_word(numbered), std::string("iss") + "ue 12");     // reads this file too
  EXPECT_EQ(history_word("the records so far, after each group"), "");
  EXPECT_EQ(history_word("the program can say what comes next: madvise"), "");
  EXPECT_EQ(history_word("https://www.usenix.org/conference/osdi14/technical-sessions/x"), "");
}

}  // namespace

namespace {

// docs/architecture.md is a map a maintainer reads at once, not a second manual: a line budget
// keeps it so (what a piece does in detail belongs in its own README or header).
TEST(Words, TheArchitectureStaysAMap) {
  std::ifstream in(fs::path(concurdl::build::source_dir) / "docs" / "architecture.md");
  ASSERT_TRUE(in) << "docs/architecture.md is not there";
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_LE(lines, 320u) << "docs/architecture.md has " << lines
                         << " lines: move detail to the piece's own README or header";
}

}  // namespace
