// `concurdl train` end to end (the rest of the command line: test_cli.cpp): bad flags of one
// trainer, of data-parallel ranks, modes and the pipeline are usage errors naming the flag; a
// pipeline run writes its timeline; a run resumed from its checkpoint ends where an
// uninterrupted one does. Drives `concurdl`, which has the chapters' trainers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "cli_fixture.hpp"
#include "concurdl/build_info.hpp"
#include "concurdl/harness/records.hpp"
#include "concurdl/harness/trace_files.hpp"

namespace fs = std::filesystem;
using concurdl::load_run;
using concurdl::RunFile;
using namespace cli_test;

// `concurdl train` (the training stack's command): bad flags are usage errors; a short run on
// the first images of Fashion-MNIST records its curve; a run resumed from its checkpoint ends
// with the checkpoint an uninterrupted run writes, byte for byte; a damaged checkpoint is
// refused by name.
TEST_F(Cli, TrainRejectsBadFlags) {
  const char* bin = CONCURDL_BIN;
  expect_usage_error(run("train --epochs 0", bin), "--epochs");
  expect_usage_error(run("train --epochs -1", bin), "'-1' is not allowed");  // not 2^64 - 1 epochs
  expect_usage_error(run("train --seed -3", bin), "--seed");
  expect_usage_error(run("train --threads 0", bin), "--threads");
  expect_usage_error(run("train --batch 2.5", bin), "--batch");
  expect_usage_error(run("train --arch 784-64-9", bin), "--arch");
  expect_usage_error(run("train --arch 784-x-10", bin), "--arch");
  expect_usage_error(run("train --gemm v9_magic", bin), "v9_magic");
  expect_usage_error(run("train --precision fp8", bin),
                     "--precision: precision 'fp8': want fp32, bf16 or fp16");
  expect_usage_error(run("train --precision bf16 --ranks 2 --allreduce v4_ring", bin),
                     "--allreduce: not with --precision bf16");
  expect_usage_error(run("train --precision fp16 --ranks 2 --bucket-mb 1", bin),
                     "--bucket-mb: with --precision fp16 only with --overlap");
  expect_usage_error(run("train --precision bf16 --ranks 2 --zero 1", bin),
                     "--zero: not with --precision bf16");
  expect_usage_error(run("train --precision fp16 --ranks 2 --mode hogwild", bin),
                     "--mode hogwild: not with --precision fp16");
  expect_usage_error(run("train --precision fp16 --pipeline 2", bin),
                     "--pipeline: not with --precision fp16");
  expect_usage_error(run("train --lr -1", bin), "--lr");
  expect_usage_error(run("train --momentum 1.5", bin), "--momentum");
  expect_usage_error(run("train --resume no-such.ckpt", bin), "no-such.ckpt");
  expect_usage_error(run("train --checkpoint no-such-dir/ck", bin), "no-such-dir");
  expect_usage_error(run("train --frobnicate", bin), "frobnicate");
  expect_usage_error(run("train --data /nonexistent", bin), "/nonexistent");
  // Sizes past the data set or past memory: refused by flag before anything is loaded.
  expect_usage_error(run("train --batch 99999999", bin),
                     "--batch: 99999999 is more than the 60000 training images");
  expect_usage_error(run("train --batch 1000 --train-limit 640", bin),
                     "--batch: 1000 is more than the 640 training images (--train-limit)");
  expect_usage_error(run("train --train-limit 60001", bin), "--train-limit");
  expect_usage_error(run("train --test-limit 10001", bin), "--test-limit");
  expect_usage_error(run("train --threads 4097", bin), "--threads");
  expect_usage_error(run("train --arch 784-999999999-10", bin), "--arch");
  expect_usage_error(run("train --arch 784-65536-65536-10", bin), "parameters");
  expect_usage_error(run("train --batch 60000 --arch 784-100000-10", bin), "activations");
  expect_usage_error(run("train --checkpoint .", bin), "--checkpoint: '.' is a directory");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
  const Result h = run("train --help", bin);
  EXPECT_EQ(h.rc, 0);
  EXPECT_NE(h.out.find("--resume"), std::string::npos) << h.out;
}

// `concurdl train --ranks N` (chapter 05) and `--mode` (chapter 07): a bad rank count, backend,
// hostfile or mode, a flag of one mode given to another, a straggler or failed worker that does
// not exist: exit 2 and one line naming it, before any data is read or mpirun is started.
TEST_F(Cli, DataParallelTrainRejectsBadFlags) {
  const char* bin = CONCURDL_BIN;
  expect_usage_error(run("train --ranks 0", bin), "--ranks: '0' is not allowed");
  expect_usage_error(run("train --ranks 2 --backend bogus", bin), "unknown backend 'bogus'");
  const Result nccl = run("train --ranks 2 --backend nccl", bin);
  expect_usage_error(nccl, "--backend nccl: ");
  EXPECT_NE(nccl.err.find(concurdl::build::have_nccl ? "runs the MLP on the CPU" : "without NCCL"),
            std::string::npos)
      << nccl.err;
  for (const char* flag : {"--backend threads", "--bucket-mb 1", "--overlap", "--allreduce v4_ring",
                           "--hostfile hosts.txt", "--zero 3"})
    expect_usage_error(
        run(std::string("train ") + flag, bin),
        std::string(flag).substr(0, std::string(flag).find(' ')) + ": only with --ranks N");
  expect_usage_error(run("train --ranks 2 --hostfile hosts.txt", bin),
                     "--hostfile: only with --backend mpi");
  expect_usage_error(run("train --ranks 2 --backend mpi --hostfile no-such-hosts.txt", bin),
                     concurdl::build::have_mpi ? "--hostfile: 'no-such-hosts.txt' is not a readable"
                                               : "--backend mpi: this concurdl was built without");

  expect_usage_error(run("train --shard-update", bin), "--shard-update: only with --ranks N");
  expect_usage_error(run("train --ranks 2 --shard-update --overlap", bin),
                     "--overlap: not with --shard-update");
  expect_usage_error(run("train --ranks 2 --shard-update --allreduce native", bin),
                     "--allreduce native: not with --shard-update");
  expect_usage_error(run("train --ranks 2 --zero 1 --shard-update", bin),
                     "--shard-update: not with --zero");
  expect_usage_error(run("train --ranks 2 --zero 4", bin), "--zero: '4' is not allowed");
  expect_usage_error(run("train --ranks 2 --zero 1 --allreduce v4_ring", bin),
                     "--allreduce: not with --zero");
  expect_usage_error(run("train --ranks 2 --zero 1 --bucket-mb 1", bin),
                     "--bucket-mb: not with --zero");
  expect_usage_error(run("train --ranks 2 --zero 2 --mode hogwild", bin),
                     "--zero: only with --mode sync");
  expect_usage_error(run("train --mode bogus", bin), "--mode: unknown mode 'bogus'");
  expect_usage_error(run("train --ranks 2 --staleness 3", bin),
                     "--staleness: only with --mode ps-ssp");
  expect_usage_error(run("train --ranks 2 --mode ps-async --staleness 3", bin),
                     "--staleness: only with --mode ps-ssp");
  expect_usage_error(run("train --ranks 2 --straggler 5:2", bin),
                     "--straggler 5:2: there are only 2 ranks");
  expect_usage_error(run("train --ranks 2 --straggler 1:0.5", bin),
                     "--straggler: '1:0.5' is not RANK:FACTOR");
  expect_usage_error(run("train --ranks 2 --fail-worker x", bin),
                     "--fail-worker: 'x' is not RANK:STEP");
  // Refused before the data set is read (a data directory that does not exist would be the
  // error otherwise): the mode's and the backend's own options, a negative bucket size, a
  // checkpoint that is no checkpoint.
  expect_usage_error(
      run("train --ranks 2 --mode hogwild --backend processes --data no-such-dir", bin),
      "--mode hogwild: runs its workers on --backend threads; --backend processes runs --mode "
      "ps-async, --mode ps-ssp");
  expect_usage_error(run("train --ranks 2 --allreduce v9_magic --data no-such-dir", bin),
                     "v9_magic");
  expect_usage_error(run("train --ranks 2 --bucket-mb -1 --data no-such-dir", bin), "--bucket-mb");
  // The parameter server's shards as processes: only across hosts, and a host left to the
  // workers.
  expect_usage_error(run("train --ranks 2 --mode ps-async --server-hosts 1", bin),
                     "--server-hosts: only with --backend processes and --hostfile");
  expect_usage_error(run("train --ranks 2 --mode hogwild --server-hosts 1", bin),
                     "--server-hosts: only with --mode ps-async or --mode ps-ssp");
  std::ofstream(dir_ / "three-hosts.txt") << "10.0.0.1\n10.0.0.2 slots=2\n10.0.0.3\n";
  const std::string ps_hosts =
      "train --ranks 2 --mode ps-async --backend processes --hostfile three-hosts.txt --data "
      "no-such-dir ";
  expect_usage_error(run(ps_hosts + "--server-hosts 3", bin),
                     "--server-hosts 3: three-hosts.txt names 3 hosts; the workers need");
  expect_usage_error(run(ps_hosts + "--server-hosts 2 --servers 1", bin),
                     "--servers 1: fewer shards than --server-hosts 2");
  expect_usage_error(run(ps_hosts + "--push-pull", bin), "--push-pull: only with --server-hosts");
  expect_usage_error(
      run("train --ranks 2 --mode ps-ssp --backend processes --hostfile three-hosts.txt "
          "--server-hosts 1 --push-pull --data no-such-dir",
          bin),
      "--push-pull: only with --mode ps-async");
  {
    std::ofstream(dir_ / "garbage.bin") << "not a checkpoint";
    expect_usage_error(run("train --resume garbage.bin --data no-such-dir", bin), "--resume: ");
  }
  if (concurdl::build::have_mpi) {
    // Refused before mpirun starts: started, each rank would say it again, and mpirun more.
    const Result ps = run("train --ranks 2 --mode ps-async --backend mpi", bin);
    expect_usage_error(ps,
                       "--mode ps-async: runs its workers on --backend threads or processes; "
                       "--backend mpi runs --pipeline P, --ep P");
    EXPECT_EQ(ps.err.find("mpirun"), std::string::npos) << ps.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

// `concurdl train --pipeline P` (chapter 06): its companions without it, data-parallel flags
// with it, a bad schedule or too many stages: exit 2 and one line naming the flag.
TEST_F(Cli, PipelineTrainRejectsBadFlags) {
  const char* bin = CONCURDL_BIN;
  expect_usage_error(run("train --micro-batches 4", bin),
                     "--micro-batches: only with --pipeline P");
  expect_usage_error(run("train --schedule gpipe", bin), "--schedule: only with --pipeline P");
  expect_usage_error(run("train --recompute", bin), "--recompute: only with --pipeline P");
  expect_usage_error(run("train --pipeline 2 --ranks 2", bin), "--ranks: not with --pipeline");
  expect_usage_error(run("train --pipeline 2 --mode hogwild", bin), "--mode: not with --pipeline");
  expect_usage_error(run("train --pipeline 0", bin), "--pipeline: '0' is not allowed");
  expect_usage_error(run("train --pipeline 2 --micro-batches 0", bin), "--micro-batches");
  // Refused by the mode before the data set is read (a data directory that does not exist
  // would be the error otherwise).
  expect_usage_error(run("train --pipeline 2 --schedule zigzag --data no-such-dir", bin),
                     "--schedule: unknown schedule 'zigzag'");
  expect_usage_error(run("train --pipeline 4 --data no-such-dir", bin), "--pipeline 4: the model");
  expect_usage_error(run("train --pipeline 99 --data no-such-dir", bin), "--pipeline 99");
  expect_usage_error(run("train --pipeline 2 --micro-batches 65 --data no-such-dir", bin),
                     "--micro-batches 65: more than the batch's 64 rows");
  expect_usage_error(run("train --chunks 2", bin), "--chunks: only with --pipeline P");
  // 3D parallelism's flags.
  expect_usage_error(run("train --dp 2 --ranks 2", bin), "--ranks: not with --dp/--tp/--pp");
  expect_usage_error(run("train --tp 2 --pipeline 2", bin), "--pipeline: not with --dp/--tp/--pp");
  expect_usage_error(run("train --pp 2 --recompute", bin), "--recompute: not with --dp/--tp/--pp");
  expect_usage_error(run("train --tp 3 --data no-such-dir", bin),
                     "--tp 3: layer 0's 256 outputs (a column-parallel layer of stage 0) do not "
                     "divide over 3 tensor ranks");
  expect_usage_error(run("train --pp 4 --data no-such-dir", bin), "--pp 4: the model");
  expect_usage_error(run("train --dp 2 --schedule zb-h1 --data no-such-dir", bin),
                     "--schedule zb-h1: the 3D grid's pipelines run naive, gpipe or 1f1b");
  expect_usage_error(run("train --dp 0", bin), "--dp");
  // A mode chosen by its own flags is not chosen by --mode; no mode but sync trains in 16 bits.
  expect_usage_error(run("train --ranks 2 --mode pipeline", bin),
                     "--mode pipeline: --pipeline P chooses it, not --mode");
  expect_usage_error(run("train --dp 2 --precision bf16", bin), "--dp: not with --precision bf16");
  expect_usage_error(run("train --pipeline 2 --chunks 2 --data no-such-dir", bin),
                     "--chunks 2: only with --schedule interleaved (not 1f1b)");
  expect_usage_error(
      run("train --pipeline 2 --schedule interleaved --micro-batches 3 --arch 784-64-64-64-10 "
          "--data no-such-dir",
          bin),
      "--micro-batches 3 is not a multiple of the 2 stages");
  expect_usage_error(
      run("train --pipeline 2 --schedule interleaved --chunks 3 --data no-such-dir", bin),
      "--chunks 3: 2 stages x 3 chunks is more pieces than the 3 layers");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

// A pipeline run with --trace: the run records its bubble, and writes a trace that parses, with
// a stage per track, and its Gantt chart.
TEST_F(Cli, PipelineTrainWritesItsTimeline) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") &&
      !std::getenv("CONCURDL_FASHION_MNIST"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (scripts/setup installs it)";
  const Result r =
      run("train --pipeline 2 --micro-batches 4 --schedule gpipe --epochs 1 --train-limit 640 "
          "--test-limit 200 --trace --no-report --quiet --out runs",
          CONCURDL_BIN);
  ASSERT_EQ(r.rc, 0) << r.err;
  const fs::path run_dir = dir_ / r.last_line();
  const auto events = concurdl::trace::read_chrome_trace(run_dir / "trace.json");
  std::set<std::string> tracks;
  for (const auto& e : events) tracks.insert(e.track);
  EXPECT_TRUE(tracks.count("stage 0") && tracks.count("stage 1")) << events.size();
  EXPECT_TRUE(fs::exists(run_dir / "figures" / "timeline.gp"));
  const RunFile f = load_run(run_dir);
  ASSERT_FALSE(f.records.empty());
  EXPECT_TRUE(f.records.back().derived.count("bubble_fraction"));
  EXPECT_EQ(f.records.back().derived.at("peak_activations"), 4.0);
  EXPECT_TRUE(f.records.back().derived.count("resident_peak_bytes"));  // one process
  if (concurdl::build::have_mpi) {
    // One stage a process: the same figures, and each stage's own resident memory; a
    // checkpoint the writer gathers, which a threaded run resumes.
    const Result m =
        run("train --pipeline 2 --backend mpi --micro-batches 4 --schedule gpipe --epochs 1 "
            "--train-limit 640 --test-limit 200 --checkpoint p.ckpt --no-report --quiet --out runs",
            CONCURDL_BIN);
    ASSERT_EQ(m.rc, 0) << m.err;
    const RunFile g = load_run(dir_ / m.last_line());
    ASSERT_EQ(g.records.size(), 2u);  // epoch 0 (before training) and 1
    const auto& d = g.records.back().derived;
    EXPECT_EQ(d.at("peak_activations"), 4.0);
    EXPECT_EQ(d.at("peak_activation_bytes"), f.records.back().derived.at("peak_activation_bytes"));
    for (const char* k : {"stage0_resident_peak_bytes", "stage1_resident_peak_bytes",
                          "stage0_peak_bytes", "stage1_activation_model_bytes"})
      EXPECT_TRUE(d.count(k)) << k;
    EXPECT_FALSE(d.count("resident_peak_bytes"));
    EXPECT_EQ(g.records.back().samples, f.records.back().samples) << "the same steps";
    const Result resumed =
        run("train --pipeline 2 --micro-batches 4 --epochs 2 --train-limit 640 --test-limit 200 "
            "--resume p.ckpt --no-report --quiet --out runs",
            CONCURDL_BIN);
    EXPECT_EQ(resumed.rc, 0) << resumed.err;
  }
}

TEST_F(Cli, TrainRecordsItsCurveAndResumesToTheSameCheckpoint) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") &&
      !std::getenv("CONCURDL_FASHION_MNIST"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const char* bin = CONCURDL_BIN;
  const std::string common =
      " --train-limit 640 --test-limit 200 --batch 64 --threads 2 --quiet --out runs";
  const Result two = run("train --epochs 2 --checkpoint a.ckpt" + common, bin);
  ASSERT_EQ(two.rc, 0) << two.err;
  const RunFile f = load_run(dir_ / two.last_line());
  ASSERT_EQ(f.records.size(), 3u);  // epoch 0 (before training), 1, 2
  for (std::size_t i = 0; i < f.records.size(); ++i) {
    const auto& r = f.records[i];
    EXPECT_EQ(r.experiment, "kernels/train");
    EXPECT_EQ(r.params.at("epoch"), std::to_string(i));
    EXPECT_EQ(r.metric, "test_accuracy");
    ASSERT_EQ(r.samples.size(), 1u);
    EXPECT_GE(r.samples[0], 0.0);
    EXPECT_LE(r.samples[0], 1.0);
    EXPECT_TRUE(r.derived.count("test_loss"));
  }
  EXPECT_TRUE(f.records[2].derived.count("train_loss"));
  EXPECT_GT(f.records[2].derived.at("samples_per_s"), 0);
  EXPECT_GT(f.records[2].samples[0], 0.3);  // well above chance (0.1) after 20 steps
  EXPECT_EQ(f.provenance.at("training").at("train_samples"), 640);
  EXPECT_TRUE(fs::exists(dir_ / two.last_line() / "report.md"));

  const Result resumed = run("train --epochs 3 --resume a.ckpt --checkpoint b.ckpt" + common, bin);
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  const RunFile g = load_run(dir_ / resumed.last_line());
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.records[0].params.at("epoch"), "3");
  const Result straight = run("train --epochs 3 --checkpoint c.ckpt" + common, bin);
  ASSERT_EQ(straight.rc, 0) << straight.err;
  EXPECT_EQ(slurp(dir_ / "b.ckpt"), slurp(dir_ / "c.ckpt"));
  EXPECT_NE(slurp(dir_ / "a.ckpt"), slurp(dir_ / "c.ckpt"));

  // 16-bit training: recorded as such, with its skipped steps and (fp16) its loss scale.
  for (const std::string p : {"bf16", "fp16"}) {
    const Result mixed = run("train --epochs 1 --precision " + p + common, bin);
    ASSERT_EQ(mixed.rc, 0) << mixed.err;
    const RunFile m = load_run(dir_ / mixed.last_line());
    ASSERT_EQ(m.records.size(), 2u);
    EXPECT_EQ(m.records[1].params.at("precision"), p);
    EXPECT_EQ(m.records[1].derived.at("skipped_steps"), 0.0);
    EXPECT_EQ(m.records[1].derived.count("loss_scale"), p == "fp16" ? 1u : 0u);
    EXPECT_GT(m.records[1].samples[0], 0.3);
    EXPECT_EQ(m.provenance.at("training").at("precision"), p);
  }

  // A flipped byte, a truncated file, another architecture: refused, naming the file.
  std::string bytes = slurp(dir_ / "a.ckpt");
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x40);
  std::ofstream(dir_ / "flipped.ckpt", std::ios::binary) << flipped;
  std::ofstream(dir_ / "cut.ckpt", std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  expect_usage_error(run("train --epochs 3 --resume flipped.ckpt" + common, bin), "flipped.ckpt");
  expect_usage_error(run("train --epochs 3 --resume cut.ckpt" + common, bin), "cut.ckpt");
  expect_usage_error(run("train --epochs 3 --arch 784-32-10 --resume a.ckpt" + common, bin),
                     "784-32-10");
}

// `concurdl train --moe-experts E` (a MoE block inside the MLP, one trainer): a bad expert
// count, k, capacity factor or placement, a companion flag without it, and the flags it does
// not combine with are usage errors naming the flag, before any data is read.
// --shard-update: the same steps as the replicated update, so the same checkpoint, byte for byte
// (the epoch's end gathers each rank's momentum and master weights before the writer saves), and
// after a resume too.
TEST_F(Cli, ShardedUpdateWritesTheReplicatedCheckpoint) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") &&
      !std::getenv("CONCURDL_FASHION_MNIST"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string common =
      " --ranks 2 --precision bf16 --epochs 1 --train-limit 640 --test-limit 200 --no-report "
      "--quiet --out runs";
  const Result sharded = run("train --shard-update --checkpoint s.ckpt" + common, CONCURDL_BIN);
  ASSERT_EQ(sharded.rc, 0) << sharded.err;
  const Result replicated = run("train --checkpoint r.ckpt" + common, CONCURDL_BIN);
  ASSERT_EQ(replicated.rc, 0) << replicated.err;
  EXPECT_EQ(slurp(dir_ / "s.ckpt"), slurp(dir_ / "r.ckpt"));
  // Resumed, sharded, for a second epoch: still the replicated run's bytes.
  const std::string second =
      " --ranks 2 --precision bf16 --epochs 2 --train-limit 640 --test-limit 200 --no-report "
      "--quiet --out runs";
  const Result s2 =
      run("train --shard-update --resume s.ckpt --checkpoint s2.ckpt" + second, CONCURDL_BIN);
  ASSERT_EQ(s2.rc, 0) << s2.err;
  const Result r2 = run("train --resume r.ckpt --checkpoint r2.ckpt" + second, CONCURDL_BIN);
  ASSERT_EQ(r2.rc, 0) << r2.err;
  EXPECT_EQ(slurp(dir_ / "s2.ckpt"), slurp(dir_ / "r2.ckpt"));
  EXPECT_NE(slurp(dir_ / "s2.ckpt"), slurp(dir_ / "s.ckpt"));
}

TEST_F(Cli, MoeTrainRejectsBadFlags) {
  const char* bin = CONCURDL_BIN;
  expect_usage_error(run("train --moe-experts 1", bin), "--moe-experts");
  expect_usage_error(run("train --moe-experts 4 --moe-top-k 3", bin), "--moe-top-k");
  expect_usage_error(run("train --moe-experts 4 --capacity-factor 0", bin), "--capacity-factor");
  expect_usage_error(run("train --moe-experts 4 --capacity-factor -1", bin), "--capacity-factor");
  expect_usage_error(run("train --moe-experts 4 --moe-after 3", bin),
                     "--moe-after: '3' is not allowed (--arch '784-256-128-10' has hidden layers "
                     "1 to 2)");
  expect_usage_error(run("train --moe-experts 4 --arch 784-10", bin), "no hidden layer");
  expect_usage_error(run("train --moe-experts 4 --moe-aux -0.5", bin), "--moe-aux");
  expect_usage_error(run("train --moe-top-k 2", bin), "--moe-top-k: only with --moe-experts E");
  expect_usage_error(run("train --moe-dropless", bin), "--moe-dropless: only with --moe-experts");
  expect_usage_error(run("train --moe-experts 4 --ranks 2", bin),
                     "--ranks: not with --moe-experts");
  expect_usage_error(run("train --moe-experts 4 --pipeline 2", bin),
                     "--pipeline: not with --moe-experts");
  expect_usage_error(run("train --moe-experts 4 --dp 2 --tp 1 --pp 1", bin),
                     ": not with --moe-experts");
  expect_usage_error(run("train --moe-experts 4 --mode hogwild", bin),
                     "--mode: not with --moe-experts");
  expect_usage_error(run("train --moe-experts 4 --precision bf16", bin),
                     "--precision: 'bf16' not with --moe-experts");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

// `concurdl train --moe-experts E --ep P [--dp D]` (chapter 06's expert parallelism): --ep
// without a block, too few experts, --dp without --ep, an unknown exchange, a backend it does
// not run on: exit 2 naming the flag, before any data is read.
TEST_F(Cli, ExpertParallelTrainRejectsBadFlags) {
  const char* bin = CONCURDL_BIN;
  expect_usage_error(run("train --ep 2 --data no-such-dir", bin),
                     "--ep: only with --moe-experts E");
  expect_usage_error(run("train --moe-experts 2 --ep 4 --data no-such-dir", bin),
                     "--ep 4: 2 experts over 4 ranks would leave a rank with none");
  expect_usage_error(run("train --moe-experts 4 --dp 2 --data no-such-dir", bin),
                     "--dp: not with --moe-experts (the MoE block trains as one trainer, or over "
                     "ranks with --ep P [--dp D]");
  expect_usage_error(run("train --moe-experts 4 --ep 2 --ep-exchange ring --data no-such-dir", bin),
                     "--ep-exchange: unknown exchange 'ring' (known: native, pairwise)");
  expect_usage_error(
      run("train --moe-experts 4 --ep 2 --backend processes --data no-such-dir", bin),
      "--ep P: runs its workers on --backend threads or mpi");
  expect_usage_error(run("train --moe-experts 4 --ep 2 --tp 2 --data no-such-dir", bin),
                     "--tp: not with --moe-experts");
  expect_usage_error(run("train --ep-exchange pairwise --data no-such-dir", bin),
                     "--ep-exchange: only with --ep P");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

// Two groups of two thread ranks (and, where MPI is built, two MPI ranks): the records carry
// the routing and every rank's phases; the checkpoint resumes as one process.
TEST_F(Cli, ExpertParallelTrainRecordsEveryRanksPhasesAndResumesAsOneProcess) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") &&
      !std::getenv("CONCURDL_FASHION_MNIST"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const char* bin = CONCURDL_BIN;
  const std::string common =
      " --moe-experts 4 --moe-top-k 2 --train-limit 640 --test-limit 200 --quiet --no-report "
      "--out runs";
  const Result ep =
      run("train --ep 2 --dp 2 --batch 32 --epochs 1 --checkpoint e.ckpt" + common, bin);
  ASSERT_EQ(ep.rc, 0) << ep.err;
  const RunFile f = load_run(dir_ / ep.last_line());
  ASSERT_EQ(f.records.size(), 2u);
  const auto& d = f.records[1].derived;
  for (const char* m :
       {"moe_dropped_fraction", "moe_imbalance", "moe_rank_imbalance", "moe_aux_loss", "moe_step_s",
        "moe_experts_s_r0", "moe_exchange_s_r3", "moe_route_s_r2", "moe_rows_r3"})
    EXPECT_TRUE(d.count(m)) << m;
  EXPECT_GE(d.at("moe_rank_imbalance"), 1.0);
  EXPECT_GT(d.at("moe_rows_r1"), 0.0);
  const auto& dp = f.provenance.at("training").at("data_parallel");
  EXPECT_EQ(dp.at("ranks"), 4);
  EXPECT_EQ(dp.at("global_batch"), 128);
  EXPECT_EQ(dp.at("mode"), "expert");
  const Result one = run("train --epochs 2 --batch 128 --resume e.ckpt" + common, bin);
  EXPECT_EQ(one.rc, 0) << one.err;
  if (concurdl::build::have_mpi) {
    const Result mpi = run("train --ep 2 --backend mpi --batch 64 --epochs 1" + common, bin);
    ASSERT_EQ(mpi.rc, 0) << mpi.err;
    const RunFile m = load_run(dir_ / mpi.last_line());
    EXPECT_EQ(m.provenance.at("training").at("data_parallel").at("backend"), "mpi");
    EXPECT_TRUE(m.records.back().derived.count("moe_experts_s_r1"));
  }
}

// A short MoE run records its curve with the block's routing statistics; resumed from its
// checkpoint it ends byte for byte where the uninterrupted run does; dense and MoE checkpoints
// are refused for each other.
TEST_F(Cli, MoeTrainRecordsRoutingAndResumesToTheSameCheckpoint) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") &&
      !std::getenv("CONCURDL_FASHION_MNIST"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const char* bin = CONCURDL_BIN;
  const std::string base =
      " --moe-experts 4 --train-limit 640 --test-limit 200 --batch 64 --threads 2 --quiet "
      "--no-report --out runs";
  const std::string common = base + " --moe-top-k 2";
  const Result two = run("train --epochs 2 --checkpoint a.ckpt" + common, bin);
  ASSERT_EQ(two.rc, 0) << two.err;
  const RunFile f = load_run(dir_ / two.last_line());
  ASSERT_EQ(f.records.size(), 3u);
  EXPECT_EQ(f.records[2].params.at("moe"), "4x256-top2-cap1.25-after1-aux0.01");
  const auto& d = f.records[2].derived;
  for (const char* m :
       {"moe_dropped_fraction", "moe_imbalance", "moe_aux_loss", "moe_share_e0", "moe_share_e3"})
    EXPECT_TRUE(d.count(m)) << m;
  EXPECT_GE(d.at("moe_imbalance"), 1.0);
  EXPECT_LT(d.at("train_loss"), f.records[1].derived.at("train_loss"));
  EXPECT_GT(f.records[2].samples[0], 0.3);
  EXPECT_EQ(f.provenance.at("training").at("moe"), "4x256-top2-cap1.25-after1-aux0.01");
  EXPECT_TRUE(f.claims.empty()) << f.claims.dump();  // the dense MLP's claims do not judge it

  const Result resumed = run("train --epochs 3 --resume a.ckpt --checkpoint b.ckpt" + common, bin);
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  const Result straight = run("train --epochs 3 --checkpoint c.ckpt" + common, bin);
  ASSERT_EQ(straight.rc, 0) << straight.err;
  EXPECT_EQ(slurp(dir_ / "b.ckpt"), slurp(dir_ / "c.ckpt"));

  const std::string dense = " --train-limit 640 --test-limit 200 --quiet --no-report --out runs";
  ASSERT_EQ(run("train --epochs 1 --checkpoint dense.ckpt" + dense, bin).rc, 0);
  expect_usage_error(run("train --epochs 3 --resume dense.ckpt" + common, bin),
                     "checkpoint is of a dense model");
  expect_usage_error(run("train --epochs 3 --resume a.ckpt" + dense, bin),
                     "mixture-of-experts block (moe=4x256-top2");
  expect_usage_error(run("train --epochs 3 --resume a.ckpt" + base, bin),
                     "the model's moe=4x256-top1");
}
