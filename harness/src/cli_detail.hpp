// Internal to the harness: what the command line's parts share (cli.cpp parses and runs the
// commands; run_command.cpp is `concurdl run`'s measuring, stopping, resuming and launching).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/runner.hpp"

namespace concurdl::cli_detail {

struct Args {
  std::vector<std::string> targets;
  std::string profile = "quick";
  std::string threads, repeat, ranks, hostfile, out;
  std::string transport = "auto";  // --transport: auto, shm or tcp (with --ranks)
  std::string resume;              // --resume DIR: go on with an interrupted run
  std::string continue_run;        // the same, once DIR's own command line has been read back
  std::vector<std::string> set;
  bool no_calibrate = false, no_report = false, quiet = false, no_timing = false;
  bool trace = false;             // run --trace
  bool no_build = false;          // exercise --no-build: grade the programs as they are
  std::vector<std::string> argv;  // the command line as given (exercise starts itself again)
  bool markdown = false;
  bool csv = false;                 // report: exercises.csv of the class's attempts
  std::vector<std::string> labels;  // report, check: --label, a name per run in turn
  std::vector<std::string> only;    // report: --only KEY=V1,V2
};

RunOptions make_options(const Args& a);
// "1,2,4" as counts >= 1 and <= `most`; UsageError naming `flag` otherwise.
std::vector<std::string> parse_counts(const std::string& flag, const std::string& text,
                                      std::int64_t most);
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
void print_invalid(const std::vector<Record>& records);
void report_run(const RunFile& f, const std::filesystem::path& dir);

// `concurdl run` and `concurdl calibrate`: measure, journal, report; print the run directory.
int measure(const std::vector<std::string>& command, const std::vector<const Experiment*>& selected,
            const Args& a, bool calibrate_first);
// --ranks outside an MPI launch: start one and return its status; inside one: join it.
std::optional<int> launch_ranks(const Args& a, int argc, char** argv);
// --resume DIR: DIR's own command line again, told to go on in DIR.
int resume_run(const Args& a, int argc);

}  // namespace concurdl::cli_detail
