// The Google Benchmark bridge: run registered benchmarks in-process through a reporter that
// turns each repetition into a sample of the same records experiments produce.
#include "concurdl/harness/gbench.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "concurdl/core/errors.hpp"

namespace concurdl {

bool register_microbenchmarks(MicroBenchmarks m) {
  Experiment e;
  e.id = m.id;
  e.chapter = m.chapter;
  e.title = m.title;
  // The axes exist so figures and baselines can name them; the values come from the benchmarks.
  e.axes.push_back({"variant", {"(benchmark family)"}});
  e.axes.push_back({"threads", {"(benchmark threads)"}});
  for (const auto& a : m.arg_names) e.axes.push_back({a, {"(benchmark argument)"}});
  e.baseline = m.baseline;
  e.figures = m.figures;
  e.microbenchmark_filter = m.filter;
  e.microbenchmark_args = m.arg_names;
  e.prepare = [](const Params&, GroupCache&) -> Trial {
    throw std::logic_error("a micro-benchmark set runs through the Google Benchmark bridge");
  };
  return register_experiment(std::move(e));
}

namespace {

struct Collected {
  Params params;
  std::vector<double> samples;
  std::map<std::string, std::vector<double>> counters;
  std::string error;
};

class RecordReporter : public benchmark::BenchmarkReporter {
 public:
  explicit RecordReporter(const Experiment& set) : set_(set) {}

  bool ReportContext(const Context&) override { return true; }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration) continue;  // our statistics come from the samples
      const std::string key = run.benchmark_name();
      auto [it, fresh] = collected_.try_emplace(key);
      if (fresh) {
        order_.push_back(key);
        it->second.params = params_of(run);
      }
      Collected& c = it->second;
      if (run.error_occurred) {
        c.error = "benchmark reported an error: " + run.error_message;
        continue;
      }
      if (run.threads > 1 && run.run_name.time_type != "real_time") {
        c.error =
            "threaded benchmark without UseRealTime(): CPU time summed over threads is "
            "not a throughput";
        continue;
      }
      const double seconds =
          run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      c.samples.push_back(seconds);
      for (const auto& [name, counter] : run.counters) c.counters[name].push_back(counter.value);
    }
  }

  std::vector<Record> records() const {
    std::vector<Record> out;
    for (const auto& key : order_) {
      const Collected& c = collected_.at(key);
      Record r;
      r.experiment = set_.id;
      r.chapter = set_.chapter;
      r.params = c.params;
      r.samples = c.samples;
      if (!c.error.empty() || c.samples.empty()) {
        r.valid = false;
        r.validation = c.error.empty() ? "no samples" : c.error;
      }
      if (!r.samples.empty()) r.stats = summarize(r.samples);
      for (const auto& [name, values] : c.counters) {
        std::string d = name;
        if (d == "items_per_second") d = "items_per_s";
        if (d == "bytes_per_second") d = "bytes_per_s";
        r.derived[d] = median(values);
      }
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  Params params_of(const Run& run) const {
    Params p;
    std::string family = run.run_name.function_name;
    if (family.rfind("BM_", 0) == 0) family = family.substr(3);
    p["variant"] = family;
    p["threads"] = std::to_string(run.threads);
    std::size_t pos = 0, i = 0;
    const std::string& args = run.run_name.args;
    while (!args.empty() && pos <= args.size()) {
      const std::size_t slash = args.find('/', pos);
      const std::string item =
          args.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      const std::size_t colon = item.find(':');
      if (colon != std::string::npos)
        p[item.substr(0, colon)] = item.substr(colon + 1);
      else
        p[i < set_.microbenchmark_args.size() ? set_.microbenchmark_args[i]
                                              : fmt::format("arg{}", i)] = item;
      ++i;
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    return p;
  }

  const Experiment& set_;
  std::map<std::string, Collected> collected_;
  std::vector<std::string> order_;
};

}  // namespace

std::vector<Record> run_microbenchmarks(const Experiment& set, Profile profile, int repetitions) {
  // Google Benchmark keeps its flags in globals; set them for this call. One call at a time.
  static std::mutex mu;
  std::lock_guard lock(mu);
  std::vector<std::string> args = {
      "concurdl",
      fmt::format("--benchmark_repetitions={}", std::max(1, repetitions)),
      fmt::format("--benchmark_min_time={}", profile == Profile::full ? 0.2 : 0.02),
      "--benchmark_enable_random_interleaving=true",
  };
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());
  RecordReporter reporter(set);
  const std::size_t n = benchmark::RunSpecifiedBenchmarks(&reporter, set.microbenchmark_filter);
  if (n == 0)
    throw std::logic_error(fmt::format("micro-benchmark set '{}': no benchmark matches '{}'",
                                       set.id, set.microbenchmark_filter));
  return reporter.records();
}

}  // namespace concurdl
