// Pipeline-parallel training (pipeline_trainer.hpp) and its timeline (harness trace.hpp):
//  - P stages and M micro-batches end two epochs at the parameters one process reaches with
//    whole-batch steps (= gradient accumulation over the same micro-batches), every schedule;
//  - a checkpoint resumes to the uninterrupted run, and refuses another stage count;
//  - a traced GPipe step is valid Chrome trace JSON whose spans nest, and each stage's traced
//    busy time is the step's measured busy time; its Gantt chart is drawn.
//   ch06_tests --gtest_filter='PipelineTrain*:PipelineTrace*'
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/dp/threads_backend.hpp"
#include "concurdl/harness/gantt.hpp"
#include "concurdl/harness/trace_files.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/nn/trainer.hpp"
#include "counted_figures.hpp"

namespace {

using namespace concurdl::mp;
using concurdl::testing::within_seconds;
namespace dp = concurdl::dp;
namespace nn = concurdl::nn;
namespace trace = concurdl::trace;
namespace fs = std::filesystem;

constexpr int kDeadline = 120;

// 57 rows of 6 features in 5 classes: batches of 10 end with a short one of 7.
nn::Dataset toy_data() { return nn::linear_problem(57, 6, 5, 11); }

nn::TrainConfig toy_config() {
  nn::TrainConfig c;
  c.spec = nn::MlpSpec{{6, 12, 10, 9, 8, 5}};  // 5 layers
  c.batch = 10;
  c.seed = 3;
  c.threads = 1;
  c.gemm = concurdl::kernels::GemmVersion::v2_ikj;
  return c;
}

void expect_close(const std::vector<float>& got, std::span<const float> want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
        << what << ": parameter " << i;
}

class PipelineTrain : public ::testing::TestWithParam<std::tuple<Schedule, int>> {
 protected:
  void SetUp() override { concurdl::kernels::set_compute_threads(1); }
};

TEST_P(PipelineTrain, EndsWhereOneProcessEndsWithGradientAccumulation) {
  const Schedule schedule = std::get<0>(GetParam());
  const int stages = std::get<1>(GetParam());
  const nn::Dataset data = toy_data();
  nn::Trainer one(toy_config(), data);
  one.run_epoch();
  one.run_epoch();
  for (std::size_t m : {1, 3, 10}) {
    within_seconds(kDeadline, [&] {
      PipelineTrainer t(toy_config(), data,
                        {.stages = stages, .batching = {.micro_batches = m, .schedule = schedule}});
      nn::EpochResult r;
      for (int e = 0; e < 2; ++e) r = t.run_epoch({}, 0);
      expect_close(t.parameters(), one.model().parameters(),
                   std::string(schedule_name(schedule)) + " p=" + std::to_string(stages) +
                       " m=" + std::to_string(m));
      EXPECT_EQ(t.state().step, one.state().step);
      EXPECT_EQ(t.state().epoch, 2u);
      EXPECT_EQ(r.samples, data.n);
      const auto metrics = t.epoch_metrics();
      EXPECT_GE(metrics.at("bubble_fraction"), -0.05);
      EXPECT_LE(metrics.at("bubble_fraction"), 1.0);
      EXPECT_EQ(
          metrics.at("peak_activations"),
          static_cast<double>(schedule == Schedule::gpipe ? m
                              : schedule == Schedule::naive
                                  ? 1
                                  : std::min<std::size_t>(m, static_cast<std::size_t>(stages))));
      // Evaluation sees the stages' layers put together.
      const nn::EvalResult got = t.evaluate(data);
      const nn::EvalResult want = one.evaluate(data);
      EXPECT_NEAR(got.loss, want.loss, 1e-4);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(All, PipelineTrain,
                         ::testing::Combine(::testing::Values(Schedule::naive, Schedule::gpipe,
                                                              Schedule::one_f_one_b,
                                                              Schedule::zb_h1),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           std::string n(schedule_name(std::get<0>(info.param)));
                           if (n == "zb-h1") n = "zb_h1";
                           return n + "_p" + std::to_string(std::get<1>(info.param));
                         });

// Interleaved, 2 stages x 2 chunks of the 5-layer model: two epochs end where one process
// ends, at m a multiple of p, at m = 3 (every forward first) and through the short last batch;
// a checkpoint of it resumes into a trainer that goes on to the same parameters.
TEST(PipelineTrainInterleaved, EndsWhereOneProcessEndsAndResumes) {
  concurdl::kernels::set_compute_threads(1);
  const nn::Dataset data = toy_data();
  nn::Trainer one(toy_config(), data);
  one.run_epoch();
  one.run_epoch();
  for (const std::size_t m : {2, 3, 4}) {
    within_seconds(kDeadline, [&] {
      PipelineTrainer t(toy_config(), data,
                        {.stages = 2,
                         .batching = {.micro_batches = m, .schedule = Schedule::interleaved},
                         .chunks = 2});
      for (int e = 0; e < 2; ++e) t.run_epoch({}, 0);
      expect_close(t.parameters(), one.model().parameters(), "interleaved m=" + std::to_string(m));
      EXPECT_NE(t.describe().find("2 chunks a stage"), std::string::npos) << t.describe();
    });
  }
  const fs::path ck = fs::temp_directory_path() / "concurdl_interleaved_ck.bin";
  within_seconds(kDeadline, [&] {
    PipelineTrainer first(toy_config(), data,
                          {.stages = 2,
                           .batching = {.micro_batches = 4, .schedule = Schedule::interleaved},
                           .chunks = 2});
    first.run_epoch({}, 0);
    first.save(ck);
    PipelineTrainer second(toy_config(), data,
                           {.stages = 2,
                            .batching = {.micro_batches = 4, .schedule = Schedule::interleaved},
                            .chunks = 2});
    second.resume(ck);
    second.run_epoch({}, 0);
    expect_close(second.parameters(), one.model().parameters(), "interleaved, resumed");
  });
  fs::remove(ck);
  EXPECT_THROW(PipelineTrainer(toy_config(), data,
                               {.stages = 2,
                                .batching = {.micro_batches = 4, .schedule = Schedule::one_f_one_b},
                                .chunks = 2}),
               std::invalid_argument);
  EXPECT_THROW(PipelineTrainer(toy_config(), data,
                               {.stages = 3,
                                .batching = {.micro_batches = 4, .schedule = Schedule::interleaved},
                                .chunks = 2}),
               std::invalid_argument);  // 6 pieces of 5 layers
}

TEST(PipelineTrainCheckpoint, ResumesToTheUninterruptedRunAndRefusesAnotherStageCount) {
  concurdl::kernels::set_compute_threads(1);
  const nn::Dataset data = toy_data();
  const fs::path dir = fs::temp_directory_path() / "concurdl_ch06_ckpt";
  fs::create_directories(dir);
  const fs::path ck = dir / "p2.ckpt";
  within_seconds(kDeadline, [&] {
    PipelineTrainer whole(
        toy_config(), data,
        {.stages = 2, .batching = {.micro_batches = 4, .schedule = Schedule::one_f_one_b}});
    whole.run_epoch({}, 0);
    whole.run_epoch({}, 0);
    PipelineTrainer first(
        toy_config(), data,
        {.stages = 2, .batching = {.micro_batches = 4, .schedule = Schedule::one_f_one_b}});
    first.run_epoch({}, 0);
    first.save(ck);
    // Another schedule and micro-batch count may resume it: the arithmetic is the same.
    PipelineTrainer second(
        toy_config(), data,
        {.stages = 2, .batching = {.micro_batches = 2, .schedule = Schedule::gpipe}});
    second.resume(ck);
    EXPECT_EQ(second.state().epoch, 1u);
    second.run_epoch({}, 0);
    expect_close(second.parameters(), whole.parameters(), "resumed");
    PipelineTrainer three(
        toy_config(), data,
        {.stages = 3, .batching = {.micro_batches = 4, .schedule = Schedule::one_f_one_b}});
    const std::vector<float> before = three.parameters();
    EXPECT_THROW(three.resume(ck), nn::CheckpointError);
    EXPECT_EQ(three.parameters(), before);
  });
  fs::remove_all(dir);
}

using concurdl::mp::testing::counted;

// One stage a rank (the trainer `--backend mpi` runs, here over the threads backend's ranks):
// two epochs of every kind of schedule take the steps the trainer that drives every stage takes
// (the same parameters, bit for bit, the same loss and the same counted memory), the writer
// alone puts the model together and evaluates it, and a checkpoint it writes after the first
// epoch resumes on every rank to the same end.
TEST(PipelineTrainRanks, OneStageARankTakesTheStepsOfTheThreadedStages) {
  concurdl::kernels::set_compute_threads(1);
  const nn::Dataset data = toy_data();
  const fs::path ck = fs::temp_directory_path() / "concurdl_pipeline_ranks.ckpt";
  struct Case {
    Schedule schedule;
    int stages, chunks;
  };
  for (const Case& k : {Case{Schedule::gpipe, 3, 1}, Case{Schedule::one_f_one_b, 3, 1},
                        Case{Schedule::zb_h1, 2, 1}, Case{Schedule::interleaved, 2, 2}}) {
    const Schedule schedule = k.schedule;
    const int stages = k.stages;  // a variable, not a binding: lambdas capture it (clang 14)
    const PipelineOptions o{.stages = stages,
                            .batching = {.micro_batches = 4, .schedule = schedule},
                            .chunks = k.chunks};
    const std::string what(schedule_name(schedule));
    within_seconds(kDeadline, [&] {
      PipelineTrainer whole(toy_config(), data, o);
      const nn::EvalResult initial = whole.evaluate(data);
      nn::EpochResult want;
      for (int e = 0; e < 2; ++e) want = whole.run_epoch({}, 0);
      const std::vector<float> want_params = whole.parameters();
      std::vector<float> got_params, resumed_params;
      nn::EpochResult got;
      std::map<std::string, double> got_metrics;
      nn::EvalResult got_initial, got_final;
      std::vector<double> losses(static_cast<std::size_t>(stages));  // each rank's epoch loss
      dp::run_threads(stages, [&](dp::Communicator& comm) {
        PipelineTrainer t(comm, toy_config(), data, o);
        EXPECT_EQ(t.rank(), comm.rank());
        EXPECT_EQ(t.size(), stages);
        if (t.writer()) got_initial = t.evaluate(data);
        std::size_t reports = 0;
        const nn::EpochResult r1 = t.run_epoch([&](const nn::StepProgress&) { ++reports; }, 2);
        EXPECT_EQ(reports, 3u) << "every rank hears of steps 2, 4 and the last (6)";
        if (t.writer()) t.save(ck);
        comm.barrier();
        const nn::EpochResult r2 = t.run_epoch({}, 0);
        (void)r1;
        losses[static_cast<std::size_t>(comm.rank())] = r2.loss;
        if (t.writer()) {
          got = r2;
          got_params = t.parameters();
          got_metrics = t.epoch_metrics();
          got_final = t.evaluate(data);
        } else {
          EXPECT_THROW((void)t.evaluate(data), std::logic_error);
          EXPECT_THROW((void)t.parameters(), std::logic_error);
        }
        PipelineTrainer again(comm, toy_config(), data, o);
        again.resume(ck);
        EXPECT_EQ(again.state().epoch, 1u);
        again.run_epoch({}, 0);
        if (again.writer()) resumed_params = again.parameters();
      });
      EXPECT_EQ(got_params, want_params) << what;
      EXPECT_EQ(resumed_params, want_params) << what << ", resumed";
      EXPECT_EQ(got.loss, want.loss) << what;
      for (const double l : losses) EXPECT_EQ(l, want.loss) << what << ": every rank's result";
      EXPECT_EQ(got.accuracy, want.accuracy) << what;
      EXPECT_EQ(got_initial.loss, initial.loss) << what;
      EXPECT_EQ(got_final.loss, whole.evaluate(data).loss) << what;
      const auto want_counted = counted(whole.epoch_metrics());
      EXPECT_EQ(counted(got_metrics), want_counted) << what;
      EXPECT_GT(want_counted.at("stage_parameters_peak_bytes"), 0) << what;
      // The witness: one process's figures in one key, or each stage's in its own.
      if (whole.epoch_metrics().contains("resident_peak_bytes")) {
        for (int s = 0; s < stages; ++s)
          EXPECT_GT(got_metrics.at("stage" + std::to_string(s) + "_resident_peak_bytes"), 0);
      }
    });
  }
  fs::remove(ck);
  dp::run_threads(2, [&](dp::Communicator& comm) {
    EXPECT_THROW(
        PipelineTrainer(comm, toy_config(), data, {.stages = 3, .batching = {.micro_batches = 4}}),
        std::invalid_argument);
  });
}

TEST(PipelineTrainOptions, BadStageAndMicroBatchCountsAreRefused) {
  const nn::Dataset data = toy_data();
  EXPECT_THROW(
      PipelineTrainer(toy_config(), data,
                      {.stages = 6, .batching = {.micro_batches = 4, .schedule = Schedule::gpipe}}),
      std::invalid_argument);
  EXPECT_THROW(
      PipelineTrainer(toy_config(), data,
                      {.stages = 0, .batching = {.micro_batches = 4, .schedule = Schedule::gpipe}}),
      std::invalid_argument);
  EXPECT_THROW(PipelineTrainer(
                   toy_config(), data,
                   {.stages = 2, .batching = {.micro_batches = 11, .schedule = Schedule::gpipe}}),
               std::invalid_argument);
  EXPECT_THROW(
      PipelineTrainer(toy_config(), data,
                      {.stages = 2, .batching = {.micro_batches = 0, .schedule = Schedule::gpipe}}),
      std::invalid_argument);
  EXPECT_EQ(parse_schedule("1f1b"), Schedule::one_f_one_b);
  EXPECT_EQ(parse_schedule("gpipe"), Schedule::gpipe);
  EXPECT_FALSE(parse_schedule("zigzag"));
}

TEST(PipelineTrace, OffRecordsNothing) {
  trace::Recorder& rec = trace::Recorder::global();
  ASSERT_FALSE(rec.on());
  { trace::Span s("x", "y"); }
  rec.start();
  const std::vector<trace::Event> none = rec.stop();
  EXPECT_TRUE(none.empty());
  { trace::Span s("after stop", "y"); }
  rec.start();
  EXPECT_TRUE(rec.stop().empty());
}

// One traced GPipe step, p = 2, m = 4, on a model big enough that compute dominates.
TEST(PipelineTrace, AGPipeStepIsValidJsonWhoseSpansNestAndAddUpToTheStagesBusyTime) {
  concurdl::kernels::set_compute_threads(1);
  const nn::MlpSpec spec{{64, 96, 96, 96, 10}};
  constexpr std::size_t rows = 64, m = 4;
  std::vector<float> x(rows * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  std::vector<std::uint8_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::uint8_t>(i % 10);
  const std::vector<std::size_t> bounds = stage_boundaries(4, 2);
  std::vector<PipelineStepResult> results(2);
  std::vector<double> around(2);  // seconds, read by the test around each stage's pipeline_step
  trace::Recorder& rec = trace::Recorder::global();
  rec.start();
  within_seconds(kDeadline, [&] {
    dp::run_threads(2, [&](dp::Communicator& comm) {
      trace::set_track("stage " + std::to_string(comm.rank()));
      nn::Mlp model(spec, 1, concurdl::kernels::GemmVersion::v2_ikj);
      const auto t0 = std::chrono::steady_clock::now();
      results[static_cast<std::size_t>(comm.rank())] =
          pipeline_step(comm, model, bounds, x.data(), labels.data(), rows, m, Schedule::gpipe);
      around[static_cast<std::size_t>(comm.rank())] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  });
  const std::vector<trace::Event> events = rec.stop();
  const fs::path dir = fs::temp_directory_path() / "concurdl_ch06_trace";
  fs::remove_all(dir);
  trace::write_chrome_trace(dir / "gpipe.json", events, {{"what", "one GPipe step"}});

  // Valid JSON in Chrome's trace form, read without the writer's help.
  std::ifstream in(dir / "gpipe.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_TRUE(doc.at("traceEvents").is_array());
  std::size_t complete = 0;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++complete;
    EXPECT_TRUE(e.at("ts").is_number());
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
  }
  // Per stage: one step span, and m forwards and m backwards inside it.
  EXPECT_EQ(complete, 2 * (1 + 2 * m));
  const std::vector<trace::Event> back = trace::read_chrome_trace(dir / "gpipe.json");
  ASSERT_EQ(back.size(), events.size());

  for (int s = 0; s < 2; ++s) {
    const std::string track = "stage " + std::to_string(s);
    const trace::Event* step = nullptr;
    std::vector<const trace::Event*> inner;
    for (const trace::Event& e : back) {
      if (e.track != track) continue;
      if (e.name == "step")
        step = &e;
      else
        inner.push_back(&e);
    }
    ASSERT_NE(step, nullptr) << track;
    ASSERT_EQ(inner.size(), 2 * m) << track;
    // Nesting: every F and B lies inside the step, and none overlaps another.
    double end_prev = step->begin_us;
    for (const trace::Event* e : inner) {
      EXPECT_GE(e->begin_us, step->begin_us) << track << " " << e->name;
      EXPECT_LE(e->begin_us + e->dur_us, step->begin_us + step->dur_us + 1.0)
          << track << " " << e->name;
      EXPECT_GE(e->begin_us + 0.5, end_prev) << track << " " << e->name << " overlaps";
      end_prev = e->begin_us + e->dur_us;
    }
    // The traced busy time is the measured one, and the step span the measured step. A span and
    // its stopwatch are separate clock reads, so a thread preempted between them (a loaded
    // machine, a sanitizer) puts them milliseconds apart: the exact checks are the one-sided
    // ones, what each span must enclose and lie within; the two-sided ones allow a few ms.
    const double busy = trace::busy_seconds(events, 1, {"forward", "backward"}).at(track);
    const PipelineStepResult& r = results[static_cast<std::size_t>(s)];
    const double step_dur = step->dur_us * 1e-6;
    const double first_to_last =
        (inner.back()->begin_us + inner.back()->dur_us - inner.front()->begin_us) * 1e-6;
    constexpr double kClockReads = 5e-3, kRounding = 1e-9;
    // Each F or B span opens before its stopwatch starts and closes after it stops.
    EXPECT_GE(busy + kRounding, r.busy_seconds) << track;
    EXPECT_NEAR(busy, r.busy_seconds, 0.02 * r.busy_seconds + kClockReads) << track;
    // The step's stopwatch and its span both start before the first F and end after the last B,
    // and both lie within the test's own reads around pipeline_step.
    EXPECT_GE(r.step_seconds + kRounding, first_to_last) << track;
    EXPECT_LE(r.step_seconds, around[static_cast<std::size_t>(s)] + kRounding) << track;
    EXPECT_LE(step_dur, around[static_cast<std::size_t>(s)] + kRounding) << track;
    EXPECT_NEAR(step_dur, r.step_seconds, 0.02 * r.step_seconds + kClockReads) << track;
    EXPECT_LE(busy, r.step_seconds) << track;
  }

  std::string warning;
  trace::render_gantt(events, dir, "gpipe_gantt", "GPipe, p = 2, m = 4", warning, 1);
  EXPECT_TRUE(fs::exists(dir / "gpipe_gantt.dat"));
  EXPECT_TRUE(fs::exists(dir / "gpipe_gantt.gp"));
  if (warning.find("gnuplot not found") == std::string::npos) {
    EXPECT_TRUE(warning.empty()) << warning;
    EXPECT_TRUE(fs::exists(dir / "gpipe_gantt.svg"));
  }
  fs::remove_all(dir);
}

// The recorder under load: at 1, 2, 4 and 8 threads, every span of every thread is kept, on its
// thread's track, nested where it was opened; past the cap the rest are counted, not kept.
TEST(PipelineTrace, EverySpanOfEveryThreadIsKeptAndTheCapCounts) {
  trace::Recorder& rec = trace::Recorder::global();
  constexpr int kSpans = 2000;
  for (int threads : {1, 2, 4, 8}) {
    rec.start();
    within_seconds(kDeadline, [&] {
      std::vector<std::jthread> team;
      for (int t = 0; t < threads; ++t)
        team.emplace_back([t] {
          trace::set_track("worker " + std::to_string(t));
          for (int i = 0; i < kSpans; ++i) {
            trace::Span outer("outer", "a");
            trace::Span inner("inner", "b");
          }
        });
    });
    const std::vector<trace::Event> events = rec.stop();
    EXPECT_EQ(rec.dropped(), 0u);
    ASSERT_EQ(events.size(), static_cast<std::size_t>(2 * kSpans * threads)) << threads;
    std::map<std::string, std::size_t> outer, inner;
    for (const trace::Event& e : events) (e.depth == 0 ? outer : inner)[e.track] += 1;
    for (int t = 0; t < threads; ++t) {
      EXPECT_EQ(outer["worker " + std::to_string(t)], static_cast<std::size_t>(kSpans));
      EXPECT_EQ(inner["worker " + std::to_string(t)], static_cast<std::size_t>(kSpans));
    }
  }
  rec.start();
  for (std::size_t i = 0; i < trace::kMaxEvents + 10; ++i) trace::Span s("x", "y");
  EXPECT_EQ(rec.stop().size(), trace::kMaxEvents);
  EXPECT_EQ(rec.dropped(), 10u);
}

TEST(PipelineTrace, ABadTraceFileIsNamed) {
  const fs::path p = fs::temp_directory_path() / "concurdl_ch06_bad_trace.json";
  std::ofstream(p) << "{\"traceEvents\": [ {\"ph\": \"X\"";
  try {
    trace::read_chrome_trace(p);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  }
  fs::remove(p);
}

}  // namespace
