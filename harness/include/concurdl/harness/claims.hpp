// Claims (Experiment::claims) judged against a run's records: held, not held, or not
// applicable with the reason. `concurdl run` prints them after measuring, results.json keeps
// them, the report opens with them, and `concurdl check RUN` exits 1 when one that applies
// does not hold.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

// A law is held or not held; a magnitude that was measured is reported (Claim::Kind).
// not_judged: a law about speed whose records were noted noisy or cores_short (a disturbance
// can make a law fail or pass: a noisy peer is slow too), or a law whose positive control did
// not show the effect in that run (it could have passed because nothing happened); neither held
// nor not held, whichever way its value fell.
enum class ClaimStatus { held, not_held, not_applicable, reported, not_judged };
const char* to_string(ClaimStatus s);  // "held", "not held", "not applicable", "reported", ...
const char* to_string(Claim::Kind k);  // "law", "magnitude"
const char* to_string(ClaimCause c);   // "noise", "cores_and_smt", ...
// Where to look, in a sentence: "other processes or the hypervisor took CPU time: ...".
const char* cause_text(ClaimCause c);

struct ClaimResult {
  std::string experiment, chapter, id, statement;
  ClaimStatus status = ClaimStatus::not_applicable;
  std::optional<double> value;  // the worst over the matching records, when measured
  std::string where;            // the records it came from: "variant=padded, threads=2 over ..."
  std::string reason;           // why not held or not applicable
  std::string expected;         // "at least 1.5×"; a magnitude's "reported"
  Claim::Kind kind = Claim::Kind::law;
  std::vector<ClaimCause> causes;  // the claim's, plus noise when its records were flagged
  std::string unit;
  double reference = 0;
  // The records it came from carry these notes: "noisy" (measured while the machine was busy)
  // or "above_ceiling". A claim judged on such records says so.
  std::vector<std::string> flags;
  std::optional<double> control_value;  // the positive control's value, when it has one
  // Not judged because the positive control did not show the effect (not because its records
  // were disturbed).
  bool control_failed = false;
};

// Why a claim was not judged, as the tables say it: "disturbed records" or "control did not
// show the effect".
const char* not_judged_label(const ClaimResult& r);
// "; 2 not judged (disturbed records); 1 not judged (control did not show the effect)": the
// non-zero counts, each with its "; " in front.
std::string not_judged_counts(int disturbed, int control);

// One claim of `e` against `run`'s records.
ClaimResult evaluate_claim(const Experiment& e, const Claim& c, const RunFile& run);
// Every claim of every registered experiment that has records in `run`, in experiment order.
std::vector<ClaimResult> evaluate_claims(const RunFile& run);

// "1.27×", "0.93", "4.20 GB/s"-like: three significant digits and the claim's unit.
std::string claim_value_text(double v, const std::string& unit);
// A claim's value on the reference machine, read from the committed runs (results/reference
// in the source tree this program was built from, read once): per claim, the last of
// the manifest's claims runs that measured it, and for a claim that needs a GPU, its gpu run. NaN
// when none measured it (or the runs are not there, as with a program moved away from its sources).
double claim_reference(const std::string& experiment, const std::string& claim_id);
// The manifest's path of the run claim_reference read the value from; "" when none measured it.
std::string claim_reference_run(const std::string& experiment, const std::string& claim_id);
// A claim's reference value as claim_value_text prints it; "not measured yet" for NaN.
std::string claim_reference_text(double reference, const std::string& unit);
// "1.25× (at least 1.5×; reference 1.27×)" or "—" with the reason; a magnitude's "17.6×
// (reference machine 35.1×)".
std::string claim_outcome_text(const ClaimResult& r);
// A magnitude's "depends on: caches, vector_isa"; a law that does not hold: "where to look:
// <each cause's sentence>"; otherwise "".
std::string claim_causes_text(const ClaimResult& r);
// The terminal table `concurdl check` and the end of `concurdl run` print, and its counts.
std::string claims_text(const std::vector<ClaimResult>& results);
std::string claims_counts(const std::vector<ClaimResult>& results);
// A law's bound as text, "at least 1.5×"; a magnitude's "reported".
std::string claim_expected_text(const Claim& c);
// A law that applies and does not hold (a magnitude never fails).
bool any_failed(const std::vector<ClaimResult>& results);

// The committed reference runs by role, read from results/reference/manifest (one "ROLE PATH"
// a line; roles lessons, claims, gpu, repeats; see the file): every lesson's numbers and every
// claim's `reference` come from them. Which machine a run was taken on is read from its
// records' provenance (reference_machine_text), never typed beside its name. Retaking an
// edition: docs/methodology.md, "A new edition".
struct ReferenceManifest {
  std::string lessons;  // lesson numbers' default run
  // Claims' reference values: the lessons run's where it judged the claim, else the last of
  // these that measured it.
  std::vector<std::string> claims;
  std::string gpu;      // the claims that need a GPU
  std::string repeats;  // a folder of quiet repeats of one build
  // When the laws' bounds were last set ("2026-11-28T20:00:00Z"): a run started after it is
  // held-out data for them, judged by bounds it never helped set.
  std::string frozen;
};
// Parses a manifest; a line that is not "ROLE PATH" with a known role, a second line of a
// one-line role, or a manifest without a lessons line and claims lines throws
// std::invalid_argument naming what was wrong.
ReferenceManifest parse_reference_manifest(std::string_view text);
// The source tree's results/reference/manifest, read once (an empty manifest when the program
// is away from its sources).
const ReferenceManifest& reference_manifest();
// "2-vCPU AMD EPYC guest, family 25 model 17 (Zen 4), KVM": what a run's provenance says of
// its machine; "" when it does not identify the CPU.
std::string reference_machine_text(const RunFile& run);

// A chapter README's claims block, generated from the chapter's declarations:
//   <!-- claims:begin 01-threads -->
//   | claim | holds when | reference | applies |
//   <!-- claims:end -->
std::string claims_markdown(const std::string& chapter);
// `readme` with every claims block's body regenerated.
std::string regenerate_claim_blocks(const std::string& readme);
// What differs between a README's claims blocks and the program's claims ("" lines none);
// a chapter with claims needs a block.
std::vector<std::string> check_readme_claims(const std::filesystem::path& readme,
                                             const std::string& chapter);

// More than this share of a run's records noted noisy: the run was measured on a busy machine.
inline constexpr double kNoisyRunFraction = 0.1;
// "" when `run` was taken on a quiet machine (no record noted noisy, nothing else busy before
// it started); else why not. Only quiet runs say what a machine does.
std::string why_not_quiet(const RunFile& run);

// Claims x machines: one row per registered claim, one column per machine (its label and its
// runs), each cell what the machine's runs show: a law "held in 3 of 3 (1.51–1.69×)" or "NOT
// HELD in 1 of 3 ...", a magnitude its range "1.51–1.69× (3 runs)", "—" where none measured it.
// A machine none of whose runs measured any claim has no column.
struct MachineRuns {
  std::string label;
  std::vector<const RunFile*> runs;
};
// `frozen` (the manifest's): runs started after it are counted apart as held out.
std::string claims_by_machine_markdown(const std::vector<MachineRuns>& machines,
                                       const std::string& frozen = "");
// Whether `run` started (provenance.started, ISO 8601 UTC) after `frozen`; false when either
// is unknown.
bool held_out(const RunFile& run, const std::string& frozen);
// Groups runs by machine_label, in order of first appearance.
std::vector<MachineRuns> group_by_machine(const std::vector<RunFile>& runs);

nlohmann::json to_json(const ClaimResult& r);
nlohmann::json claims_json(const std::vector<ClaimResult>& results);

}  // namespace concurdl
