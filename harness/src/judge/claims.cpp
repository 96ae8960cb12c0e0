// Claims judged against a run's records (claims.hpp).
#include "concurdl/harness/claims.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "claims_detail.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

const char* to_string(ClaimStatus s) {
  switch (s) {
    case ClaimStatus::held:
      return "held";
    case ClaimStatus::not_held:
      return "not held";
    case ClaimStatus::not_applicable:
      return "not applicable";
    case ClaimStatus::reported:
      return "reported";
    case ClaimStatus::not_judged:
      return "not judged";
  }
  return "?";
}

const char* to_string(Claim::Kind k) { return k == Claim::Kind::law ? "law" : "magnitude"; }

namespace {

using json = nlohmann::json;

// Why the claim does not apply on the machine or profile the run had, or "".
std::string inapplicable_because(const Claim& c, const json& prov) {
  auto number = [&](const char* key) -> std::optional<double> {
    if (prov.is_object() && prov.contains(key) && prov.at(key).is_number())
      return prov.at(key).get<double>();
    return std::nullopt;
  };
  if (c.needs_gpu) {
    const bool gpu = prov.is_object() && prov.contains("gpus") && prov.at("gpus").is_array() &&
                     !prov.at("gpus").empty();
    if (!gpu) return "needs a GPU; this run had none";
  }
  if (c.min_cpus > 0) {
    const auto cores = number("cores");
    if (!cores)
      return fmt::format("needs {} CPUs; the run does not say how many it had", c.min_cpus);
    if (*cores < c.min_cpus)
      return fmt::format("needs {} CPUs; this run had {}", c.min_cpus, static_cast<int>(*cores));
  }
  if (!c.cpu_feature.empty()) {
    bool has = false;
    if (prov.is_object() && prov.contains("cpu") && prov.at("cpu").is_object()) {
      const json& cpu = prov.at("cpu");
      if (cpu.contains("flags_used") && cpu.at("flags_used").is_array())
        for (const auto& f : cpu.at("flags_used"))
          if (f.is_string() && f.get<std::string>() == c.cpu_feature) has = true;
    }
    if (!has) return fmt::format("needs a CPU with {}; this run's had none", c.cpu_feature);
  }
  if (c.timing && prov.is_object() && prov.contains("profile") && prov.at("profile") == "smoke")
    return "depends on speed, and the smoke profile times nothing seriously";
  return "";
}

// The field of one record, and whether lower is better for it; nullopt when it has none.
std::optional<double> field_of(const Record& r, const std::string& field, bool& lower_better) {
  if (field == "median") {
    lower_better = r.lower_is_better;
    if (r.stats.n == 0 && r.samples.empty()) return std::nullopt;
    return r.stats.median;
  }
  if (auto m = r.metrics.find(field); m != r.metrics.end()) {
    lower_better = m->second.lower_is_better;
    if (m->second.stats.n == 0 && m->second.samples.empty()) return std::nullopt;
    return m->second.stats.median;
  }
  if (auto d = r.derived.find(field); d != r.derived.end()) {
    lower_better = false;  // rates, speedups, fractions of a ceiling
    return d->second;
  }
  return std::nullopt;
}

void add_flags(const Record& r, std::vector<std::string>& flags) {
  for (const char* key : {"noisy", "cores_short", "above_ceiling"})
    if (r.notes.count(key) && std::find(flags.begin(), flags.end(), key) == flags.end())
      flags.push_back(key);
}

std::string expected_text(const Claim& c) {
  if (c.kind == Claim::Kind::magnitude) return "reported";
  if (c.compare == Claim::Compare::within) {
    // The model's value to four digits (2.125×, 0.1667×): a count is held to it closely.
    std::string model = fmt::format("{:.4g}", c.bound);
    if (c.unit == "×" || c.unit == "x" || c.unit == "%")
      model += c.unit == "x" ? "×" : c.unit;
    else if (!c.unit.empty())
      model += " " + c.unit;
    return c.tolerance == 0 ? "exactly " + model : fmt::format("{} ± {:.3g}", model, c.tolerance);
  }
  return fmt::format("{} {}", c.compare == Claim::Compare::at_least ? "at least" : "at most",
                     claim_value_text(c.bound, c.unit));
}

}  // namespace

std::string claim_value_text(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "?";
  std::string num = fmt::format("{:.3g}", v);
  if (num.find('e') != std::string::npos) num = fmt::format("{:.3e}", v);
  if (unit.empty()) return num;
  if (unit == "×" || unit == "x" || unit == "%") return num + (unit == "x" ? "×" : unit);
  return num + " " + unit;
}

std::string claim_reference_text(double reference, const std::string& unit) {
  return std::isnan(reference) ? std::string("not measured yet")
                               : claim_value_text(reference, unit);
}

namespace claims_detail {

ClaimResult judge_claim(const Experiment& e, const Claim& c, const RunFile& run) {
  ClaimResult out;
  out.experiment = e.id;
  out.chapter = e.chapter;
  out.id = c.id;
  out.statement = c.statement;
  out.unit = c.unit;
  out.reference = std::numeric_limits<double>::quiet_NaN();
  out.expected = expected_text(c);
  out.kind = c.kind;
  out.causes = c.causes;
  if (std::string why = inapplicable_because(c, run.provenance); !why.empty()) {
    out.reason = std::move(why);
    return out;
  }
  const bool at_least = c.compare == Claim::Compare::at_least;
  const bool within = c.compare == Claim::Compare::within;
  // The worst value: the smallest (at_least), the largest (at_most), the farthest from the
  // model (within).
  const auto worse = [&](double a, double b) {
    if (within) return std::abs(a - c.bound) > std::abs(b - c.bound);
    return at_least ? a < b : a > b;
  };
  std::optional<double> worst;
  std::string invalid, missing;
  bool any_selected = false;
  for (const Record& r : run.records) {
    if (r.experiment != e.id || !params_match(r.params, c.select)) continue;
    any_selected = true;
    if (!r.valid) {
      invalid = fmt::format("{{{}}} is invalid: {}", describe(r.params), r.validation);
      continue;
    }
    bool lower = false;
    const std::optional<double> v = field_of(r, c.field, lower);
    if (!v) {
      missing = fmt::format("{{{}}} has no {}", describe(r.params), c.field);
      continue;
    }
    double value = *v;
    std::string where = describe(r.params);
    const Record* peer = nullptr;
    if (!c.versus.empty()) {
      Params p = r.params;
      for (const auto& [k, val] : c.versus) p[k] = val;
      p = applicable_params(e, std::move(p));
      for (const Record& q : run.records)
        if (q.experiment == e.id && q.params == p) peer = &q;
      if (!peer) {
        missing = fmt::format("its peer {{{}}} was not measured", describe(p));
        continue;
      }
      if (!peer->valid) {
        invalid = fmt::format("its peer {{{}}} is invalid: {}", describe(p), peer->validation);
        continue;
      }
      bool peer_lower = false;
      const std::optional<double> pv = field_of(*peer, c.field, peer_lower);
      if (!pv) {
        missing = fmt::format("its peer {{{}}} has no {}", describe(p), c.field);
        continue;
      }
      if (*pv == 0 || *v == 0) {
        // A time of 0 was not measured; a count of 0 is a count, and a ratio to it is wrong.
        if (c.timing) {
          missing = fmt::format("its peer {{{}}} has no {}", describe(p), c.field);
          continue;
        }
        if ((lower ? *v : *pv) == 0) {
          invalid = fmt::format("{{{}}} over {{{}}}: {} is 0, the ratio has no value",
                                describe(r.params), describe(p), c.field);
          continue;
        }
      }
      value = lower ? *pv / *v : *v / *pv;
      where += " over " + describe(peer->params);
    }
    add_flags(r, out.flags);
    if (peer) add_flags(*peer, out.flags);
    if (!worst || worse(value, *worst)) {
      worst = value;
      out.where = where;
    }
  }
  if (!invalid.empty()) {
    out.status = ClaimStatus::not_held;
    out.value = worst;
    out.reason = invalid;
    return out;
  }
  if (!worst) {
    out.reason = any_selected ? missing
                              : fmt::format("not measured in this run (no record with {})",
                                            describe(c.select));
    return out;
  }
  out.value = worst;
  // A disturbance its records were noted with is the first place to look.
  const auto flagged_first = [&](const char* flag, ClaimCause cause) {
    if (std::find(out.flags.begin(), out.flags.end(), flag) == out.flags.end()) return;
    std::erase(out.causes, cause);
    out.causes.insert(out.causes.begin(), cause);
  };
  flagged_first("cores_short", ClaimCause::cores_and_smt);
  flagged_first("noisy", ClaimCause::noise);
  if (c.kind == Claim::Kind::magnitude) {
    out.status = ClaimStatus::reported;
    return out;
  }
  const bool holds = within     ? std::abs(*worst - c.bound) <= c.tolerance
                     : at_least ? *worst >= c.bound
                                : *worst <= c.bound;
  out.status = holds ? ClaimStatus::held : ClaimStatus::not_held;
  // A law about speed on disturbed records is not judged, held or not: flags work both ways.
  // A count (timing false) does not depend on speed and is judged all the same.
  const auto flagged = [&](const char* f) {
    return std::find(out.flags.begin(), out.flags.end(), f) != out.flags.end();
  };
  // A positive control: the law is judged only where the run shows the effect could be seen.
  if (c.control) {
    const Claim::Control& k = *c.control;
    const bool k_at_least = k.compare == Claim::Compare::at_least;
    std::optional<double> kv;
    for (const Record& r : run.records) {
      if (r.experiment != e.id || !params_match(r.params, k.select) || !r.valid) continue;
      bool lower = false;
      const std::optional<double> v = field_of(r, k.field, lower);
      if (v && (!kv || (k_at_least ? *v < *kv : *v > *kv))) kv = *v;
    }
    if (!kv) {
      out.status = ClaimStatus::not_applicable;
      out.reason = fmt::format("its positive control ({}: {}) was not measured in this run",
                               describe(k.select), k.shows);
      return out;
    }
    out.control_value = *kv;
    if (!(k_at_least ? *kv >= k.bound : *kv <= k.bound)) {
      out.status = ClaimStatus::not_judged;
      out.control_failed = true;
      out.reason = fmt::format(
          "not judged: its positive control did not show the effect ({} at {}: {} {:.4g}, "
          "needs {} {:.4g}), so the law could pass because nothing happened; it would have {}",
          k.shows, describe(k.select), k.field, *kv, k_at_least ? "at least" : "at most", k.bound,
          holds ? "held" : "failed");
      return out;
    }
  }
  if (c.timing && (flagged("noisy") || flagged("cores_short"))) {
    out.reason = fmt::format("not judged: its records are noted {}; it would have {}",
                             flagged("noisy") ? "noisy (the machine was busy)"
                                              : "cores_short (the CPUs were not a core each)",
                             holds ? "held" : "failed");
    out.status = ClaimStatus::not_judged;
  }
  return out;
}

}  // namespace claims_detail

ClaimResult evaluate_claim(const Experiment& e, const Claim& c, const RunFile& run) {
  ClaimResult out = claims_detail::judge_claim(e, c, run);
  out.reference = claim_reference(e.id, c.id);
  return out;
}

std::vector<ClaimResult> evaluate_claims(const RunFile& run) {
  std::vector<ClaimResult> out;
  for (const Experiment& e : experiments()) {
    if (e.claims.empty()) continue;
    const bool present = std::any_of(run.records.begin(), run.records.end(),
                                     [&](const Record& r) { return r.experiment == e.id; });
    if (!present) continue;
    for (const Claim& c : e.claims) out.push_back(evaluate_claim(e, c, run));
  }
  return out;
}

std::string claim_outcome_text(const ClaimResult& r) {
  std::string out = r.value ? claim_value_text(*r.value, r.unit) : "—";
  if (r.kind == Claim::Kind::magnitude)
    return out + fmt::format(" (reference machine {})", claim_reference_text(r.reference, r.unit));
  out += fmt::format(" ({}; reference {})", r.expected, claim_reference_text(r.reference, r.unit));
  return out;
}

std::string claim_causes_text(const ClaimResult& r) {
  if (r.causes.empty()) return "";
  std::string out;
  if (r.status == ClaimStatus::reported) {
    for (ClaimCause c : r.causes) out += (out.empty() ? "" : ", ") + std::string(to_string(c));
    return "depends on: " + out;
  }
  if (r.status != ClaimStatus::not_held && r.status != ClaimStatus::not_judged) return "";
  for (ClaimCause c : r.causes) out += (out.empty() ? "" : "; ") + std::string(cause_text(c));
  return "where to look: " + out;
}

const char* not_judged_label(const ClaimResult& r) {
  return r.control_failed ? "control did not show the effect" : "disturbed records";
}

std::string not_judged_counts(int disturbed, int control) {
  std::string out;
  if (disturbed) out += fmt::format("; {} not judged (disturbed records)", disturbed);
  if (control) out += fmt::format("; {} not judged (control did not show the effect)", control);
  return out;
}

std::string claims_counts(const std::vector<ClaimResult>& results) {
  int held = 0, failed = 0, na = 0, reported = 0, flagged = 0, unjudged = 0, control = 0;
  for (const auto& r : results) {
    switch (r.status) {
      case ClaimStatus::held:
        ++held;
        break;
      case ClaimStatus::not_held:
        ++failed;
        break;
      case ClaimStatus::reported:
        ++reported;
        break;
      case ClaimStatus::not_applicable:
        ++na;
        break;
      case ClaimStatus::not_judged:
        ++(r.control_failed ? control : unjudged);
        break;
    }
    if (!r.flags.empty() && r.status != ClaimStatus::not_applicable &&
        r.status != ClaimStatus::not_judged)
      ++flagged;
  }
  std::string out = fmt::format("{} held, {} not held, {} not applicable", held, failed, na);
  out += not_judged_counts(unjudged, control);
  if (reported) out += fmt::format("; {} magnitude{} reported", reported, reported == 1 ? "" : "s");
  if (flagged) out += fmt::format("; {} judged on flagged records", flagged);
  return out;
}

std::string claims_text(const std::vector<ClaimResult>& results) {
  std::string out;
  for (const auto& r : results) {
    const char* status = r.status == ClaimStatus::held         ? "held    "
                         : r.status == ClaimStatus::not_held   ? "NOT HELD"
                         : r.status == ClaimStatus::reported   ? "value   "
                         : r.status == ClaimStatus::not_judged ? "unjudged"
                                                               : "n/a     ";
    out += fmt::format("{}  {}: {}\n", status, r.experiment, r.statement);
    std::string detail = r.status == ClaimStatus::not_applicable ? r.reason : claim_outcome_text(r);
    if ((r.status == ClaimStatus::not_held || r.status == ClaimStatus::not_judged) &&
        !r.reason.empty())
      detail += "; " + r.reason;
    if (!r.where.empty() && r.status != ClaimStatus::not_applicable) detail += " at " + r.where;
    if (r.control_value && r.status != ClaimStatus::not_judged)
      detail += fmt::format("; positive control {:.4g}", *r.control_value);
    for (const auto& f : r.flags)
      detail += f == "noisy"         ? " [NOISY: measured while the machine was busy]"
                : f == "cores_short" ? " [CORES SHORT: the CPUs were not a core each]"
                                     : " [ABOVE CEILING: see the record's notes]";
    out += "          " + detail + "\n";
    if (std::string causes = claim_causes_text(r); !causes.empty())
      out += "          " + causes + "\n";
  }
  out += claims_counts(results) + "\n";
  return out;
}

bool any_failed(const std::vector<ClaimResult>& results) {
  return std::any_of(results.begin(), results.end(),
                     [](const ClaimResult& r) { return r.status == ClaimStatus::not_held; });
}

nlohmann::json to_json(const ClaimResult& r) {
  json j = {{"experiment", r.experiment}, {"id", r.id},
            {"statement", r.statement},   {"status", to_string(r.status)},
            {"expected", r.expected},     {"reference", r.reference},
            {"kind", to_string(r.kind)}};
  if (!r.causes.empty()) {
    json causes = json::array();
    for (ClaimCause c : r.causes) causes.push_back(to_string(c));
    j["causes"] = causes;
  }
  if (r.value) j["value"] = *r.value;
  if (!r.unit.empty()) j["unit"] = r.unit;
  if (!r.where.empty()) j["where"] = r.where;
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (!r.flags.empty()) j["flags"] = r.flags;
  if (r.control_value) j["control_value"] = *r.control_value;
  return j;
}

nlohmann::json claims_json(const std::vector<ClaimResult>& results) {
  json a = json::array();
  for (const auto& r : results) a.push_back(to_json(r));
  return a;
}

std::string claim_expected_text(const Claim& c) { return expected_text(c); }

}  // namespace concurdl
