// Variant tables as documentation (variant_docs.hpp): Markdown tables and README blocks.
#include "concurdl/harness/variant_docs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "concurdl/harness/experiment.hpp"

namespace concurdl {

namespace {

// A table cell: one line; a '|' would end the cell and a '<' could open an HTML tag
// ("std::atomic<double>").
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '<') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string trim_newlines(std::string s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.erase(s.begin());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// A block of a README: the experiment its open marker names, and where its text lies.
struct Block {
  std::string experiment;
  std::size_t line = 0;        // of the open marker, from 1
  std::size_t body_begin = 0;  // just after the open marker's line
  std::size_t body_end = 0;    // the start of the close marker's line
};

std::size_t line_of(const std::string& text, std::size_t pos) {
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + pos, '\n'));
}

std::vector<Block> find_blocks(const std::string& text) {
  std::vector<Block> out;
  std::size_t at = 0;
  while ((at = text.find(kVariantsOpen, at)) != std::string::npos) {
    Block b;
    b.line = line_of(text, at);
    const std::size_t name_begin = at + kVariantsOpen.size();
    const std::size_t name_end = text.find("-->", name_begin);
    const std::size_t eol = text.find('\n', name_begin);
    if (name_end == std::string::npos || (eol != std::string::npos && name_end > eol))
      throw std::runtime_error(
          fmt::format("line {}: '{}' without its closing '-->'", b.line, kVariantsOpen));
    b.experiment = text.substr(name_begin, name_end - name_begin);
    while (!b.experiment.empty() && b.experiment.back() == ' ') b.experiment.pop_back();
    b.body_begin = eol == std::string::npos ? text.size() : eol + 1;
    const std::size_t close = text.find(kVariantsClose, b.body_begin);
    const std::size_t next_open = text.find(kVariantsOpen, b.body_begin);
    if (close == std::string::npos || (next_open != std::string::npos && next_open < close))
      throw std::runtime_error(fmt::format("line {}: the block of {} has no '{}'", b.line,
                                           b.experiment, kVariantsClose));
    b.body_end = close;
    out.push_back(b);
    at = close + kVariantsClose.size();
  }
  return out;
}

}  // namespace

std::string variants_markdown(const VariantAxisDoc& doc) {
  // The profiles and needs columns only where some row is full-only or needs something.
  const bool profiles =
      std::any_of(doc.rows.begin(), doc.rows.end(), [](const VariantDoc& r) { return !r.quick; });
  const bool needs = std::any_of(doc.rows.begin(), doc.rows.end(),
                                 [](const VariantDoc& r) { return !r.needs.empty(); });
  std::string out = fmt::format("| {} | what changed, and what it does to the numbers |", doc.axis);
  std::string rule = "|---|---|";
  if (profiles) {
    out += " profiles |";
    rule += "---|";
  }
  if (needs) {
    out += " needs |";
    rule += "---|";
  }
  out += "\n" + rule + "\n";
  for (const VariantDoc& r : doc.rows) {
    out += fmt::format("| `{}` | {} |", r.name, cell(r.what));
    if (profiles) out += r.quick ? " quick, full |" : " full |";
    if (needs) out += r.needs.empty() ? " |" : fmt::format(" {} |", r.needs.text());
    out += '\n';
  }
  return out;
}

std::string variants_block(const VariantAxisDoc& doc) {
  return fmt::format("{}{} -->\n{}{}\n", kVariantsOpen, doc.experiment, variants_markdown(doc),
                     kVariantsClose);
}

std::string regenerate_variant_blocks(const std::string& readme) {
  std::string out;
  std::size_t copied = 0;
  for (const Block& b : find_blocks(readme)) {
    out += readme.substr(copied, b.body_begin - copied);
    const VariantAxisDoc* doc = find_variant_doc(b.experiment);
    out += doc ? variants_markdown(*doc) : readme.substr(b.body_begin, b.body_end - b.body_begin);
    copied = b.body_end;
  }
  out += readme.substr(copied);
  return out;
}

std::vector<std::string> check_readme_variants(const std::filesystem::path& readme,
                                               std::string_view chapter) {
  std::vector<std::string> problems;
  std::ifstream in(readme);
  if (!in) return {fmt::format("{}: cannot be read", readme.string())};
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::vector<Block> blocks;
  try {
    blocks = find_blocks(text);
  } catch (const std::exception& e) {
    return {fmt::format("{}: {}", readme.string(), e.what())};
  }
  for (const Block& b : blocks) {
    const VariantAxisDoc* doc = find_variant_doc(b.experiment);
    if (doc == nullptr) {
      problems.push_back(fmt::format("{}:{}: {} has no variant table in the program",
                                     readme.string(), b.line, b.experiment));
      continue;
    }
    const std::string want = trim_newlines(variants_markdown(*doc));
    const std::string have = trim_newlines(text.substr(b.body_begin, b.body_end - b.body_begin));
    if (want == have) continue;
    // The first line that differs, so the message says what changed.
    std::istringstream w(want), h(have);
    std::string wl, hl;
    std::size_t n = 0;
    while (true) {
      const bool more_w = static_cast<bool>(std::getline(w, wl));
      const bool more_h = static_cast<bool>(std::getline(h, hl));
      if (!more_w) wl = "(nothing)";
      if (!more_h) hl = "(nothing)";
      if (wl != hl || (!more_w && !more_h)) break;
      ++n;
    }
    problems.push_back(fmt::format(
        "{}:{}: the table of {} differs from the program's at its line {}:\n  README:  {}\n  "
        "program: {}",
        readme.string(), b.line, b.experiment, n + 1, hl, wl));
  }
  // Every row the chapter's experiments run is in some block: an experiment whose rows are a
  // subset of another's table (the memory-bound sum runs the ladder without its last row)
  // needs no block of its own.
  auto shown = [&](const VariantDoc& row) {
    return std::any_of(blocks.begin(), blocks.end(), [&](const Block& b) {
      const VariantAxisDoc* doc = find_variant_doc(b.experiment);
      return doc != nullptr &&
             std::any_of(doc->rows.begin(), doc->rows.end(), [&](const VariantDoc& r) {
               return r.name == row.name && r.what == row.what;
             });
    });
  };
  for (const VariantAxisDoc& d : variant_docs()) {
    const Experiment* e = find_experiment(d.experiment);
    if (e == nullptr || e->chapter != chapter) continue;
    if (!std::all_of(d.rows.begin(), d.rows.end(), shown))
      problems.push_back(
          fmt::format("{}: no block shows the variants of {} (add '{}{} -->' and "
                      "'{}')",
                      readme.string(), d.experiment, kVariantsOpen, d.experiment, kVariantsClose));
  }
  return problems;
}

}  // namespace concurdl
