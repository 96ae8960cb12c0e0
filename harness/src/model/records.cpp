// Result records (schema v2, reads v1): JSON in and out, atomic writes, and a loader whose every
// error names the file and the field.
#include "concurdl/harness/records.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "concurdl/core/errors.hpp"

namespace concurdl {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Parameter values that are numbers in their shortest exact form ("2", "0.02", "1e-05") are
// written as JSON numbers; everything else ("16M", "v1_naive", "007") as strings. Reading turns
// a number back into that same text, so a round trip is exact.
json param_value(const std::string& v) {
  if (v.empty() || v.size() > 24) return v;
  if (v.find_first_not_of("0123456789") == std::string::npos) {
    if (v.size() < 19 && (v.size() == 1 || v[0] != '0')) return std::stoll(v);
    return v;
  }
  if (v.find_first_not_of("0123456789.-+e") != std::string::npos) return v;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (errno != 0 || end != v.c_str() + v.size() || !std::isfinite(d)) return v;
  if (fmt::format("{}", d) != v) return v;  // "1.50", "+2": keep what was typed
  return d;
}

std::string param_text(double d) { return fmt::format("{}", d); }

json stats_json(const Summary& s) {
  return {{"median", s.n ? json(s.median) : json(nullptr)},
          {"min", s.min},
          {"max", s.max},
          {"mean", s.mean},
          {"stdev", s.stdev},
          {"ci95", {s.ci95_lo, s.ci95_hi}}};
}

json summary_json(const Record& r) { return r.stats.n ? json(r.stats.median) : json(nullptr); }

}  // namespace

json to_json(const Record& r) {
  json params = json::object();
  for (const auto& [k, v] : r.params) params[k] = param_value(v);
  json j = {{"experiment", r.experiment},
            {"chapter", r.chapter},
            {"params", params},
            {"metric", r.metric},
            {"unit", r.unit},
            {"lower_is_better", r.lower_is_better},
            {"samples", r.samples},
            {"median", summary_json(r)},
            {"min", r.stats.min},
            {"max", r.stats.max},
            {"mean", r.stats.mean},
            {"stdev", r.stats.stdev},
            {"ci95", {r.stats.ci95_lo, r.stats.ci95_hi}},
            {"derived", r.derived},
            {"valid", r.valid}};
  if (!r.metrics.empty()) {
    json m = json::object();
    for (const auto& [name, series] : r.metrics) {
      json one = {{"unit", series.unit},
                  {"lower_is_better", series.lower_is_better},
                  {"samples", series.samples}};
      one.update(stats_json(series.stats));
      m[name] = one;
    }
    j["metrics"] = m;
  }
  if (!r.timer.empty()) j["timer"] = r.timer;
  if (!r.valid) j["validation"] = r.validation;
  if (!r.notes.empty()) j["notes"] = r.notes;
  return j;
}

json to_json(const Calibration& c) {
  json j = c.detail.is_object() ? c.detail : json::object();
  j["mem_bandwidth_bytes_per_s"] = c.mem_bandwidth_bytes_per_s;
  j["peak_flops"] = c.peak_flops;
  j["peak_flops_1core"] = c.peak_flops_1core;
  j["thread_copy_bytes_per_s"] = c.thread_copy_bytes_per_s;
  if (c.rank_alpha_s > 0 || c.rank_beta_s_per_byte > 0) {
    j["rank_alpha_s"] = c.rank_alpha_s;
    j["rank_beta_s_per_byte"] = c.rank_beta_s_per_byte;
  }
  return j;
}

json to_json(const RunFile& f) {
  json records = json::array();
  for (const auto& r : f.records) records.push_back(to_json(r));
  json j = {{"schema_version", f.schema_version},
            {"concurdl_version", f.concurdl_version},
            {"command", f.command},
            {"provenance", f.provenance},
            {"calibration", to_json(f.calibration)}};
  if (!f.claims.is_null()) j["claims"] = f.claims;
  if (!f.exercises.is_null()) j["exercises"] = f.exercises;
  j["records"] = records;
  return j;
}

namespace {

// Field access that names the file and the JSON path on every failure.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw UsageError(fmt::format("{}: field '{}': {}", where_, field, what));
  }
  const json& at(const json& obj, const std::string& key, const std::string& path) const {
    if (!obj.is_object()) fail(path, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(join(path, key), "missing");
    return *it;
  }
  std::string str(const json& obj, const std::string& key, const std::string& path) const {
    const json& v = at(obj, key, path);
    if (!v.is_string()) fail(join(path, key), "expected a string");
    return v.get<std::string>();
  }
  double num(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number");
    return v.get<double>();
  }
  double num(const json& obj, const std::string& key, const std::string& path) const {
    return num(at(obj, key, path), join(path, key));
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::string where_;
};

Record record_from_json(const Reader& rd, const json& j, const std::string& path) {
  Record r;
  if (!j.is_object()) rd.fail(path, "expected an object");
  r.experiment = rd.str(j, "experiment", path);
  r.chapter = rd.str(j, "chapter", path);
  const json& params = rd.at(j, "params", path);
  if (!params.is_object()) rd.fail(path + ".params", "expected an object");
  for (const auto& [k, v] : params.items()) {
    if (v.is_string())
      r.params[k] = v.get<std::string>();
    else if (v.is_number_integer())
      r.params[k] = std::to_string(v.get<long long>());
    else if (v.is_number())
      r.params[k] = param_text(v.get<double>());
    else if (v.is_boolean())
      r.params[k] = v.get<bool>() ? "true" : "false";
    else
      rd.fail(path + ".params." + k, "expected a string or a number");
  }
  r.metric = rd.str(j, "metric", path);
  r.unit = rd.str(j, "unit", path);
  if (auto it = j.find("lower_is_better"); it != j.end() && it->is_boolean())
    r.lower_is_better = *it;
  const json& samples = rd.at(j, "samples", path);
  if (!samples.is_array()) rd.fail(path + ".samples", "expected an array of numbers");
  for (std::size_t i = 0; i < samples.size(); ++i)
    r.samples.push_back(rd.num(samples[i], fmt::format("{}.samples[{}]", path, i)));
  if (!r.samples.empty()) r.stats = summarize(r.samples);
  // The stored statistics are checked to be present and numeric; the loaded values are
  // recomputed from the samples above, which are the ground truth.
  for (const char* k : {"median", "min", "max", "mean", "stdev"})
    if (!r.samples.empty()) rd.num(j, k, path);
  const json& ci = rd.at(j, "ci95", path);
  if (!ci.is_array() || ci.size() != 2) rd.fail(path + ".ci95", "expected [low, high]");
  if (auto it = j.find("derived"); it != j.end()) {
    if (!it->is_object()) rd.fail(path + ".derived", "expected an object");
    for (const auto& [k, v] : it->items()) {
      if (v.is_number()) r.derived[k] = v.get<double>();
    }
  }
  const json& valid = rd.at(j, "valid", path);
  if (!valid.is_boolean()) rd.fail(path + ".valid", "expected true or false");
  r.valid = valid.get<bool>();
  if (auto it = j.find("validation"); it != j.end() && it->is_string()) r.validation = *it;
  if (auto it = j.find("metrics"); it != j.end()) {
    if (!it->is_object()) rd.fail(path + ".metrics", "expected an object");
    for (const auto& [name, m] : it->items()) {
      const std::string mp = path + ".metrics." + name;
      MetricSeries series;
      series.unit = rd.str(m, "unit", mp);
      if (auto b = m.find("lower_is_better"); b != m.end() && b->is_boolean())
        series.lower_is_better = *b;
      const json& ms = rd.at(m, "samples", mp);
      if (!ms.is_array()) rd.fail(mp + ".samples", "expected an array of numbers");
      for (std::size_t i = 0; i < ms.size(); ++i)
        series.samples.push_back(rd.num(ms[i], fmt::format("{}.samples[{}]", mp, i)));
      if (!series.samples.empty()) series.stats = summarize(series.samples);
      r.metrics[name] = std::move(series);
    }
  }
  if (auto it = j.find("timer"); it != j.end()) {
    if (!it->is_string()) rd.fail(path + ".timer", "expected a string");
    r.timer = it->get<std::string>();
  }
  if (auto it = j.find("notes"); it != j.end()) {
    if (!it->is_object()) rd.fail(path + ".notes", "expected an object of strings");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) rd.fail(path + ".notes." + k, "expected a string");
      r.notes[k] = v.get<std::string>();
    }
  }
  // Up to concurdl 7c1c929 a device-timed record was flagged against the CPU's calibration
  // (a GPU's GEMM "above" the CPU's peak FLOP/s): such a flag is read as the mistake it was.
  if (r.timed_on_a_device()) r.notes.erase("above_ceiling");
  return r;
}

}  // namespace

RunFile run_from_json(const json& j, const std::string& where) {
  Reader rd(where);
  if (!j.is_object()) rd.fail("(top level)", "expected an object");
  RunFile f;
  const json& version = rd.at(j, "schema_version", "");
  if (!version.is_number_integer()) rd.fail("schema_version", "expected an integer");
  f.schema_version = version.get<int>();
  if (f.schema_version < kOldestSchemaVersion || f.schema_version > kSchemaVersion)
    rd.fail("schema_version",
            fmt::format("{} is not supported (this concurdl reads versions {} to {})",
                        f.schema_version, kOldestSchemaVersion, kSchemaVersion));
  f.concurdl_version = rd.str(j, "concurdl_version", "");
  const json& cmd = rd.at(j, "command", "");
  if (!cmd.is_array()) rd.fail("command", "expected an array of strings");
  for (const auto& c : cmd) {
    if (!c.is_string()) rd.fail("command", "expected an array of strings");
    f.command.push_back(c.get<std::string>());
  }
  f.provenance = rd.at(j, "provenance", "");
  if (!f.provenance.is_object()) rd.fail("provenance", "expected an object");
  if (auto it = j.find("calibration"); it != j.end()) {
    if (!it->is_object()) rd.fail("calibration", "expected an object");
    f.calibration.detail = *it;
    auto get = [&](const char* k) {
      auto v = it->find(k);
      return v != it->end() && v->is_number() ? v->get<double>() : 0.0;
    };
    f.calibration.mem_bandwidth_bytes_per_s = get("mem_bandwidth_bytes_per_s");
    f.calibration.peak_flops = get("peak_flops");
    f.calibration.peak_flops_1core = get("peak_flops_1core");
    f.calibration.thread_copy_bytes_per_s = get("thread_copy_bytes_per_s");
    f.calibration.rank_alpha_s = get("rank_alpha_s");
    f.calibration.rank_beta_s_per_byte = get("rank_beta_s_per_byte");
  }
  if (auto it = j.find("claims"); it != j.end()) {
    if (!it->is_array()) rd.fail("claims", "expected an array");
    f.claims = *it;
  }
  if (auto it = j.find("exercises"); it != j.end()) {
    if (!it->is_array()) rd.fail("exercises", "expected an array");
    for (std::size_t i = 0; i < it->size(); ++i)
      if (!(*it)[i].is_object() || !(*it)[i].contains("id") || !(*it)[i].contains("verdict"))
        rd.fail(fmt::format("exercises[{}]", i), "expected an object with an id and a verdict");
    f.exercises = *it;
  }
  const json& records = rd.at(j, "records", "");
  if (!records.is_array()) rd.fail("records", "expected an array");
  for (std::size_t i = 0; i < records.size(); ++i)
    f.records.push_back(record_from_json(rd, records[i], fmt::format("records[{}]", i)));
  return f;
}

RunFile load_run(const fs::path& dir_or_file) {
  std::error_code ec;
  const fs::path file =
      fs::is_directory(dir_or_file, ec) ? dir_or_file / "results.json" : dir_or_file;
  // Anything but a regular file (a directory named results.json, a FIFO that would block) is
  // refused by what it is; a directory would otherwise read as empty.
  if (const fs::file_type type = fs::status(file, ec).type();
      !ec && type != fs::file_type::regular && type != fs::file_type::not_found) {
    const char* what = type == fs::file_type::directory ? "a directory"
                       : type == fs::file_type::fifo    ? "a FIFO"
                       : type == fs::file_type::socket  ? "a socket"
                       : type == fs::file_type::character || type == fs::file_type::block
                           ? "a device"
                           : "an unknown kind of file";
    throw UsageError(fmt::format("{}: is {}, not a results file", file.string(), what));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw UsageError(fmt::format("{}: cannot be read: {}", file.string(), std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (text.empty()) throw UsageError(fmt::format("{}: is empty", file.string()));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    const bool truncated = e.byte >= text.size();
    throw UsageError(
        fmt::format("{}: {} (at byte {} of {})", file.string(),
                    truncated ? "is truncated: the JSON ends early" : "is not valid JSON",
                    std::min<std::size_t>(e.byte, text.size()), text.size()));
  } catch (const json::exception& e) {  // e.g. a number too large for a double (1e400)
    throw UsageError(fmt::format("{}: is not valid JSON: {}", file.string(), e.what()));
  }
  RunFile f = run_from_json(j, file.string());
  f.path = file;
  return f;
}

std::vector<RunFile> load_runs(const std::vector<fs::path>& paths,
                               std::vector<std::string>& errors) {
  std::vector<RunFile> out;
  for (const auto& p : paths) {
    try {
      out.push_back(load_run(p));
    } catch (const UsageError& e) {
      errors.push_back(e.what());
    }
  }
  return out;
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  auto fail = [&](const char* step) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    throw std::runtime_error(fmt::format("{}: {} failed: {}", path.string(), step, why));
  };
  if (fd < 0)
    throw std::runtime_error(
        fmt::format("{}: cannot create a temporary file: {}", path.string(), std::strerror(errno)));
  auto fail_closing = [&](const char* step) {
    const int saved = errno;  // close() may change errno
    ::close(fd);
    errno = saved;
    fail(step);
  };
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_closing("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail_closing("fchmod");
  if (::fsync(fd) != 0) fail_closing("fsync");
  if (::close(fd) != 0) fail("close");
  if (::rename(tmpl.c_str(), path.c_str()) != 0) fail("rename");
  // Make the rename itself durable.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_run(const fs::path& run_dir, const RunFile& f) {
  write_file_atomic(run_dir / "results.json", to_json(f).dump(2) + "\n");
}

fs::path make_run_dir(const fs::path& root, const std::string& host, const std::string& short_sha) {
  std::error_code mk;
  fs::create_directories(root, mk);
  if (mk || !fs::is_directory(root))
    throw UsageError(fmt::format("{}: cannot create the results directory: {}", root.string(),
                                 mk ? mk.message() : "it is not a directory"));
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::string safe_host = host;
  for (char& c : safe_host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  const std::string base = fmt::format("{}-{}-{}", stamp, safe_host, short_sha);
  for (int i = 1; i < 1000; ++i) {
    const fs::path dir = root / (i == 1 ? base : fmt::format("{}-{}", base, i));
    // mkdir fails if the name exists, so two runs can never share (or overwrite) a directory.
    std::error_code ec;
    if (fs::create_directory(dir, ec)) return dir;
    if (ec)
      throw UsageError(
          fmt::format("{}: cannot create the run directory: {}", dir.string(), ec.message()));
  }
  throw UsageError(fmt::format("{}: too many runs named {}", root.string(), base));
}

std::string machine_label(const RunFile& run) {
  const nlohmann::json& p = run.provenance;
  if (!p.is_object()) return "";
  std::string cpu;
  if (p.contains("cpu") && p.at("cpu").is_object()) {
    const nlohmann::json& c = p.at("cpu");
    if (c.contains("microarchitecture") && c.at("microarchitecture").is_string())
      cpu = c.at("microarchitecture").get<std::string>();
    if ((cpu.empty() || cpu == "unknown") && c.contains("family") && c.contains("model") &&
        c.at("family").is_number() && c.at("model").is_number())
      cpu = fmt::format("family {} model {}", c.at("family").get<int>(), c.at("model").get<int>());
  }
  if (cpu.empty() && p.contains("cpu_model") && p.at("cpu_model").is_string())
    cpu = p.at("cpu_model").get<std::string>();
  if (cpu.empty()) return "";
  if (p.contains("cores") && p.at("cores").is_number_integer())
    cpu += fmt::format(", {} CPU{}", p.at("cores").get<int>(),
                       p.at("cores").get<int>() == 1 ? "" : "s");
  return cpu;
}

}  // namespace concurdl
