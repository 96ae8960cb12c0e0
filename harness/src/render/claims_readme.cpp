// The chapter READMEs' claims blocks (claims.hpp): each chapter's claims as a Markdown table,
// written from the declarations, and the check that a README's blocks are the program's.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/claims.hpp"
#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

namespace {

constexpr std::string_view kOpen = "<!-- claims:begin ";
constexpr std::string_view kClose = "<!-- claims:end -->";

std::string kind_text(const Claim& c) {
  if (c.kind == Claim::Kind::law) return "law";
  std::string out;
  for (ClaimCause cause : c.causes)
    out += (out.empty() ? "" : ", ") + std::string(to_string(cause));
  return "magnitude; depends on " + out;
}

std::string applies_text(const Claim& c) {
  std::vector<std::string> parts;
  if (c.min_cpus > 0) parts.push_back(fmt::format("≥ {} CPUs", c.min_cpus));
  if (!c.cpu_feature.empty()) parts.push_back(c.cpu_feature);
  if (c.needs_gpu) parts.push_back("a GPU");
  parts.push_back(c.timing ? "timed profiles" : "every profile");
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += '\\';
    out += ch == '\n' ? ' ' : ch;
  }
  return out;
}

// A reference run's provenance, read once per run.
const RunFile* reference_run(const std::string& name) {
  static std::map<std::string, std::optional<RunFile>> runs;
  auto it = runs.find(name);
  if (it == runs.end()) {
    std::optional<RunFile> run;
    try {
      run = load_run(std::filesystem::path(build::source_dir) / "results" / "reference" / name);
    } catch (const std::exception&) {
    }
    it = runs.emplace(name, std::move(run)).first;
  }
  return it->second ? &*it->second : nullptr;
}

// A reference run's machine in a word or two, from its records: the GPU's name, else the CPU's
// microarchitecture, else its family and model.
std::string machine_label(const std::string& run_name) {
  const RunFile* run = run_name.empty() ? nullptr : reference_run(run_name);
  if (run == nullptr || !run->provenance.is_object()) return "";
  const nlohmann::json& p = run->provenance;
  if (p.contains("gpus") && p.at("gpus").is_array() && !p.at("gpus").empty() &&
      p.at("gpus")[0].contains("name") && p.at("gpus")[0].at("name").is_string())
    return p.at("gpus")[0].at("name").get<std::string>();
  if (!p.contains("cpu") || !p.at("cpu").is_object()) return "";
  const nlohmann::json& c = p.at("cpu");
  if (c.contains("microarchitecture") && c.at("microarchitecture").is_string())
    return c.at("microarchitecture").get<std::string>();
  if (c.contains("family") && c.contains("model") && c.at("family").is_number() &&
      c.at("model").is_number())
    return fmt::format("family {} model {}", c.at("family").get<int>(), c.at("model").get<int>());
  return "";
}

struct ClaimBlock {
  std::string chapter;
  std::size_t body_begin = 0, body_end = 0, line = 0;
};

std::vector<ClaimBlock> claim_blocks(const std::string& text) {
  std::vector<ClaimBlock> out;
  std::size_t pos = 0;
  while ((pos = text.find(kOpen, pos)) != std::string::npos) {
    const std::size_t name_begin = pos + kOpen.size();
    const std::size_t name_end = text.find(" -->", name_begin);
    const std::size_t line = 1 + std::count(text.begin(), text.begin() + pos, '\n');
    if (name_end == std::string::npos)
      throw std::runtime_error(fmt::format("line {}: a claims block opens without ' -->'", line));
    ClaimBlock b;
    b.chapter = text.substr(name_begin, name_end - name_begin);
    b.line = line;
    b.body_begin = text.find('\n', name_end);
    b.body_begin = b.body_begin == std::string::npos ? text.size() : b.body_begin + 1;
    b.body_end = text.find(kClose, b.body_begin);
    if (b.body_end == std::string::npos)
      throw std::runtime_error(fmt::format("line {}: a claims block is not closed", line));
    out.push_back(b);
    pos = b.body_end + kClose.size();
  }
  return out;
}

}  // namespace

std::string claims_markdown(const std::string& chapter) {
  std::string out = fmt::format(
      "| claim | kind | holds when | on the reference machine | applies with |\n"
      "|---|---|---|---:|---|\n");
  const ReferenceManifest& m = reference_manifest();
  // Machines compared by everything the records say of them (CPU, cores, GPU), named by the
  // shortest part that tells them apart here.
  const auto machine_text_of = [](const std::string& name) {
    const RunFile* run = name.empty() ? nullptr : reference_run(name);
    return run ? reference_machine_text(*run) : std::string();
  };
  const std::string lessons_machine = machine_text_of(m.lessons);
  bool other_machines = false;
  for (const Experiment& e : experiments()) {
    if (e.chapter != chapter) continue;
    for (const Claim& c : e.claims) {
      std::string value = claim_reference_text(claim_reference(e.id, c.id), c.unit);
      // A value another machine measured names it.
      const std::string run = claim_reference_run(e.id, c.id);
      const std::string machine = machine_text_of(run);
      if (!machine.empty() && machine != lessons_machine) {
        const std::string label = machine_label(run);
        value += fmt::format(" ({})", label == machine_label(m.lessons) ? machine : label);
        other_machines = true;
      }
      out += fmt::format("| {} (`{}`) | {} | {} | {} | {} |\n", md_escape(c.statement), e.id,
                         kind_text(c), claim_expected_text(c), value, applies_text(c));
    }
  }
  // The machines, as the runs' own provenance says.
  const auto machine_of = [](const std::string& name) {
    const RunFile* run = reference_run(name);
    return run ? reference_machine_text(*run) : std::string("(its run is not there)");
  };
  out += fmt::format(
      "\nThe reference machine: {}, every chapter in one sitting from one clean build "
      "(`results/reference/{}`); each claim's reference value is the last of the runs "
      "`results/reference/manifest` lists that measured it, and for the claims that need a GPU, "
      "where it measured them, the run of an {} (`{}`). `concurdl check RUN` judges these on your "
      "own run; the report of every run "
      "opens with them. A law is an analytical model or an invariant and holds on every machine "
      "it applies to (`concurdl check` fails when one does not); a magnitude depends on the "
      "machine, on what the kind column names, and is reported beside the reference machine's "
      "value, never failing a check.{}\n",
      machine_of(m.lessons), m.lessons, machine_of(m.gpu), m.gpu,
      other_machines ? " A value with a machine in brackets was measured on that machine (the "
                       "manifest's runs name theirs in their records), not on the reference "
                       "machine."
                     : "");
  return out;
}

std::string regenerate_claim_blocks(const std::string& readme) {
  std::string out;
  std::size_t copied = 0;
  for (const ClaimBlock& b : claim_blocks(readme)) {
    out += readme.substr(copied, b.body_begin - copied) + claims_markdown(b.chapter);
    copied = b.body_end;
  }
  return out + readme.substr(copied);
}

std::vector<std::string> check_readme_claims(const std::filesystem::path& readme,
                                             const std::string& chapter) {
  std::ifstream in(readme);
  if (!in) return {readme.string() + ": cannot be read"};
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::vector<ClaimBlock> blocks;
  try {
    blocks = claim_blocks(text);
  } catch (const std::exception& e) {
    return {readme.string() + ": " + e.what()};
  }
  const bool has_claims =
      std::any_of(experiments().begin(), experiments().end(),
                  [&](const Experiment& e) { return e.chapter == chapter && !e.claims.empty(); });
  std::vector<std::string> problems;
  if (has_claims && std::none_of(blocks.begin(), blocks.end(),
                                 [&](const ClaimBlock& b) { return b.chapter == chapter; }))
    problems.push_back(fmt::format("{}: no claims block for {} ({}{} -->)", readme.string(),
                                   chapter, kOpen, chapter));
  for (const ClaimBlock& b : blocks)
    if (text.substr(b.body_begin, b.body_end - b.body_begin) != claims_markdown(b.chapter))
      problems.push_back(fmt::format("{}:{}: the claims block of {} is not the program's claims",
                                     readme.string(), b.line, b.chapter));
  return problems;
}

}  // namespace concurdl
