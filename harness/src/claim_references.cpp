// The claims' reference values (claims.hpp, claim_reference): every claim judged once on the
// committed reference runs of the source tree this program was built from.
#include <filesystem>
#include <limits>
#include <map>
#include <string>

#include "claims_detail.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

namespace {

namespace fs = std::filesystem;

// "experiment claim_id" -> the value its reference run measured.
std::map<std::string, double> read_reference_values() {
  std::map<std::string, double> out;
  const fs::path root = fs::path(build::source_dir) / "results" / "reference";
  const auto take = [&](const char* name, bool gpu_claims_only) {
    RunFile f;
    try {
      f = load_run(root / name);
    } catch (const std::exception&) {
      return;  // not there (a program away from its sources) or unreadable: not measured
    }
    for (const Experiment& e : experiments())
      for (const Claim& c : e.claims) {
        if (gpu_claims_only && !c.needs_gpu) continue;
        const ClaimResult r = claims_detail::judge_claim(e, c, f);
        if (r.value) out[e.id + " " + c.id] = *r.value;
      }
  };
  for (const char* name : kReferenceRuns) take(name, false);
  // The claims that need a GPU come from the GPU's run; its CPU references (ch04/cpu_reference,
  // on that machine's CPU) are not the reference machine's.
  take(kReferenceGpuRun, true);
  return out;
}

}  // namespace

double claim_reference(const std::string& experiment, const std::string& claim_id) {
  static const std::map<std::string, double> values = read_reference_values();
  const auto it = values.find(experiment + " " + claim_id);
  return it == values.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}

}  // namespace concurdl
