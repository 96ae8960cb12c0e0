// The run flags parsed and checked once (run_request.hpp).
#include "concurdl/harness/run_request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/params.hpp"
#include "concurdl/core/ranks.hpp"

namespace concurdl {

namespace {

// The most timed repetitions --repeat takes: each is a whole run of the configuration.
constexpr int kMaxRepeat = 1000;

Transport parse_transport(const std::string& text) {
  if (text == "auto") return Transport::automatic;
  if (text == "shm") return Transport::shm;
  if (text == "tcp") return Transport::tcp;
  throw UsageError(fmt::format("--transport: '{}' is not auto, shm or tcp", text));
}

}  // namespace

Profile parse_profile(const std::string& text) {
  if (text == "quick") return Profile::quick;
  if (text == "full") return Profile::full;
  if (text == "smoke") return Profile::smoke;
  throw UsageError(fmt::format("--profile: '{}' is not a profile (quick, full or smoke)", text));
}

std::string_view profile_name(Profile p) {
  switch (p) {
    case Profile::quick:
      return "quick";
    case Profile::full:
      return "full";
    case Profile::smoke:
      return "smoke";
  }
  return "quick";
}

// Counts in [1, most], e.g. "1,2,4"; the message names the flag, the value and the range.
std::vector<std::string> parse_counts(const std::string& flag, const std::string& text,
                                      std::int64_t most) {
  std::vector<std::string> out = split_list(text, flag);
  for (const auto& v : out) {
    if (v.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError(fmt::format("{}: '{}' is not a count (need an integer >= 1)", flag, v));
    // Digits only: compared as text past 18 digits, so no value overflows.
    const std::size_t first = std::min(v.find_first_not_of('0'), v.size());
    const std::string digits = v.substr(first);
    if (digits.empty())
      throw UsageError(fmt::format("{}: '{}' is not a count (need an integer >= 1)", flag, v));
    if (digits.size() > 18 || std::stoll(digits) > most)
      throw UsageError(fmt::format("{}: '{}' is more than {}, the most it takes", flag, v, most));
  }
  return out;
}

int RunRequest::most_ranks() const {
  return ranks.empty() ? 1 : *std::max_element(ranks.begin(), ranks.end());
}

RunRequest parse_run_request(const RunFlags& f) {
  RunRequest r;
  RunOptions& opt = r.options;
  opt.profile = parse_profile(f.profile);
  if (!f.threads.empty()) opt.threads = parse_counts("--threads", f.threads, kMaxThreads);
  if (!f.ranks.empty()) {
    opt.ranks = parse_counts("--ranks", f.ranks, kMaxThreads);
    for (const std::string& c : *opt.ranks) r.ranks.push_back(std::stoi(c));
  }
  if (!f.repeat.empty()) {
    const auto reps = parse_counts("--repeat", f.repeat, kMaxRepeat);
    if (reps.size() != 1)
      throw UsageError(fmt::format("--repeat: '{}' is not one count", f.repeat));
    opt.repeat = std::stoi(reps[0]);
  }
  for (const auto& kv : f.set) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
      throw UsageError(fmt::format("--set: '{}' is not key=value", kv));
    opt.set[kv.substr(0, eq)] = split_list(kv.substr(eq + 1), "--set " + kv.substr(0, eq));
  }
  // Two flags for one axis: the one that would win silently is a usage error instead.
  auto once = [&](const char* axis, bool flag_given) {
    if (flag_given && opt.set.count(axis))
      throw UsageError(fmt::format("--{0} and --set {0}=... both give the {0}: give one", axis));
  };
  once("threads", opt.threads.has_value());
  once("ranks", opt.ranks.has_value());
  if (!f.hostfile.empty() && !std::filesystem::is_regular_file(f.hostfile))
    throw UsageError(fmt::format("--hostfile: '{}' is not a readable file", f.hostfile));
  r.hostfile = f.hostfile;
  r.transport = parse_transport(f.transport);
  if (r.ranks.empty()) {
    if (!f.hostfile.empty()) throw UsageError("--hostfile: only with --ranks N");
    if (r.transport != Transport::automatic) throw UsageError("--transport: only with --ranks N");
  } else if (!ranks::built()) {
    throw UsageError(
        "--ranks: this concurdl was built without MPI (apt-get install libopenmpi-dev "
        "openmpi-bin, then configure again)");
  }
  r.quiet = f.quiet;
  opt.progress = !f.quiet;
  return r;
}

}  // namespace concurdl
