// What claims.cpp shares with claim_references.cpp; private to the harness.
#pragma once

#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl::claims_detail {

// A claim judged on `run`, without its reference value (which is itself judged on the
// reference runs: claim_reference).
ClaimResult judge_claim(const Experiment& e, const Claim& c, const RunFile& run);

}  // namespace concurdl::claims_detail
