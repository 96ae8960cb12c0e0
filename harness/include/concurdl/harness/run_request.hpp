// What `concurdl run`, `calibrate` and `exercise` are asked to measure: the flags as typed, and
// the same parsed and checked once into a typed request before anything runs. The command line
// (cli.cpp) fills RunFlags and calls parse_run_request; the run command, the MPI launch and the
// exercise command read only the RunRequest. A bad flag is a UsageError naming it (exit 2),
// before the data set is read, the machine calibrated or mpirun started.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/harness/runner.hpp"

namespace concurdl {

// The flags as the user typed them.
struct RunFlags {
  std::string profile = "quick";
  std::string threads, repeat, ranks, hostfile;
  std::string transport = "auto";
  std::vector<std::string> set;  // --set key=v1,v2, one per flag
  bool quiet = false;
};

// How MPI ranks on one machine talk (--transport): Open MPI's choice, shared memory, or the
// network stack (as between machines).
enum class Transport { automatic, shm, tcp };

// The flags, checked.
struct RunRequest {
  // What the sweep takes: the profile, --threads, --ranks, --repeat, --set, progress or not.
  RunOptions options;
  std::vector<int> ranks;  // --ranks as numbers; empty without it
  std::string hostfile;    // a readable file, or "" (only with --ranks)
  Transport transport = Transport::automatic;
  bool quiet = false;

  // The most ranks a configuration takes: how many mpirun starts. 1 without --ranks.
  int most_ranks() const;
};

// Checks every flag, each with its own one-line UsageError: a profile that is not quick, full
// or smoke; counts that are not integers in [1, limit]; --repeat that is not one count; --set
// that is not key=value, or that gives an axis a flag gives too; a hostfile that cannot be read;
// a transport that is not auto, shm or tcp; --hostfile or --transport without --ranks; --ranks
// in a build without MPI. What the values mean to the experiments (an axis that takes no such
// value) is expand()'s to say, once the experiments are chosen.
RunRequest parse_run_request(const RunFlags& flags);

Profile parse_profile(const std::string& text);
std::string_view profile_name(Profile p);
// "1,2,4" as counts in [1, most]; UsageError naming `flag` otherwise.
std::vector<std::string> parse_counts(const std::string& flag, const std::string& text,
                                      std::int64_t most);

}  // namespace concurdl
