// Claims judged on records (claims.hpp): held, not held, not applicable, and why.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "concurdl/build_info.hpp"
#include "concurdl/harness/claims.hpp"

namespace {

using namespace concurdl;

Record rec(const std::string& variant, const std::string& threads, double median_s,
           bool valid = true) {
  Record r;
  r.experiment = "chX/sum";
  r.chapter = "98-claims";
  r.params = {{"variant", variant}, {"threads", threads}, {"n", "1M"}};
  r.samples = {median_s};
  r.stats.median = median_s;
  r.stats.n = 1;
  r.valid = valid;
  if (!valid) r.validation = "before timing: sum 3 != 2";
  return r;
}

Experiment experiment() {
  Experiment e;
  e.id = "chX/sum";
  e.chapter = "98-claims";
  e.axes = {{"variant", {"adjacent", "padded"}},
            {"threads", {"1", "2"}, {}, AxisKind::count},
            {"n", {"1M"}, {}, AxisKind::size}};
  return e;
}

RunFile run(std::vector<Record> records, int cores = 2, const std::string& profile = "quick") {
  RunFile f;
  f.provenance = {{"cores", cores}, {"profile", profile}, {"gpus", nlohmann::json::array()}};
  f.records = std::move(records);
  return f;
}

Claim padded_faster(double bound) {
  return {.id = "padded_faster",
          .statement = "padded beats adjacent at 2 threads",
          .select = {{"variant", "padded"}, {"threads", "2"}},
          .versus = {{"variant", "adjacent"}},
          .bound = bound,
          .unit = "×",
          .min_cpus = 2};
}

TEST(Claims, HeldWhenTheRatioReachesTheBound) {
  const RunFile f = run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010)});
  const ClaimResult r = evaluate_claim(experiment(), padded_faster(1.2), f);
  EXPECT_EQ(r.status, ClaimStatus::held);
  ASSERT_TRUE(r.value);
  EXPECT_NEAR(*r.value, 1.3, 1e-9);  // a time: peer / this
  EXPECT_NE(r.where.find("variant=padded"), std::string::npos);
  // No committed reference run measured this test's experiment.
  EXPECT_TRUE(std::isnan(r.reference));
  EXPECT_EQ(claim_outcome_text(r), "1.3× (at least 1.2×; reference not measured yet)");
  ClaimResult with_reference = r;
  with_reference.reference = 1.3;
  EXPECT_EQ(claim_outcome_text(with_reference), "1.3× (at least 1.2×; reference 1.3×)");
}

TEST(Claims, NotHeldBelowTheBoundOrOnAnInvalidRecord) {
  const ClaimResult below =
      evaluate_claim(experiment(), padded_faster(2.0),
                     run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010)}));
  EXPECT_EQ(below.status, ClaimStatus::not_held);
  const ClaimResult invalid =
      evaluate_claim(experiment(), padded_faster(1.0),
                     run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010, false)}));
  EXPECT_EQ(invalid.status, ClaimStatus::not_held);
  EXPECT_NE(invalid.reason.find("invalid"), std::string::npos) << invalid.reason;
  EXPECT_TRUE(any_failed({below}));
}

TEST(Claims, NotApplicableSaysWhy) {
  const RunFile both = run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010)});
  // Too few CPUs.
  ClaimResult r = evaluate_claim(experiment(), padded_faster(1.2),
                                 run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010)}, 1));
  EXPECT_EQ(r.status, ClaimStatus::not_applicable);
  EXPECT_EQ(r.reason, "needs 2 CPUs; this run had 1");
  // The smoke profile times nothing seriously.
  r = evaluate_claim(experiment(), padded_faster(1.2),
                     run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010)}, 2, "smoke"));
  EXPECT_EQ(r.status, ClaimStatus::not_applicable);
  EXPECT_NE(r.reason.find("smoke"), std::string::npos);
  // A GPU, a CPU feature.
  Claim gpu = padded_faster(1.2);
  gpu.needs_gpu = true;
  EXPECT_EQ(evaluate_claim(experiment(), gpu, both).reason, "needs a GPU; this run had none");
  Claim avx = padded_faster(1.2);
  avx.cpu_feature = "avx512f";
  EXPECT_NE(evaluate_claim(experiment(), avx, both).reason.find("avx512f"), std::string::npos);
  // Not measured: no record selected, or the peer missing.
  r = evaluate_claim(experiment(), padded_faster(1.2), run({rec("adjacent", "2", 0.013)}));
  EXPECT_EQ(r.status, ClaimStatus::not_applicable);
  EXPECT_NE(r.reason.find("not measured"), std::string::npos) << r.reason;
  r = evaluate_claim(experiment(), padded_faster(1.2), run({rec("padded", "2", 0.010)}));
  EXPECT_EQ(r.status, ClaimStatus::not_applicable);
  EXPECT_NE(r.reason.find("peer"), std::string::npos) << r.reason;
  EXPECT_FALSE(any_failed({r}));
}

TEST(Claims, TheWorstOfSeveralMatchingRecordsIsJudged) {
  // The claim leaves n free: it is about every size, and the worst decides.
  Record a1 = rec("adjacent", "2", 0.013), p1 = rec("padded", "2", 0.010);
  Record a2 = rec("adjacent", "2", 0.011), p2 = rec("padded", "2", 0.010);
  a2.params["n"] = p2.params["n"] = "4M";
  const ClaimResult r = evaluate_claim(experiment(), padded_faster(1.2), run({a1, p1, a2, p2}));
  EXPECT_EQ(r.status, ClaimStatus::not_held);
  EXPECT_NEAR(*r.value, 1.1, 1e-9);
  EXPECT_NE(r.where.find("n=4M"), std::string::npos) << r.where;
}

TEST(Claims, AFieldAndAnUpperBound) {
  Record p = rec("padded", "2", 0.010);
  p.derived["efficiency"] = 0.4;
  const Claim at_most{.id = "inefficient",
                      .statement = "efficiency stays below half",
                      .select = {{"variant", "padded"}},
                      .field = "efficiency",
                      .compare = Claim::Compare::at_most,
                      .bound = 0.5,
                      .timing = false};
  ClaimResult r = evaluate_claim(experiment(), at_most, run({p}, 1, "smoke"));
  EXPECT_EQ(r.status, ClaimStatus::held);  // does not depend on speed: judged on smoke too
  EXPECT_EQ(r.expected, "at most 0.5");
  p.derived["efficiency"] = 0.6;
  r = evaluate_claim(experiment(), at_most, run({p}));
  EXPECT_EQ(r.status, ClaimStatus::not_held);
}

// Flags work both ways: a law about speed on noisy records is not judged, whether its value
// passed or failed; a count (timing false) is judged all the same.
TEST(Claims, FlagsOfTheRecordsTravelWithTheClaim) {
  Record a = rec("adjacent", "2", 0.013), p = rec("padded", "2", 0.010);
  a.notes["noisy"] = "other processes used 0.98 CPUs";
  ClaimResult r = evaluate_claim(experiment(), padded_faster(1.2), run({a, p}));
  EXPECT_EQ(r.status, ClaimStatus::not_judged);
  EXPECT_NE(r.reason.find("it would have held"), std::string::npos) << r.reason;
  ASSERT_EQ(r.flags.size(), 1u);
  EXPECT_EQ(r.flags[0], "noisy");
  EXPECT_FALSE(any_failed({r}));
  std::string text = claims_text({r});
  EXPECT_NE(text.find("NOISY"), std::string::npos) << text;
  EXPECT_NE(text.find("0 held, 0 not held, 0 not applicable; 1 not judged (disturbed records)\n"),
            std::string::npos)
      << text;
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("status"), "not judged");
  EXPECT_EQ(j.at("flags")[0], "noisy");
  // Failing on the same records is not judged either.
  r = evaluate_claim(experiment(), padded_faster(2.0), run({a, p}));
  EXPECT_EQ(r.status, ClaimStatus::not_judged);
  EXPECT_NE(r.reason.find("it would have failed"), std::string::npos) << r.reason;
  // A count does not depend on speed: judged on the same records.
  Claim count = padded_faster(1.2);
  count.timing = false;
  r = evaluate_claim(experiment(), count, run({a, p}));
  EXPECT_EQ(r.status, ClaimStatus::held);
  EXPECT_EQ(r.flags.size(), 1u);
}

// A law with a positive control is judged only where the control shows the effect can be seen
// in the same run; without the control's records it does not apply.
TEST(Claims, ALawWithAPositiveControlIsJudgedOnlyWhereTheControlShowsTheEffect) {
  Claim c = padded_faster(1.2);
  c.timing = false;
  c.control = Claim::Control{.select = {{"variant", "adjacent"}, {"threads", "1"}},
                             .bound = 0.005,
                             .shows = "adjacent at one thread takes 5 ms"};
  const Record a = rec("adjacent", "2", 0.013), p = rec("padded", "2", 0.010);
  ClaimResult r = evaluate_claim(experiment(), c, run({a, p, rec("adjacent", "1", 0.006)}));
  EXPECT_EQ(r.status, ClaimStatus::held) << r.reason;
  ASSERT_TRUE(r.control_value);
  EXPECT_DOUBLE_EQ(*r.control_value, 0.006);
  EXPECT_NE(claims_text({r}).find("positive control 0.006"), std::string::npos);
  r = evaluate_claim(experiment(), c, run({a, p, rec("adjacent", "1", 0.001)}));
  EXPECT_EQ(r.status, ClaimStatus::not_judged);
  EXPECT_NE(r.reason.find("positive control did not show the effect"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("it would have held"), std::string::npos) << r.reason;
  EXPECT_FALSE(any_failed({r}));
  // Counted apart from disturbed records.
  EXPECT_TRUE(r.control_failed);
  EXPECT_NE(claims_counts({r}).find("1 not judged (control did not show the effect)"),
            std::string::npos)
      << claims_counts({r});
  r = evaluate_claim(experiment(), c, run({a, p}));
  EXPECT_EQ(r.status, ClaimStatus::not_applicable);
  EXPECT_NE(r.reason.find("was not measured"), std::string::npos) << r.reason;
}

// A count held to its model from both sides: a defect either way (a skipped gather, a buffer
// not counted) fails it, and a count of 0 is a count, not a missing value.
TEST(Claims, ACountWithinItsModelFailsOnEitherSideAndAtZero) {
  Claim c = padded_faster(1.3);
  c.compare = Claim::Compare::within;
  c.tolerance = 0.01;
  c.timing = false;
  const Record a = rec("adjacent", "2", 0.013);
  EXPECT_EQ(claim_expected_text(c), "1.3× ± 0.01");
  EXPECT_EQ(evaluate_claim(experiment(), c, run({a, rec("padded", "2", 0.010)})).status,
            ClaimStatus::held);
  EXPECT_EQ(evaluate_claim(experiment(), c, run({a, rec("padded", "2", 0.0095)})).status,
            ClaimStatus::not_held);  // 1.37x: more than the model
  EXPECT_EQ(evaluate_claim(experiment(), c, run({a, rec("padded", "2", 0.0105)})).status,
            ClaimStatus::not_held);  // 1.24x: less than the model
  // Lower is better: a padded count of 0 leaves the ratio without a value, which fails.
  ClaimResult r = evaluate_claim(experiment(), c, run({a, rec("padded", "2", 0.0)}));
  EXPECT_EQ(r.status, ClaimStatus::not_held) << r.reason;
  EXPECT_NE(r.reason.find("is 0"), std::string::npos) << r.reason;
  // An adjacent count of 0 is a ratio of 0, judged and failed.
  r = evaluate_claim(experiment(), c, run({rec("adjacent", "2", 0.0), rec("padded", "2", 0.01)}));
  EXPECT_EQ(r.status, ClaimStatus::not_held) << r.reason;
  ASSERT_TRUE(r.value);
  EXPECT_EQ(*r.value, 0.0);
  c.tolerance = 0;
  EXPECT_EQ(claim_expected_text(c), "exactly 1.3×");
}

// A record timed while the CPUs were not a core each (the cores probe's note) flags the claim,
// and a law that fails on it says to look at the cores first.
TEST(Claims, ACoresShortRecordPointsAtTheCores) {
  Record a = rec("adjacent", "2", 0.010), p = rec("padded", "2", 0.010);
  p.notes["cores_short"] = "2 threads ran the FMA probe at 1.02x one thread's rate";
  Claim c = padded_faster(1.2);
  c.causes = {ClaimCause::caches, ClaimCause::cores_and_smt};
  const ClaimResult r = evaluate_claim(experiment(), c, run({a, p}));
  EXPECT_EQ(r.status, ClaimStatus::not_judged);
  EXPECT_NE(r.reason.find("cores_short"), std::string::npos) << r.reason;
  ASSERT_EQ(r.flags.size(), 1u);
  EXPECT_EQ(r.flags[0], "cores_short");
  ASSERT_FALSE(r.causes.empty());
  EXPECT_EQ(r.causes[0], ClaimCause::cores_and_smt);
  EXPECT_EQ(r.causes.size(), 2u);  // moved to the front, not added twice
  const std::string text = claims_text({r});
  EXPECT_NE(text.find("CORES SHORT"), std::string::npos) << text;
  EXPECT_NE(claim_causes_text(r).find("cores and SMT"), std::string::npos);
}

// A magnitude is reported beside the reference machine's value with what it depends on, never
// held or failed; a law that fails says where to look.
TEST(Claims, AMagnitudeIsReportedAndNeverFails) {
  Claim c = padded_faster(0);
  c.kind = Claim::Kind::magnitude;
  c.causes = {ClaimCause::caches, ClaimCause::cores_and_smt};
  ClaimResult r = evaluate_claim(experiment(), c,
                                 run({rec("adjacent", "2", 0.011), rec("padded", "2", 0.010)}));
  r.reference = 1.3;  // as if a reference run had measured it
  EXPECT_EQ(r.status, ClaimStatus::reported);
  ASSERT_TRUE(r.value);
  EXPECT_NEAR(*r.value, 1.1, 1e-9);
  EXPECT_FALSE(any_failed({r}));
  EXPECT_EQ(claim_outcome_text(r), "1.1× (reference machine 1.3×)");
  EXPECT_EQ(claim_causes_text(r), "depends on: caches, cores_and_smt");
  const std::string text = claims_text({r});
  EXPECT_NE(text.find("value     chX/sum"), std::string::npos) << text;
  EXPECT_NE(text.find("0 held, 0 not held, 0 not applicable; 1 magnitude reported"),
            std::string::npos)
      << text;
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("status"), "reported");
  EXPECT_EQ(j.at("kind"), "magnitude");
  EXPECT_EQ(j.at("causes")[1], "cores_and_smt");
}

TEST(Claims, ALawThatFailsSaysWhereToLookAndNoiseComesFirst) {
  Claim c = padded_faster(2.0);
  c.causes = {ClaimCause::caches};
  Record a = rec("adjacent", "2", 0.013), p = rec("padded", "2", 0.010);
  ClaimResult r = evaluate_claim(experiment(), c, run({a, p}));
  ASSERT_EQ(r.status, ClaimStatus::not_held);
  EXPECT_EQ(claim_causes_text(r), std::string("where to look: ") + cause_text(ClaimCause::caches));
  a.notes["noisy"] = "other processes used 0.98 CPUs";
  r = evaluate_claim(experiment(), c, run({a, p}));
  ASSERT_EQ(r.status, ClaimStatus::not_judged);
  ASSERT_EQ(r.causes.size(), 2u);
  EXPECT_EQ(r.causes[0], ClaimCause::noise);
  EXPECT_NE(claims_text({r}).find("where to look: noise:"), std::string::npos);
  // Held, a law says nothing of causes.
  r = evaluate_claim(experiment(), padded_faster(1.2),
                     run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010)}));
  ASSERT_EQ(r.status, ClaimStatus::held);
  EXPECT_EQ(claim_causes_text(r), "");
}

// A run is quiet unless it started beside other work or more than a tenth of its records were.
TEST(Claims, WhyNotQuietIsInProportion) {
  std::vector<Record> records;
  for (int i = 0; i < 20; ++i) records.push_back(rec("padded", "2", 0.01));
  RunFile f = run(records);
  EXPECT_EQ(why_not_quiet(f), "");
  f.records[0].notes["noisy"] = "busy";
  EXPECT_EQ(why_not_quiet(f), "") << "one record in twenty is a moment's disturbance";
  for (int i = 1; i < 5; ++i) f.records[static_cast<std::size_t>(i)].notes["noisy"] = "busy";
  EXPECT_EQ(why_not_quiet(f), "5 of its 20 records noted noisy");
  RunFile g = run(records);
  g.provenance["activity_before_run"] = {{"other_processes_cpus", 0.9}, {"steal_cpus", 0.0}};
  EXPECT_NE(why_not_quiet(g).find("0.90 CPUs"), std::string::npos);
}

// The claims x machines table: one column per machine, a law's count and range, a magnitude's
// range; a law failed on noisy records is counted apart.
TEST(Claims, ClaimsByMachineGroupsRunsAndCountsHeld) {
  RunFile a = run({rec("adjacent", "2", 0.013), rec("padded", "2", 0.010)});
  RunFile b = run({rec("adjacent", "2", 0.012), rec("padded", "2", 0.010)});
  RunFile c = run({rec("adjacent", "2", 0.010), rec("padded", "2", 0.010)});
  a.provenance["cpu"] =
      b.provenance["cpu"] = {{"family", 26}, {"model", 2}, {"microarchitecture", "Zen 5"}};
  c.provenance["cpu"] = {{"family", 6}, {"model", 207}, {"microarchitecture", "Emerald Rapids"}};
  const std::vector<RunFile> runs = {a, b, c};
  const std::vector<MachineRuns> machines = group_by_machine(runs);
  ASSERT_EQ(machines.size(), 2u);
  EXPECT_EQ(machines[0].label, "Zen 5, 2 CPUs");
  EXPECT_EQ(machines[0].runs.size(), 2u);
  EXPECT_EQ(machines[1].label, "Emerald Rapids, 2 CPUs");
  // claims_by_machine_markdown lists registered experiments' claims: the selftest's are not
  // linked here, so no machine's runs measured one, and a machine that measured none has no
  // column (the cells are checked through the same evaluate_claim).
  const std::string table = claims_by_machine_markdown(machines);
  EXPECT_EQ(table, "| claim | kind |\n|---|---|\n") << table;
}

// The reference manifest: roles and paths, read from a file; a bad line is an error naming it.
TEST(ReferenceManifest, ParsesRolesAndRefusesBadLines) {
  const ReferenceManifest m = parse_reference_manifest(
      "# comment\nlessons a/all\nclaims a/all  # the sitting\nclaims b/zero\ngpu g/ch04\n"
      "repeats z/repeats\n");
  EXPECT_EQ(m.lessons, "a/all");
  EXPECT_EQ(m.claims, (std::vector<std::string>{"a/all", "b/zero"}));
  EXPECT_EQ(m.gpu, "g/ch04");
  EXPECT_EQ(m.repeats, "z/repeats");
  const auto error = [](const char* text) {
    try {
      parse_reference_manifest(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("lessons a\nclaims a\nmachine x\n").find("line 3: unknown role 'machine'"),
            std::string::npos);
  EXPECT_NE(error("lessons a b\n").find("line 1"), std::string::npos);
  EXPECT_NE(error("lessons a\nlessons b\nclaims a\n").find("a second 'lessons'"),
            std::string::npos);
  EXPECT_NE(error("lessons ../a\nclaims a\n").find("not a path under"), std::string::npos);
  EXPECT_NE(error("claims a\n").find("needs a 'lessons' line"), std::string::npos);
  EXPECT_EQ(parse_reference_manifest("lessons a\nclaims a\nfrozen 2026-11-28T20:00:00Z\n").frozen,
            "2026-11-28T20:00:00Z");
  // A run started after the bounds were frozen is held out; one before, or undated, is not.
  RunFile r;
  r.provenance = {{"started", "2026-12-01T10:00:00Z"}};
  EXPECT_TRUE(held_out(r, "2026-11-28T20:00:00Z"));
  r.provenance = {{"started", "2026-11-28T18:29:14Z"}};
  EXPECT_FALSE(held_out(r, "2026-11-28T20:00:00Z"));
  EXPECT_FALSE(held_out(RunFile{}, "2026-11-28T20:00:00Z"));
  EXPECT_FALSE(held_out(r, ""));
  // The committed manifest reads, and names runs that exist.
  const ReferenceManifest& committed = reference_manifest();
  EXPECT_FALSE(committed.claims.empty());
  for (const std::string& name : committed.claims)
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(build::source_dir) / "results" /
                                        "reference" / name / "results.json"))
        << name;
}

}  // namespace
