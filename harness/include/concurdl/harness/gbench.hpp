// The Google Benchmark bridge: micro-benchmarks for nanosecond operations (a lock acquisition,
// an atomic increment) are written with Google Benchmark in a chapter's bench/ and run by the
// harness in-process; a reporter turns every run into the same records as experiments.
// Threaded benchmarks must use UseRealTime() (registration checks it).
#pragma once

#include <string>
#include <vector>

#include "concurdl/harness/experiment.hpp"
#include "concurdl/harness/records.hpp"

namespace concurdl {

struct MicroBenchmarks {
  std::string id;       // "ch02/atomic_increment": the record's experiment id
  std::string chapter;
  std::string title;
  std::string filter;   // regex over benchmark names, as --benchmark_filter
  // Names for the benchmark's positional arguments ("BM_x/64/8" -> {"n": 64, "k": 8}); the
  // family name (less a "BM_" prefix) becomes the "variant" parameter, "threads:N" "threads".
  std::vector<std::string> arg_names;
  Params baseline;      // as Experiment::baseline
  std::vector<Figure> figures;
};

bool register_microbenchmarks(MicroBenchmarks m);
const std::vector<MicroBenchmarks>& microbenchmarks();
const MicroBenchmarks* find_microbenchmarks(const std::string& id);

// Run one set. Each benchmark is run `repetitions` times; each repetition's real time per
// iteration (seconds) is one sample. Counters become derived metrics.
std::vector<Record> run_microbenchmarks(const MicroBenchmarks& m, Profile profile,
                                        int repetitions);

}  // namespace concurdl
