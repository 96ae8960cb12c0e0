// The report's claims: "What this run shows" (one line per claim, run by run when merged), each
// chapter's claims table, the chapters-at-a-glance rows, and the warning of a run measured on a
// busy machine. Built for report.cpp; rendered by report_render.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "concurdl/harness/noise.hpp"
#include "report_detail.hpp"

namespace concurdl::report_detail {

std::vector<JudgedClaim> judge(const std::vector<RunFile>& runs) {
  std::vector<JudgedClaim> out;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (ClaimResult& r : evaluate_claims(runs[i])) {
      auto it = std::find_if(out.begin(), out.end(), [&](const JudgedClaim& j) {
        return j.experiment == r.experiment && j.id == r.id;
      });
      if (it == out.end()) {
        out.push_back({r.experiment, r.id, r.chapter, r.statement, r.expected,
                       claim_reference_text(r.reference, r.unit),
                       std::vector<std::optional<ClaimResult>>(runs.size())});
        it = std::prev(out.end());
      }
      it->per_run[i] = std::move(r);
    }
  return out;
}

namespace {

std::string flags_text(const ClaimResult& r) {
  std::string out;
  for (const auto& f : r.flags)
    out += f == "noisy"         ? " [noisy: measured while the machine was busy]"
           : f == "cores_short" ? " [cores short: the CPUs were not a core each]"
                                : " [above the calibrated ceiling]";
  return out;
}

// "1.25× held", "0.91× NOT HELD at variant=padded, threads=2 over ...", "n/a: needs 2 CPUs".
std::string judged_cell(const std::optional<ClaimResult>& r) {
  if (!r) return "—";
  if (r->status == ClaimStatus::not_applicable) return "n/a: " + r->reason;
  std::string out = r->value ? claim_value_text(*r->value, r->unit) : std::string("—");
  if (r->status == ClaimStatus::not_judged)
    out += fmt::format(" not judged ({})", not_judged_label(*r));
  else if (r->status != ClaimStatus::reported)
    out += r->status == ClaimStatus::held ? " held" : " NOT HELD";
  if (r->status == ClaimStatus::not_held && !r->reason.empty()) out += ": " + r->reason;
  return out + flags_text(*r);
}

}  // namespace

std::vector<ClaimLine> claim_lines(const std::vector<JudgedClaim>& judged,
                                   const std::vector<std::string>& labels) {
  std::vector<ClaimLine> out;
  for (const auto& j : judged) {
    ClaimLine line;
    line.statement = j.experiment + ": " + j.statement;
    if (j.per_run.size() == 1 && j.per_run[0]) {
      const ClaimResult& r = *j.per_run[0];
      line.mark = r.status == ClaimStatus::held         ? "held"
                  : r.status == ClaimStatus::not_held   ? "NOT HELD"
                  : r.status == ClaimStatus::reported   ? "value"
                  : r.status == ClaimStatus::not_judged ? "not judged"
                                                        : "n/a";
      line.outcome = r.status == ClaimStatus::not_applicable ? r.reason : claim_outcome_text(r);
      if ((r.status == ClaimStatus::not_held || r.status == ClaimStatus::not_judged) &&
          !r.reason.empty())
        line.outcome += "; " + r.reason;
      line.outcome += flags_text(r);
      if (std::string causes = claim_causes_text(r); !causes.empty()) line.outcome += "; " + causes;
      line.failed = r.status == ClaimStatus::not_held;
    } else {
      int held = 0, applicable = 0, reported = 0;
      std::vector<std::string> parts;
      for (std::size_t i = 0; i < j.per_run.size(); ++i) {
        const auto& r = j.per_run[i];
        if (r && r->status == ClaimStatus::reported)
          ++reported;
        else if (r && r->status != ClaimStatus::not_applicable &&
                 r->status != ClaimStatus::not_judged) {
          ++applicable;
          held += r->status == ClaimStatus::held;
          line.failed = line.failed || r->status == ClaimStatus::not_held;
        }
        parts.push_back(labels[i] + ": " + judged_cell(r));
      }
      line.mark = reported > 0 && applicable == 0
                      ? fmt::format("value in {}", reported)
                      : fmt::format("held in {} of {}", held, applicable);
      line.outcome =
          fmt::format("{} (reference {}); {}", j.expected, j.reference, fmt::join(parts, "; "));
    }
    out.push_back(std::move(line));
  }
  return out;
}

Table chapter_claims(const std::vector<JudgedClaim>& judged, const std::string& chapter,
                     const std::vector<std::string>& labels) {
  Table t;
  t.head = {"claim", "expected", "reference machine"};
  t.numeric = {false, false, true};
  for (const auto& l : labels) {
    t.head.push_back(labels.size() == 1 ? "this run" : l);
    t.numeric.push_back(false);
  }
  for (const auto& j : judged) {
    if (j.chapter != chapter) continue;
    std::vector<std::string> row = {j.experiment + ": " + j.statement, j.expected, j.reference};
    for (const auto& r : j.per_run) row.push_back(judged_cell(r));
    t.rows.push_back(std::move(row));
  }
  return t;
}

Glance glance_of(const ChapterSection& cs, const std::string& chapter,
                 const std::vector<RunFile>& runs, const std::vector<JudgedClaim>& judged) {
  Glance g{cs.heading, cs.anchor, cs.lesson, "", ""};
  int held = 0, applicable = 0, na = 0, unjudged = 0, control = 0;
  for (const auto& j : judged)
    if (j.chapter == chapter)
      for (const auto& r : j.per_run) {
        if (!r) continue;
        if (r->status == ClaimStatus::not_judged) ++(r->control_failed ? control : unjudged);
        if (r->status == ClaimStatus::not_applicable) {
          ++na;
          continue;
        }
        // A magnitude is not a claim held; a law on disturbed records was not judged.
        if (r->status == ClaimStatus::reported || r->status == ClaimStatus::not_judged) continue;
        ++applicable;
        held += r->status == ClaimStatus::held;
      }
  std::string aside;
  if (na) aside = fmt::format("{} not applicable", na);
  if (unjudged)
    aside +=
        fmt::format("{}{} not judged (disturbed records)", aside.empty() ? "" : ", ", unjudged);
  if (control)
    aside += fmt::format("{}{} not judged (control did not show the effect)",
                         aside.empty() ? "" : ", ", control);
  g.claims = applicable + na + unjudged + control == 0
                 ? "none made"
                 : fmt::format("{} of {} held{}", held, applicable,
                               aside.empty() ? "" : " (" + aside + ")");
  std::size_t n = 0, invalid = 0, noisy = 0, above = 0;
  for (const auto& run : runs)
    for (const auto& r : run.records) {
      std::string ch = r.chapter;
      if (ch.empty())
        if (const Experiment* e = find_experiment(r.experiment)) ch = e->chapter;
      if (ch != chapter) continue;
      ++n;
      invalid += !r.valid;
      noisy += r.notes.count("noisy");
      above += r.notes.count("above_ceiling");
    }
  g.records = fmt::format("{} record{}", n, n == 1 ? "" : "s");
  if (invalid) g.records += fmt::format(", {} INVALID", invalid);
  if (noisy) g.records += fmt::format(", {} noisy", noisy);
  if (above) g.records += fmt::format(", {} above the ceiling", above);
  return g;
}

// A run taken while the machine was busy says so before anything else: the activity seen
// before it started, and how many of its records were measured while others used the CPUs.
std::string skipped_experiments_note(const RunFile& run, const std::string& label, bool several) {
  const auto& p = run.provenance;
  if (!p.is_object() || !p.contains("skipped_experiments") ||
      !p.at("skipped_experiments").is_array() || p.at("skipped_experiments").empty())
    return "";
  // One line per reason: six GPU experiments left out for want of a GPU say so once.
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const auto& s : p.at("skipped_experiments")) {
    if (!s.is_object() || !s.contains("experiment") || !s.at("experiment").is_string()) continue;
    const std::string why =
        s.contains("reason") && s.at("reason").is_string() ? s.at("reason").get<std::string>() : "";
    auto it = std::find_if(by_reason.begin(), by_reason.end(),
                           [&](const auto& r) { return r.first == why; });
    if (it == by_reason.end()) {
      by_reason.push_back({why, {}});
      it = std::prev(by_reason.end());
    }
    it->second.push_back("`" + s.at("experiment").get<std::string>() + "`");
  }
  if (by_reason.empty()) return "";
  std::string items;
  for (const auto& [why, ids] : by_reason)
    items += fmt::format("{}{}{}", items.empty() ? "" : "; ", why.empty() ? "" : why + ": ",
                         fmt::join(ids, ", "));
  return fmt::format("{} left out what this machine cannot run ({})",
                     several ? label + ": this run" : std::string("This run"), items);
}

std::string busy_machine_warning(const RunFile& run, const std::string& label, bool several) {
  std::size_t noisy = 0;
  for (const Record& r : run.records) noisy += r.notes.count("noisy");
  const Activity before = activity_before_run(run.provenance);
  const double others = before.others_cpus, steal = before.steal_cpus;
  const bool busy_before = started_busy(before);
  if (noisy == 0 && !busy_before) return "";
  std::string w = several ? label + ": this run" : std::string("This run");
  // A few records in a long quiet run: a moment's disturbance, said in proportion.
  if (!busy_before && static_cast<double>(noisy) <= kNoisyRunFraction * run.records.size())
    return w + fmt::format(
                   " was quiet but for {} of its {} records, timed while other processes used a "
                   "quarter of a CPU or more (note `noisy`); the claims judged on them say so.",
                   noisy, run.records.size());
  w += fmt::format(
      " was measured on a busy machine: {} of its {} records were timed while other "
      "processes used a quarter of a CPU or more (note `noisy`)",
      noisy, run.records.size());
  if (busy_before)
    w += fmt::format(
        ", and before it started other processes used {:.2f} CPUs and the "
        "hypervisor stole {:.2f}",
        others, steal);
  return w + ". Its timings and the claims judged on them describe that machine, not this code.";
}

std::string cores_short_warning(const RunFile& run, const std::string& label, bool several) {
  const nlohmann::json& d = run.calibration.detail;
  if (!d.is_object() || !d.contains("cores_short") || !d.at("cores_short").is_array() ||
      d.at("cores_short").empty())
    return "";
  std::string w =
      several ? label + ": this run's calibration" : std::string("This run's calibration");
  w += " found its threads short of cores:";
  for (const auto& line : d.at("cores_short"))
    if (line.is_string()) w += " " + line.get<std::string>() + ";";
  w.back() = '.';
  return w +
         " Scaling and fractions of the peak at those thread counts describe the host's "
         "placement, not this code: measure again.";
}

}  // namespace concurdl::report_detail
