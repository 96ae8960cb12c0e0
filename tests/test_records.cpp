// Records: schema round trip, loader errors that name the file and the field, atomic writes
// that survive a writer killed at any moment, run directories that are never reused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "concurdl/core/errors.hpp"
#include "concurdl/harness/records.hpp"

using namespace concurdl;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("concurdl-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

RunFile sample_run() {
  RunFile f;
  f.concurdl_version = "0.1.0";
  f.command = {"concurdl", "run", "ch01"};
  f.provenance = {{"host", "h"}, {"cores", 2}};
  f.calibration.mem_bandwidth_bytes_per_s = 1.2e10;
  f.calibration.peak_flops = 1.1e11;
  Record r;
  r.experiment = "ch01/parallel_sum";
  r.chapter = "01-threads";
  r.params = {{"variant", "v3_padded"},
              {"threads", "2"},
              {"n", "16777216"},
              {"ratio", "0.5"},
              {"tag", "007"}};
  r.samples = {0.0101, 0.0099, 0.0100};
  r.stats = summarize(r.samples);
  r.derived = {{"items_per_s", 1.7e9}, {"speedup", 1.96}};
  f.records.push_back(r);
  Record bad = r;
  bad.params["threads"] = "8";
  bad.valid = false;
  bad.validation = "before timing: sum 3 != 4";
  bad.notes = {{"direct", "unsupported (tmpfs): buffered reads measured"}};
  f.records.push_back(bad);
  return f;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

std::string load_error(const fs::path& p) {
  try {
    load_run(p);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Records, RoundTripKeepsEveryField) {
  const RunFile f = sample_run();
  const nlohmann::json j = to_json(f);
  // The documented field names (docs/results-schema.md).
  for (const char* k :
       {"schema_version", "concurdl_version", "command", "provenance", "calibration", "records"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"experiment", "chapter", "params", "metric", "unit", "samples", "median",
                        "min", "max", "mean", "stdev", "ci95", "derived", "valid"})
    EXPECT_TRUE(j["records"][0].contains(k)) << k;
  EXPECT_TRUE(j["records"][0]["params"]["threads"].is_number_integer());
  EXPECT_TRUE(j["records"][0]["params"]["tag"].is_string());  // "007" must stay "007"

  const RunFile g = run_from_json(nlohmann::json::parse(j.dump()), "mem");
  ASSERT_EQ(g.records.size(), 2u);
  EXPECT_EQ(g.records[0].params, f.records[0].params);
  EXPECT_EQ(g.records[0].samples, f.records[0].samples);
  EXPECT_DOUBLE_EQ(g.records[0].stats.median, f.records[0].stats.median);
  EXPECT_EQ(g.records[0].derived, f.records[0].derived);
  EXPECT_FALSE(g.records[1].valid);
  EXPECT_EQ(g.records[1].validation, f.records[1].validation);
  EXPECT_EQ(g.records[1].notes, f.records[1].notes);
  EXPECT_FALSE(j["records"][0].contains("notes")) << "notes are written only when there are some";
  EXPECT_EQ(g.command, f.command);
  EXPECT_DOUBLE_EQ(g.calibration.mem_bandwidth_bytes_per_s, 1.2e10);
  EXPECT_EQ(to_json(g).dump(), j.dump());
}

TEST(Records, LoaderNamesTheFileAndTheField) {
  const fs::path d = fresh_dir("loader");
  const std::string good = to_json(sample_run()).dump(2);

  write_text(d / "truncated.json", good.substr(0, good.size() / 2));
  std::string e = load_error(d / "truncated.json");
  EXPECT_NE(e.find("truncated.json"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;

  nlohmann::json foreign = nlohmann::json::parse(good);
  foreign["schema_version"] = 7;
  write_text(d / "foreign.json", foreign.dump());
  e = load_error(d / "foreign.json");
  EXPECT_NE(e.find("foreign.json"), std::string::npos) << e;
  EXPECT_NE(e.find("schema_version"), std::string::npos) << e;

  nlohmann::json badfield = nlohmann::json::parse(good);
  badfield["records"][1]["samples"][2] = "fast";
  write_text(d / "badfield.json", badfield.dump());
  e = load_error(d / "badfield.json");
  EXPECT_NE(e.find("records[1].samples[2]"), std::string::npos) << e;

  nlohmann::json badnote = nlohmann::json::parse(good);
  badnote["records"][1]["notes"]["direct"] = 3;
  write_text(d / "badnote.json", badnote.dump());
  e = load_error(d / "badnote.json");
  EXPECT_NE(e.find("records[1].notes.direct"), std::string::npos) << e;

  std::string huge = good;
  huge.replace(huge.find("0.0101"), 6, "1e400");  // parses as JSON, overflows a double
  write_text(d / "huge.json", huge);
  EXPECT_NE(load_error(d / "huge.json").find("huge.json"), std::string::npos);

  write_text(d / "notjson.json", "<html>");
  EXPECT_NE(load_error(d / "notjson.json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(load_error(d / "missing.json").find("missing.json"), std::string::npos);
  write_text(d / "array.json", "[1,2]");
  EXPECT_NE(load_error(d / "array.json").find("array.json"), std::string::npos);

  // Not a regular file: said for what it is, not read as an empty file (or waited on).
  fs::create_directories(d / "dir-run" / "results.json");
  EXPECT_EQ(load_error(d / "dir-run"),
            (d / "dir-run" / "results.json").string() + ": is a directory, not a results file");
  ASSERT_EQ(::mkfifo((d / "fifo.json").c_str(), 0600), 0);
  EXPECT_NE(load_error(d / "fifo.json").find("fifo.json: is a FIFO"), std::string::npos);
  EXPECT_NE(load_error("/dev/null").find("is a device"), std::string::npos);

  // A bad file never stops the others from loading.
  write_text(d / "good.json", good);
  std::vector<std::string> errors;
  const auto runs = load_runs({d / "truncated.json", d / "good.json", d / "foreign.json",
                               d / "huge.json", d / "missing.json"},
                              errors);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].path, d / "good.json");
  EXPECT_EQ(errors.size(), 4u);
  fs::remove_all(d);
}

TEST(Records, AtomicWriteReplacesWholeFiles) {
  const fs::path d = fresh_dir("atomic");
  write_file_atomic(d / "x.json", "first");
  write_file_atomic(d / "x.json", "second");
  std::ifstream in(d / "x.json");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(s, "second");
  EXPECT_THROW(write_file_atomic(d / "no-such-dir" / "x.json", "x"), std::runtime_error);
  fs::remove_all(d);
}

// A writer killed at random moments (while writing the temporary file, flushing, renaming)
// leaves the previous complete file or none: never a half-written one.
TEST(Records, WriterKilledMidWriteNeverLeavesHalfAFile) {
  const fs::path d = fresh_dir("killed");
  const fs::path target = d / "results.json";
  std::mt19937 rng(42);
  for (int round = 0; round < 12; ++round) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Each version is a JSON document of ~4 MB; after the first complete write the parent is
      // told, so every kill lands while a later version is being written.
      ::close(ready[0]);
      for (int v = 0;; ++v) {
        RunFile f = sample_run();
        f.provenance["padding"] = std::string(4u << 20, static_cast<char>('a' + v % 26));
        f.provenance["version"] = v;
        write_run(d, f);
        if (v == 0) {
          const char byte = 1;
          if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
        }
      }
    }
    ::close(ready[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the writer died before its first write";
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 120));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(fs::exists(target)) << "a complete file was written, then lost";
    const RunFile f = load_run(target);  // throws (and fails the test) on a half file
    EXPECT_EQ(f.provenance["padding"].get<std::string>().size(), 4u << 20);
  }
  // Leftover temporaries are allowed (the kill can land before the rename); they are dot-files.
  for (const auto& entry : fs::directory_iterator(d)) {
    if (entry.path().filename() != "results.json") {
      EXPECT_EQ(entry.path().filename().string().front(), '.') << entry.path();
    }
  }
  fs::remove_all(d);
}

TEST(Records, RunDirectoriesAreNeverReused) {
  const fs::path d = fresh_dir("rundirs");
  const fs::path a = make_run_dir(d, "host/with space", "abc1234");
  const fs::path b = make_run_dir(d, "host/with space", "abc1234");
  EXPECT_NE(a, b);
  EXPECT_TRUE(fs::is_directory(a));
  EXPECT_TRUE(fs::is_directory(b));
  EXPECT_EQ(a.filename().string().find('/'), std::string::npos);
  fs::remove_all(d);
}
