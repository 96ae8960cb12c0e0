// The claims x machines table (claims.hpp): which runs are quiet, runs grouped by machine, and
// each claim's cell per machine. claims.cpp judges one claim on one run; this puts the judgements
// of many runs side by side.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/noise.hpp"

namespace concurdl {

namespace {

// A machine's label as a Markdown table cell: a '|' would end the cell.
std::string table_cell(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string why_not_quiet(const RunFile& run) {
  std::size_t noisy = 0;
  for (const Record& r : run.records) noisy += r.notes.count("noisy");
  // A few noisy records in a long run are a moment's disturbance, which the claims judged on
  // them say; a run mostly measured beside other work says nothing of the machine.
  if (noisy > 0 && static_cast<double>(noisy) > kNoisyRunFraction * run.records.size())
    return fmt::format("{} of its {} records noted noisy", noisy, run.records.size());
  const Activity before = activity_before_run(run.provenance);
  if (before.others_cpus >= kNoisyOthersCpus)
    return fmt::format("other processes used {:.2f} CPUs before it started", before.others_cpus);
  if (before.steal_cpus >= kNoisyStealCpus)
    return fmt::format("the hypervisor stole {:.2f} CPUs before it started", before.steal_cpus);
  return "";
}

std::vector<MachineRuns> group_by_machine(const std::vector<RunFile>& runs) {
  std::vector<MachineRuns> out;
  for (const RunFile& r : runs) {
    std::string label = r.label.empty() ? machine_label(r) : r.label;
    if (label.empty()) label = r.path.string();
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const MachineRuns& m) { return m.label == label; });
    if (it == out.end()) {
      out.push_back({label, {}});
      it = std::prev(out.end());
    }
    it->runs.push_back(&r);
  }
  return out;
}

namespace {

std::string range_text(double lo, double hi, const std::string& unit) {
  if (claim_value_text(lo, unit) == claim_value_text(hi, unit)) return claim_value_text(lo, unit);
  std::string low = claim_value_text(lo, "");
  return low + "–" + claim_value_text(hi, unit);
}

std::string machine_cell(const Experiment& e, const Claim& c, const MachineRuns& m,
                         const std::string& frozen) {
  int judged = 0, held = 0, unjudged = 0, control = 0, out_judged = 0, out_held = 0;
  std::optional<double> lo, hi;
  std::string unit = c.unit;
  for (const RunFile* run : m.runs) {
    const bool measured = std::any_of(run->records.begin(), run->records.end(),
                                      [&](const Record& r) { return r.experiment == e.id; });
    if (!measured) continue;
    const ClaimResult r = evaluate_claim(e, c, *run);
    if (r.status == ClaimStatus::not_applicable) continue;
    // A law about speed on records measured while the machine was busy, or while its CPUs were
    // not a core each, is not judged, whether it passed or failed.
    if (r.status == ClaimStatus::not_judged) {
      ++(r.control_failed ? control : unjudged);
      continue;
    }
    ++judged;
    held += r.status == ClaimStatus::held;
    if (held_out(*run, frozen)) {
      ++out_judged;
      out_held += r.status == ClaimStatus::held;
    }
    if (r.value) {
      lo = lo ? std::min(*lo, *r.value) : *r.value;
      hi = hi ? std::max(*hi, *r.value) : *r.value;
    }
  }
  const std::string noisy_text = not_judged_counts(unjudged, control);
  if (judged == 0)
    return unjudged + control == 0 ? "—"
           : control == 0          ? "not judged (disturbed records only)"
           : unjudged == 0         ? "not judged (its control did not show the effect)"
                                   : fmt::format(
                                         "not judged ({} on disturbed records, {} where "
                                                 "the control did not show the effect)",
                                         unjudged, control);
  const std::string values = lo ? range_text(*lo, *hi, unit) : std::string("no value");
  if (c.kind == Claim::Kind::magnitude)
    return fmt::format("{} ({} run{})", values, judged, judged == 1 ? "" : "s");
  const std::string out_text =
      out_judged ? fmt::format("; held out: held in {} of {}", out_held, out_judged) : "";
  if (held == judged)
    return fmt::format("held in {} of {} ({}){}{}", held, judged, values, noisy_text, out_text);
  return fmt::format("**NOT HELD** in {} of {} ({}){}{}", judged - held, judged, values, noisy_text,
                     out_text);
}

}  // namespace

bool held_out(const RunFile& run, const std::string& frozen) {
  if (frozen.empty() || !run.provenance.is_object() || !run.provenance.contains("started") ||
      !run.provenance.at("started").is_string())
    return false;
  // ISO 8601 UTC timestamps of one format order as strings.
  return run.provenance.at("started").get<std::string>() > frozen;
}

std::string claims_by_machine_markdown(const std::vector<MachineRuns>& all,
                                       const std::string& frozen) {
  // A machine whose runs measured no claim (runs of experiments without claims, such as the
  // simulated cluster's) would be a column of dashes: it is left out.
  std::vector<MachineRuns> machines;
  for (const MachineRuns& m : all) {
    bool any = false;
    for (const Experiment& e : experiments())
      for (const Claim& c : e.claims) any = any || machine_cell(e, c, m, frozen) != "—";
    if (any) machines.push_back(m);
  }
  std::string out = "| claim | kind |";
  std::string rule = "|---|---|";
  for (const MachineRuns& m : machines) {
    out += fmt::format(" {} ({} quiet run{}) |", table_cell(m.label), m.runs.size(),
                       m.runs.size() == 1 ? "" : "s");
    rule += "---|";
  }
  out += "\n" + rule + "\n";
  for (const Experiment& e : experiments())
    for (const Claim& c : e.claims) {
      out += fmt::format(
          "| `{}` {} | {} |", e.id, c.id,
          c.kind == Claim::Kind::law ? "law, " + claim_expected_text(c) : std::string("magnitude"));
      for (const MachineRuns& m : machines) out += " " + machine_cell(e, c, m, frozen) + " |";
      out += "\n";
    }
  return out;
}

}  // namespace concurdl
