// `concurdl train --pipeline P`, `--dp D --tp T --pp P` and `--moe-experts E --ep P [--dp D]`:
// the pipeline, the 3D grid and expert parallelism as three of the train command's training
// modes (kernels/nn/distributed_train.hpp), each row with its flags, what chooses it, what it
// refuses and how many ranks it asks for.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <memory>

#include "concurdl/core/axis.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/dp/train_backends.hpp"
#include "concurdl/mp/expert_trainer.hpp"
#include "concurdl/mp/pipeline_trainer.hpp"
#include "concurdl/mp/three_d_trainer.hpp"
#include "concurdl/nn/distributed_train.hpp"

namespace concurdl::mp {

namespace {

using Flag = nn::ModeFlag;

// The flags the two modes bring to `concurdl train` (--micro-batches and --schedule are both's).
const Flag kPipelineFlag{.name = "--pipeline",
                         .help =
                             "pipeline parallelism (chapter 06): the layers cut into P stages, "
                             "one thread each (--backend threads) or one MPI process each "
                             "(--backend mpi); --batch is the whole batch, cut into "
                             "micro-batches",
                         .min = 1,
                         .max = kMaxThreads};
const Flag kMicroBatches{.name = "--micro-batches",
                         .help =
                             "with --pipeline or --dp/--tp/--pp: micro-batches per batch "
                             "(default 4)",
                         .min = 1,
                         .max = 1 << 14};
const Flag kSchedule{.name = "--schedule",
                     .help =
                         "with --pipeline: naive, gpipe, 1f1b, interleaved or zb-h1 (default "
                         "1f1b); with --dp/--tp/--pp: naive, gpipe or 1f1b",
                     .kind = Flag::Kind::text};
const Flag kChunks{.name = "--chunks",
                   .help =
                       "with --pipeline and --schedule interleaved: model chunks per stage "
                       "(v, default 2); the layers are cut into P x v pieces",
                   .min = 1,
                   .max = 64};
const Flag kRecompute{.name = "--recompute",
                      .help =
                          "with --pipeline: keep only each micro-batch's stage input and run "
                          "its forward again before its backward (activation recomputation)",
                      .kind = Flag::Kind::toggle};
const Flag kDp{.name = "--dp",
               .help =
                   "data-parallel replicas D (chapter 06, default 1): of the 3D grid of D x T x "
                   "P thread ranks (with --tp, --pp), or of the expert-parallel group (with "
                   "--ep)",
               .min = 1,
               .max = 1024};
const Flag kEp{.name = "--ep",
               .help =
                   "expert parallelism (chapter 06), with --moe-experts E: the experts spread "
                   "over groups of P ranks (threads or MPI processes), --dp D such groups, the "
                   "MLP and the router data-parallel over all P x D; --batch per rank",
               .min = 1,
               .max = 1024};
const Flag kEpExchange{.name = "--ep-exchange",
                       .help =
                           "with --ep: how rows travel to their experts, native (the backend's "
                           "all-to-all, the default) or pairwise (chapter 05's)",
                       .kind = Flag::Kind::text};
const Flag kTp{.name = "--tp",
               .help = "3D parallelism: tensor-parallel ranks T of each stage",
               .min = 1,
               .max = 1024};
const Flag kPp{.name = "--pp",
               .help = "3D parallelism: pipeline stages P of each replica",
               .min = 1,
               .max = 1024};

// --micro-batches M (default 4, at most the batch's rows) and --schedule (default 1f1b): of
// every schedule for the pipeline, of those the grid offers for the 3D grid.
MicroBatching batching_of(const nn::DistributedOptions& o, const nn::TrainConfig& c, bool grid) {
  MicroBatching b;
  b.micro_batches = static_cast<std::size_t>(o.number(kMicroBatches.name, 4));
  if (b.micro_batches > c.batch)
    throw UsageError(
        fmt::format("--micro-batches {}: more than the batch's {} rows", b.micro_batches, c.batch));
  const std::string sched = o.text(kSchedule.name, "1f1b");
  const auto parsed = parse_schedule(sched);
  if (grid && (!parsed || schedule_row(*parsed).three_d == InThreeD::not_offered))
    throw UsageError(
        fmt::format("--schedule {}: the 3D grid's pipelines run naive, gpipe or 1f1b", sched));
  if (!parsed)
    throw UsageError(fmt::format("--schedule: unknown schedule '{}' (known: {})", sched,
                                 fmt::join(kSchedules.names(Offer::all), ", ")));
  b.schedule = *parsed;
  return b;
}

// --dp D --tp T --pp P, each 1 when not given.
Grid grid_of(const nn::DistributedOptions& o) {
  return {.data = static_cast<int>(o.number(kDp.name, 1)),
          .tensor = static_cast<int>(o.number(kTp.name, 1)),
          .pipeline = static_cast<int>(o.number(kPp.name, 1))};
}

// The expert-parallel trainer's options from `concurdl train`'s, or a UsageError naming what
// it cannot run.
ExpertTrainerOptions expert_options(const nn::DistributedOptions& o, const nn::TrainConfig& c) {
  if (!o.moe)
    throw UsageError(
        "--ep: only with --moe-experts E (the mixture-of-experts block whose experts "
        "it spreads over ranks)");
  ExpertTrainerOptions e;
  e.data = static_cast<int>(o.number(kDp.name, 1));
  const auto P = static_cast<std::size_t>(o.number(kEp.name, 1));
  if (o.moe->experts < P)
    throw UsageError(fmt::format(
        "--ep {}: {} experts over {} ranks would leave a rank with none (need --moe-experts >= "
        "--ep; experts replicated over groups come from --dp)",
        P, o.moe->experts, P));
  (void)o.moe->layer_spec(c.spec);
  const std::string exchange = o.text(kEpExchange.name, "native");
  const auto row = std::find_if(std::begin(kTokenExchangeRows), std::end(kTokenExchangeRows),
                                [&](const TokenExchangeVariant& v) { return v.name == exchange; });
  if (row == std::end(kTokenExchangeRows))
    throw UsageError(fmt::format("--ep-exchange: unknown exchange '{}' (known: {})", exchange,
                                 fmt::join(kTokenExchangeVariants.names(Offer::all), ", ")));
  e.exchange = row->exchange;
  return e;
}

// The pipeline's options from `concurdl train`'s, or a UsageError naming the one it cannot run.
PipelineOptions pipeline_options(const nn::DistributedOptions& o, const nn::TrainConfig& c) {
  const std::size_t layers = c.spec.widths.size() - 1;
  if (o.ranks > kMaxStages || static_cast<std::size_t>(o.ranks) > layers)
    throw UsageError(fmt::format(
        "--pipeline {}: the model {} has {} layers; a stage needs one at least (at most {} "
        "stages)",
        o.ranks, c.spec.describe(), layers, kMaxStages));
  PipelineOptions p;
  p.stages = o.ranks;
  p.batching = batching_of(o, c, false);
  p.recompute = o.toggle(kRecompute.name);
  const auto chunks = static_cast<int>(o.number(kChunks.name, 0));
  const bool chunked = schedule_row(p.batching.schedule).chunking == Chunking::v_chunks;
  if (chunks > 0 && !chunked)
    throw UsageError(fmt::format("--chunks {}: only with --schedule interleaved (not {})", chunks,
                                 schedule_name(p.batching.schedule)));
  p.chunks = chunked ? (chunks > 0 ? chunks : 2) : 1;
  if (static_cast<std::size_t>(o.ranks * p.chunks) > layers)
    throw UsageError(
        fmt::format("--chunks {}: {} stages x {} chunks is more pieces than the {} layers of {}",
                    p.chunks, o.ranks, p.chunks, layers, c.spec.describe()));
  if (chunked && p.batching.micro_batches % static_cast<std::size_t>(o.ranks) != 0)
    throw UsageError(
        fmt::format("--schedule interleaved: --micro-batches {} is not a multiple of the {} stages "
                    "(micro-batches go through the chunks in groups of P)",
                    p.batching.micro_batches, o.ranks));
  return p;
}

// The grid's options from `concurdl train`'s, or a UsageError naming the one it cannot run.
ThreeDOptions three_d_options(const nn::DistributedOptions& o, const nn::TrainConfig& c) {
  if (o.backend != "threads")
    throw UsageError(fmt::format(
        "--dp/--tp/--pp: runs the grid as threads of this process (--backend threads), not "
        "--backend {}",
        o.backend));
  ThreeDOptions t;
  t.grid = grid_of(o);
  const int tp = t.grid.tensor, pp = t.grid.pipeline;
  const std::size_t layers = c.spec.widths.size() - 1;
  if (static_cast<std::size_t>(pp) > layers)
    throw UsageError(fmt::format("--pp {}: the model {} has {} layers; a stage needs one at least",
                                 pp, c.spec.describe(), layers));
  // Each stage's pairs split their hidden width over the tensor ranks.
  if (tp > 1) {
    const std::vector<std::size_t> bounds = stage_boundaries(layers, pp);
    for (std::size_t s = 0; s + 1 < bounds.size(); ++s)
      for (std::size_t l = bounds[s]; l + 1 < bounds[s + 1]; l += 2)
        if (c.spec.widths[l + 1] % static_cast<std::size_t>(tp) != 0)
          throw UsageError(fmt::format(
              "--tp {}: layer {}'s {} outputs (a column-parallel layer of stage {}) do not divide "
              "over {} tensor ranks",
              tp, l, c.spec.widths[l + 1], s, tp));
  }
  t.batching = batching_of(o, c, true);
  return t;
}

// Registered before the grid, so that a flag both own names --pipeline first.
const bool registered = nn::register_training_mode(
    {.name = "pipeline",
     .what = "pipeline parallelism (chapter 06): the layers cut into --pipeline P stages, "
             "--micro-batches M, --schedule naive|gpipe|1f1b|interleaved|zb-h1, --chunks v, "
             "--recompute; threads or MPI processes",
     .flags = {kPipelineFlag, kMicroBatches, kSchedule, kChunks, kRecompute},
     .chosen_by = {kPipelineFlag.name},
     .chosen_as = "--pipeline P",
     .ranks =
         [](const nn::DistributedOptions& o) {
           return static_cast<int>(o.number("--pipeline", 1));
         },
     .refuses = {"--ranks", "--mode"},
     .refusal =
         "(--pipeline P runs P stages; data-parallel ranks and modes do not combine with it)",
     .backends = {"threads", "mpi"},
     .check = [](const nn::DistributedOptions& o,
                 const nn::TrainConfig& c) { (void)pipeline_options(o, c); },
     .run =
         [](const nn::DistributedOptions& o, const nn::TrainConfig& c, const nn::Dataset& train,
            const nn::RankLoop& loop) {
           const PipelineOptions p = pipeline_options(o, c);
           if (o.backend == "threads") {  // one trainer drives every stage's thread
             PipelineTrainer t(c, train, p);
             loop(t);
             return;
           }
           dp::run_ranks(  // a trainer a process, each with its own stage
               o, c,
               [&](dp::Communicator& world, const nn::TrainConfig& config) {
                 return std::make_unique<PipelineTrainer>(world, config, train, p);
               },
               loop);
         }});

const bool registered_3d = nn::register_training_mode(
    {.name = "3d",
     .what = "3D parallelism (chapter 06): --dp D data-parallel replicas of --pp P pipeline "
             "stages of --tp T tensor-parallel ranks, D x T x P threads; --micro-batches M, "
             "--schedule naive|gpipe|1f1b",
     .flags = {kDp, kTp, kPp, kMicroBatches, kSchedule},
     .chosen_by = {kDp.name, kTp.name, kPp.name},
     .chosen_as = "--dp/--tp/--pp",
     .ranks = [](const nn::DistributedOptions& o) { return grid_of(o).size(); },
     .refuses = {"--ranks", "--mode", kPipelineFlag.name, kRecompute.name, kChunks.name},
     .refusal = "(the grid's ranks, its pipelines and their schedule come from --dp, --tp, --pp, "
                "--micro-batches and --schedule)",
     .check = [](const nn::DistributedOptions& o,
                 const nn::TrainConfig& c) { (void)three_d_options(o, c); },
     .run =
         [](const nn::DistributedOptions& o, const nn::TrainConfig& c, const nn::Dataset& train,
            const nn::RankLoop& loop) {
           ThreeDTrainer t(c, train, three_d_options(o, c));
           loop(t);
         }});

// Registered after the grid: with --ep, a --dp belongs to this mode (choose_mode).
const bool registered_expert = nn::register_training_mode(
    {.name = "expert",
     .what = "expert parallelism (chapter 06): with --moe-experts E, the experts over --ep P "
             "ranks, --dp D groups, the rest data-parallel; threads or MPI ranks",
     .flags = {kEp, kDp, kEpExchange},
     .chosen_by = {kEp.name},
     .chosen_as = "--ep P",
     .ranks =
         [](const nn::DistributedOptions& o) {
           return static_cast<int>(o.number(kEp.name, 1) * o.number(kDp.name, 1));
         },
     .refuses = {"--ranks", "--mode", "--straggler", "--fail-worker"},
     .refusal = "(the ranks are --ep x --dp; faults are not injected into this mode)",
     .backends = {"threads", "mpi"},
     .global_batch = true,
     .trains_moe = "--ep P [--dp D]: experts spread over P ranks, D such groups",
     .check = [](const nn::DistributedOptions& o,
                 const nn::TrainConfig& c) { (void)expert_options(o, c); },
     .run =
         [](const nn::DistributedOptions& o, const nn::TrainConfig& c, const nn::Dataset& train,
            const nn::RankLoop& loop) {
           const ExpertTrainerOptions e = expert_options(o, c);
           dp::run_ranks(
               o, c,
               [&](dp::Communicator& world, const nn::TrainConfig& config) {
                 return std::make_unique<ExpertParallelTrainer>(world, config, *o.moe, train, e);
               },
               loop);
         }});

}  // namespace

}  // namespace concurdl::mp
