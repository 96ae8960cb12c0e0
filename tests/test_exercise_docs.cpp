// Every exercise the program registers (`concurdl list`) is in the teaching material: its
// chapter's section and the week plan of docs/course.md, the instructors' index, the students'
// table, the chapter's exercises.md, and a model answer in docs/instructors/chNN.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/exercise.hpp"

namespace {

namespace fs = std::filesystem;
using namespace concurdl;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text from the first line that starts with `heading` to the next line starting with `next`
// ("" when the heading is not there).
std::string section(const std::string& text, const std::string& heading, const std::string& next) {
  const std::size_t begin = text.find("\n" + heading);
  if (begin == std::string::npos) return "";
  const std::size_t end = text.find("\n" + next, begin + 1 + heading.size());
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// "5.3" as a token: not part of "15.3" or "5.31".
bool mentions(const std::string& text, const std::string& id) {
  std::string escaped;
  for (char ch : id) escaped += ch == '.' ? std::string("\\.") : std::string(1, ch);
  return std::regex_search(text, std::regex("(^|[^0-9.])" + escaped + "($|[^0-9])"));
}

TEST(ExerciseDocs, EveryExerciseIsInTheCourseTheIndexesAndTheModelAnswers) {
  const fs::path src = build::source_dir;
  const std::string course = read(src / "docs" / "course.md");
  const std::string weeks = section(course, "## A semester", "## ");
  const std::string index = read(src / "docs" / "instructors" / "README.md");
  const std::string students = read(src / "docs" / "students.md");
  ASSERT_FALSE(course.empty());
  ASSERT_FALSE(weeks.empty()) << "docs/course.md has no '## A semester'";
  ASSERT_FALSE(exercises().empty());
  for (const Exercise& e : exercises()) {
    SCOPED_TRACE("exercise " + e.id + " (" + e.chapter + ")");
    const std::string nn = e.chapter.substr(0, 2);  // "05"
    EXPECT_TRUE(mentions(section(course, "### " + nn + " ", "### "), e.id))
        << "docs/course.md: the chapter's section does not name it";
    EXPECT_TRUE(mentions(weeks, e.id)) << "docs/course.md: no week assigns it";
    std::string index_line;
    for (std::istringstream lines(index); std::getline(lines, index_line);)
      if (index_line.rfind("- [ch" + nn + ".md]", 0) == 0) break;
    EXPECT_TRUE(mentions(index_line, e.id)) << "docs/instructors/README.md: not in its line";
    EXPECT_NE(students.find("\n| " + e.id + " "), std::string::npos)
        << "docs/students.md: no row in the exercises table";
    const std::string answers = read(src / "docs" / "instructors" / ("ch" + nn + ".md"));
    EXPECT_NE(answers.find("\n## " + e.id + " "), std::string::npos)
        << "docs/instructors/ch" << nn << ".md: no model answer ('## " << e.id << " ...')";
    const std::string hand_out = read(src / "chapters" / e.chapter / "exercises" / "exercises.md");
    EXPECT_NE(hand_out.find("\n## " + e.id + " "), std::string::npos)
        << "chapters/" << e.chapter << "/exercises/exercises.md: no section";
  }
}

}  // namespace
