// Where a result came from: machine, OS, compiler and flags, git commit, library versions,
// relevant environment variables, and the times. Stored in every results.json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace concurdl {

nlohmann::json collect_provenance();
// The current UTC time as ISO 8601 ("2026-11-22T04:14:14Z").
std::string utc_now_iso();
std::string host_name();
// Short git commit of the source tree this program was built from ("nogit" if unknown).
std::string short_commit();

}  // namespace concurdl
