// Where a result came from: machine, OS, compiler and flags, git commit, library versions,
// relevant environment variables, and the times. Stored in every results.json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "concurdl/core/ranks.hpp"

namespace concurdl {

nlohmann::json collect_provenance();

// The transparent huge pages mode of `enabled_file` ("always [madvise] never" -> "madvise"), as
// collect_provenance records it under "transparent_hugepages"; empty where the file is absent or
// has no bracketed mode.
std::string transparent_hugepages_mode(
    const std::string& enabled_file = "/sys/kernel/mm/transparent_hugepage/enabled");
// Where an MPI launch's ranks ran, for the provenance's "mpi_placement": each host (name,
// address, world ranks) and the transport inside a host and between hosts.
nlohmann::json placement_provenance(const ranks::Placement& placement);
// The current UTC time as ISO 8601 ("2026-11-22T04:14:14Z").
std::string utc_now_iso();
std::string host_name();
// Short git commit of the source tree this program was built from ("nogit" if unknown).
std::string short_commit();

}  // namespace concurdl
