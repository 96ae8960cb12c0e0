// The Google Benchmark bridge: micro-benchmarks for nanosecond operations (a lock acquisition,
// an atomic increment) are written with Google Benchmark in a chapter's bench/ and run by the
// harness in-process; a reporter turns every run into the same records as experiments.
// Threaded benchmarks must use UseRealTime(): the bridge marks a threaded run without it invalid.
#pragma once

#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

struct MicroBenchmarks {
  std::string id;  // "ch02/counter_uncontended": the record's experiment id
  std::string chapter;
  std::string title;
  std::string filter;  // regex over benchmark names, as --benchmark_filter
  // Names for the benchmark's positional arguments ("BM_x/64/8" -> {"n": 64, "k": 8}); the
  // family name (less a "BM_" prefix) becomes the "variant" parameter, "threads:N" "threads".
  std::vector<std::string> arg_names;
  Params baseline;  // as Experiment::baseline
  std::vector<Figure> figures;
};

// Registers the set as an Experiment (experiment.hpp) with `microbenchmark_filter` set, so it is
// listed, selected, recorded and charted like any experiment; `concurdl run` sends it through
// the bridge. --threads and --set do not apply: the benchmark registration fixes its arguments.
bool register_microbenchmarks(MicroBenchmarks m);

// Run one set. Each benchmark is run `repetitions` times, repetitions interleaved randomly across
// the set's benchmarks (--benchmark_enable_random_interleaving); each repetition's real time per
// iteration (seconds) is one sample; rate counters (items_per_second, bytes_per_second) become
// derived metrics. A threaded benchmark that does not use UseRealTime() gives an invalid record
// saying so, as does a benchmark that reports an error.
std::vector<Record> run_microbenchmarks(const Experiment& set, Profile profile, int repetitions);

}  // namespace concurdl
