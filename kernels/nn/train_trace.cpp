// `concurdl train --trace`: the timeline files of a training run (train_record.hpp).
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "concurdl/harness/gantt.hpp"
#include "concurdl/harness/trace_files.hpp"
#include "train_record.hpp"

namespace concurdl::nn {

// --trace's files: RUN/trace.json (every span recorded) and figures/timeline.{svg,png} (a Gantt
// chart of the first steps: the first track's second and third outermost spans, the first
// being the warm-up that starts the workers).
void write_train_trace(const std::filesystem::path& run_dir, const RunFile& f, bool quiet) {
  trace::Recorder& rec = trace::Recorder::global();
  const std::vector<trace::Event> events = rec.stop();
  std::map<std::string, std::string> meta = {
      {"command", fmt::format("{}", fmt::join(f.command, " "))}};
  if (f.provenance.contains("git_commit") && f.provenance["git_commit"].is_string())
    meta["git_commit"] = f.provenance["git_commit"].get<std::string>();
  trace::write_chrome_trace(run_dir / "trace.json", events, meta, rec.dropped());
  std::string warning;
  if (!events.empty()) {
    trace::render_gantt(trace::first_spans(events, 2, 1), run_dir / "figures", "timeline",
                        "the first steps' timeline (concurdl train --trace)", warning, 1);
  } else {
    warning =
        "--trace: this trainer records no spans (chapter 05's ranks and chapter 06's "
        "pipeline do)";
  }
  if (!warning.empty()) std::fprintf(stderr, "concurdl: warning: %s\n", warning.c_str());
  if (!quiet)
    std::fprintf(stderr,
                 "concurdl: timeline: %s (%zu spans%s; open it in https://ui.perfetto.dev), "
                 "chart %s\n",
                 (run_dir / "trace.json").c_str(), events.size(),
                 rec.dropped() > 0 ? fmt::format(", {} more dropped", rec.dropped()).c_str() : "",
                 (run_dir / "figures" / "timeline.svg").c_str());
}

}  // namespace concurdl::nn
