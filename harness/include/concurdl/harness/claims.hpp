// Claims (Experiment::claims) judged against a run's records: held, not held, or not
// applicable with the reason. `concurdl run` prints them after measuring, results.json keeps
// them, the report opens with them, and `concurdl check RUN` exits 1 when one that applies
// does not hold.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

// A law is held or not held; a magnitude that was measured is reported (Claim::Kind).
// not_judged: a law about speed whose records were noted noisy or cores_short. A disturbance
// can make a law fail or pass (a noisy peer is slow too), so such a law is neither held nor
// not held, whichever way its value fell.
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
};

// One claim of `e` against `run`'s records.
ClaimResult evaluate_claim(const Experiment& e, const Claim& c, const RunFile& run);
// Every claim of every registered experiment that has records in `run`, in experiment order.
std::vector<ClaimResult> evaluate_claims(const RunFile& run);

// "1.27×", "0.93", "4.20 GB/s"-like: three significant digits and the claim's unit.
std::string claim_value_text(double v, const std::string& unit);
// A claim's value on the reference machine, read from the committed runs (results/reference
// in the source tree this program was built from, read once): per claim, the last of
// kReferenceRuns that measured it, and for a claim that needs a GPU, kReferenceGpuRun. NaN when
// none measured it (or the runs are not there, as with a program moved away from its sources).
double claim_reference(const std::string& experiment, const std::string& claim_id);
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

// The edition's machine and its committed runs (results/reference/NAME): every lesson's numbers
// and every claim's `reference` come from them, all taken in one sitting from one clean build,
// except what needs a GPU. Retaking an edition: docs/methodology.md, "A new edition".
inline constexpr const char* kReferenceMachine =
    "2-vCPU AMD EPYC guest, family 25 model 17 (Zen 4), AVX-512, KVM";
// Every chapter, quick profile, calibration first (`concurdl run`).
inline constexpr const char* kReferenceRun = "debian12-zen4-2vcpu-e790176/all";
// The experiments of kReferenceRun whose records the cores probe flagged or whose law did not
// hold there, taken again minutes later from the same build (`concurdl run EXPERIMENTS`): their
// claims and numbers come from this run.
inline constexpr const char* kReferenceRerun = "debian12-zen4-2vcpu-e790176/rerun";
// The claims about training (`concurdl train --epochs 10 --threads 2`).
inline constexpr const char* kReferenceTrainRun = "debian12-zen4-2vcpu-e790176/train-2t";
// Chapter 05's collectives across MPI ranks (`concurdl run --ranks 2,4 ch05/allreduce_mpi`).
inline constexpr const char* kReferenceCh05MpiRun = "debian12-zen4-2vcpu-e790176/ch05-mpi";
// Chapter 06 on its full profile (`concurdl run 06-model-parallel --profile full`): 4 stages and
// 16 micro-batches, which the quick profile leaves out. Its claims are judged here rather than
// in kReferenceRun.
inline constexpr const char* kReferenceCh06Run = "debian12-zen4-2vcpu-e790176/ch06";
// Chapter 05's sharded data parallelism (`concurdl run ch05/zero --profile full`, with
// CONCURDL_TORCH_PYTHON naming PyTorch 2.15 for the FSDP peer): an experiment added after the
// sitting above, retaken once its memory was measured from a later clean build on a 2-vCPU Zen 5
// guest (family 26 model 2), as were chapter 06's recomputation, schedules and 3D runs below.
inline constexpr const char* kReferenceZeroRun = "debian12-zen5-2vcpu-56d9aff/ch05-zero";
// The bfloat16 GEMM (`concurdl run kernels/gemm_bf16 --profile full`), likewise added later.
inline constexpr const char* kReferenceBf16Run = "debian12-zen4-2vcpu-c0b81a1/gemm-bf16";
// Chapter 05's mixed precision (`concurdl run ch05/precision --profile full`, with
// CONCURDL_TORCH_PYTHON naming PyTorch 2.15 for the autocast peer, and `concurdl run
// ch05/precision_accuracy --profile full`), likewise.
inline constexpr const char* kReferencePrecisionRun = "debian12-zen4-2vcpu-d894319/ch05-precision";
inline constexpr const char* kReferenceAccuracyRun =
    "debian12-zen4-2vcpu-d894319/ch05-precision-accuracy";
// Chapter 06's activation recomputation (`concurdl run ch06/recompute --profile full`), on the
// Zen 5 guest of kReferenceZeroRun.
inline constexpr const char* kReferenceRecomputeRun = "debian12-zen5-2vcpu-56d9aff/ch06-recompute";
// Chapter 06's schedules (`concurdl run ch06/schedules --profile full`), likewise.
inline constexpr const char* kReferenceSchedulesRun = "debian12-zen5-2vcpu-56d9aff/ch06-schedules";
// Chapter 06's 3D parallelism (`concurdl run ch06/three_d --profile full`), likewise.
inline constexpr const char* kReferenceThreeDRun = "debian12-zen5-2vcpu-56d9aff/ch06-three-d";
// The runs above in the order a claim's reference is taken from them: a claim measured in two
// takes the later one's value.
inline constexpr const char* kReferenceRuns[] = {
    kReferenceRun,         kReferenceRerun,        kReferenceTrainRun,     kReferenceCh05MpiRun,
    kReferenceCh06Run,     kReferenceZeroRun,      kReferenceBf16Run,      kReferencePrecisionRun,
    kReferenceAccuracyRun, kReferenceRecomputeRun, kReferenceSchedulesRun, kReferenceThreeDRun};
// Chapter 04's GPU claims (`concurdl run ch04 --profile full`, the device's own experiments and
// the CPU references beside them), on the first GPU lent to the project.
inline constexpr const char* kReferenceGpuRun = "ubuntu24-h200-emr16-ch04";
inline constexpr const char* kReferenceGpuMachine =
    "NVIDIA H200 (sm_90, 132 SMs, 141 GB HBM3e) in a 16-vCPU Intel Xeon guest, family 6 model 207 "
    "(Emerald Rapids)";
// Further quiet runs of one build on the previous edition's machine (Zen 5;
// results/reference/NAME/RUN/results.json): none of their records is noisy, and every law
// holds in them (tests/test_claims_chapters.cpp).
inline constexpr const char* kReferenceRepeats = "debian12-zen5-2vcpu-repeats";

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
std::string claims_by_machine_markdown(const std::vector<MachineRuns>& machines);
// Groups runs by machine_label, in order of first appearance.
std::vector<MachineRuns> group_by_machine(const std::vector<RunFile>& runs);

nlohmann::json to_json(const ClaimResult& r);
nlohmann::json claims_json(const std::vector<ClaimResult>& results);

}  // namespace concurdl
