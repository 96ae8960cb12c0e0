// Internal to the harness: what the commands share (cli.cpp parses the command line and calls
// them; run_command.cpp is `concurdl run`'s measuring, stopping, resuming and launching;
// exercise_command.cpp, read_commands.cpp and list.cpp the others; shared.cpp what they share).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/run_request.hpp"
#include "concurdl/harness/runner.hpp"

namespace concurdl::cli_detail {

// What the command line gave, as typed; the run flags are parsed and checked once, into a
// RunRequest (run_request.hpp), before a command reads them.
struct Args {
  std::vector<std::string> targets;
  RunFlags run;              // --profile, --threads, --repeat, --ranks, --set, ... as typed
  std::string out;           // --out
  std::string resume;        // --resume DIR: go on with an interrupted run
  std::string continue_run;  // the same, once DIR's own command line has been read back
  bool no_calibrate = false, no_report = false, no_timing = false;
  bool trace = false;             // run --trace
  bool no_build = false;          // exercise --no-build: grade the programs as they are
  std::vector<std::string> argv;  // the command line as given (exercise starts itself again)
  bool markdown = false;
  bool csv = false;                 // report: exercises.csv of the class's attempts
  std::vector<std::string> labels;  // report, check: --label, a name per run in turn
  std::vector<std::string> only;    // report: --only KEY=V1,V2
};

// A chapter's experiments: those across MPI ranks with --ranks, the others without it.
std::vector<const Experiment*> chapter_experiments(const std::string& folder, bool across_ranks);
// Chapters and experiment ids; nothing = every chapter.
std::vector<const Experiment*> select(const std::vector<std::string>& targets, bool across_ranks);
bool all_valid(const std::vector<Record>& records);
// The directory of the running program (where the chapters' test binaries are).
std::filesystem::path program_dir();
// Creates `dir` or throws UsageError naming `what`.
void ensure_directory(const std::filesystem::path& dir, const char* what);
// `concurdl exercise CHAPTER [ID ...]` (exercise_command.cpp).
int cmd_exercise(const Args& a);
// `concurdl report`, `concurdl compare`, `concurdl check` (read_commands.cpp).
int cmd_report(const Args& a);
int cmd_compare(const Args& a);
int cmd_check(const Args& a);
void print_invalid(const std::vector<Record>& records);
void report_run(const RunFile& f, const std::filesystem::path& dir);

// `concurdl run` and `concurdl calibrate`: measure, journal, report; print the run directory.
int measure(const std::vector<std::string>& command, const std::vector<const Experiment*>& selected,
            const Args& a, const RunRequest& req, bool calibrate_first);
// --ranks outside an MPI launch: start one and return its status; inside one: join it.
std::optional<int> launch_ranks(const Args& a, const RunRequest& req, int argc, char** argv);
// --resume DIR: DIR's own command line, told to go on in DIR (the command line parses it again).
std::vector<std::string> resume_command(const Args& a, int argc);

}  // namespace concurdl::cli_detail
