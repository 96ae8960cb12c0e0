// The claims' reference values (claims.hpp, claim_reference): every claim judged once on the
// committed reference runs of the source tree this program was built from.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "claims_detail.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

namespace {

namespace fs = std::filesystem;

struct ReferenceValue {
  double value;
  std::string run;  // the manifest's path of the run it was read from
};

// "experiment claim_id" -> the value its reference run measured, and which run that was.
std::map<std::string, ReferenceValue> read_reference_values() {
  std::map<std::string, ReferenceValue> out;
  const fs::path root = fs::path(build::source_dir) / "results" / "reference";
  const auto take = [&](const char* name, bool gpu_claims_only, bool judged_only = false) {
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
        if (judged_only && r.status == ClaimStatus::not_judged) continue;
        if (r.value) out[e.id + " " + c.id] = {*r.value, name};
      }
  };
  const ReferenceManifest& m = reference_manifest();
  // The claims runs in order, later ones winning; then the lessons run (the one sitting) over
  // all of them: a claim it judged keeps its value there, and a rerun of the same build never
  // stands in for it, failed or not (a law it could not judge, on disturbed records or without
  // its control, takes the last claims run that measured it).
  for (const std::string& name : m.claims)
    if (name != m.lessons) take(name.c_str(), false);
  take(m.lessons.c_str(), false, true);
  // The claims that need a GPU come from the GPU's run; its CPU references (ch04/cpu_reference,
  // on that machine's CPU) are not the reference machine's.
  if (!m.gpu.empty()) take(m.gpu.c_str(), true);
  return out;
}

}  // namespace

ReferenceManifest parse_reference_manifest(std::string_view text) {
  ReferenceManifest m;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string role, path, extra;
    if (!(words >> role)) continue;  // blank or a comment
    if (!(words >> path) || (words >> extra))
      throw std::invalid_argument(
          fmt::format("reference manifest, line {}: '{}' is not ROLE PATH", n, line));
    if (path.find("..") != std::string::npos || path.front() == '/')
      throw std::invalid_argument(fmt::format(
          "reference manifest, line {}: '{}' is not a path under results/reference", n, path));
    const auto once = [&](std::string& slot) {
      if (!slot.empty())
        throw std::invalid_argument(
            fmt::format("reference manifest, line {}: a second '{}' line", n, role));
      slot = path;
    };
    if (role == "lessons")
      once(m.lessons);
    else if (role == "gpu")
      once(m.gpu);
    else if (role == "repeats")
      once(m.repeats);
    else if (role == "frozen")
      once(m.frozen);
    else if (role == "claims")
      m.claims.push_back(path);
    else
      throw std::invalid_argument(
          fmt::format("reference manifest, line {}: unknown role '{}' (lessons, claims, gpu, "
                      "repeats or frozen)",
                      n, role));
  }
  if (m.lessons.empty() || m.claims.empty())
    throw std::invalid_argument("reference manifest: needs a 'lessons' line and 'claims' lines");
  return m;
}

const ReferenceManifest& reference_manifest() {
  static const ReferenceManifest m = [] {
    std::ifstream in(fs::path(build::source_dir) / "results" / "reference" / "manifest");
    if (!in) return ReferenceManifest{};  // away from its sources: no reference runs
    std::stringstream text;
    text << in.rdbuf();
    return parse_reference_manifest(text.str());
  }();
  return m;
}

std::string reference_machine_text(const RunFile& run) {
  const nlohmann::json& p = run.provenance;
  if (!p.is_object() || !p.contains("cpu") || !p.at("cpu").is_object()) return "";
  const nlohmann::json& c = p.at("cpu");
  if (!c.contains("family") || !c.contains("model") || !c.at("family").is_number() ||
      !c.at("model").is_number())
    return "";
  // A guest (the CPU reports a hypervisor) has vCPUs; bare metal has CPUs.
  const bool guest = c.contains("hypervisor") && c.at("hypervisor").is_string() &&
                     !c.at("hypervisor").get<std::string>().empty();
  std::string out;
  if (p.contains("cores") && p.at("cores").is_number_integer())
    out = fmt::format("{}-{} ", p.at("cores").get<int>(), guest ? "vCPU" : "CPU");
  const std::string brand = p.contains("cpu_model") && p.at("cpu_model").is_string()
                                ? p.at("cpu_model").get<std::string>()
                                : std::string("CPU");
  out += fmt::format("{}{}, family {} model {}", brand, guest ? " guest" : "",
                     c.at("family").get<int>(), c.at("model").get<int>());
  if (c.contains("microarchitecture") && c.at("microarchitecture").is_string())
    out += fmt::format(" ({})", c.at("microarchitecture").get<std::string>());
  if (p.contains("gpus") && p.at("gpus").is_array() && !p.at("gpus").empty() &&
      p.at("gpus")[0].contains("name"))
    out = fmt::format("{} in a {}", p.at("gpus")[0].at("name").get<std::string>(), out);
  return out;
}

namespace {
const std::map<std::string, ReferenceValue>& reference_values() {
  static const std::map<std::string, ReferenceValue> values = read_reference_values();
  return values;
}
}  // namespace

double claim_reference(const std::string& experiment, const std::string& claim_id) {
  const auto it = reference_values().find(experiment + " " + claim_id);
  return it == reference_values().end() ? std::numeric_limits<double>::quiet_NaN()
                                        : it->second.value;
}

std::string claim_reference_run(const std::string& experiment, const std::string& claim_id) {
  const auto it = reference_values().find(experiment + " " + claim_id);
  return it == reference_values().end() ? std::string() : it->second.run;
}

}  // namespace concurdl
