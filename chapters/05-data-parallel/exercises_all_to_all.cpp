// Exercise 5.5's timing: the student's all-to-all with variable counts
// (exercises/student_all_to_all.hpp) against all_to_all_v_pairwise, on the threads backend at
// max(2, hardware threads) ranks, each rank sending about 16 MiB in all in blocks of uneven
// sizes (some zero), its own block included, a few all-to-alls a sample (three at 16 MiB). Both
// run on one team of rank threads, kept between repetitions, and are measured interleaved in
// one process: the verdict is the ratio of their times, never a time. After every repetition
// each element every rank received is checked against what its sender put there, the send
// buffers against what they held, and the bytes each rank handed to the communicator against
// the model (every float for another rank once): a wrong result is an invalid run, never a
// fast one.
#include "exercises_all_to_all.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "concurdl/core/hardware.hpp"
#include "concurdl/dp/all_to_all.hpp"
#include "concurdl/dp/rank_team.hpp"
#include "concurdl/harness/exercise.hpp"
#include "exercises/student_all_to_all.hpp"

namespace concurdl::dp {

namespace {

// Trials of a few milliseconds whose ranks share the machine's cores with everything else on
// it: more repetitions than kExerciseRepetitions, so that the interval of the ratio of medians
// is narrow enough to judge.
constexpr int kRepetitions = 41;
constexpr float kPoison = -1.0f;  // no value a sender writes (they are 0 .. 8190)

// The i-th float rank `from` sends rank `to`: a small integer naming both and the place.
float value_of(int from, int to, std::size_t i) {
  return static_cast<float>(
      (static_cast<std::size_t>(from) * 131 + static_cast<std::size_t>(to) * 17 + i * 7) % 8191);
}

// How many of its `floats` rank `from` sends rank `to`: weights 0 to 4 by pair, so the blocks
// are uneven and some are empty, scaled so that each rank sends about `floats` in all.
std::vector<std::size_t> send_counts_of(int from, int ranks, std::size_t floats) {
  std::vector<std::size_t> w(static_cast<std::size_t>(ranks)), counts(w.size());
  std::size_t total = 0;
  for (int to = 0; to < ranks; ++to) {
    w[static_cast<std::size_t>(to)] = static_cast<std::size_t>((from * 7 + to * 3 + 1) % 5);
    total += w[static_cast<std::size_t>(to)];
  }
  for (std::size_t j = 0; j < w.size(); ++j) counts[j] = total == 0 ? 0 : floats / total * w[j];
  return counts;
}

struct Rank {
  std::vector<std::size_t> send_counts, recv_counts, send_at, recv_at;
  std::vector<float> send, recv;
  std::uint64_t sent = 0;  // bytes handed to the communicator in the last run, all its calls
};

struct State {
  std::shared_ptr<RankTeam> team;
  std::vector<Rank> ranks;
  int iters = 1;  // all-to-alls per run
};

std::vector<std::size_t> offsets(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> at(counts.size() + 1, 0);
  for (std::size_t j = 0; j < counts.size(); ++j) at[j + 1] = at[j] + counts[j];
  return at;
}

std::shared_ptr<State> make_state(int ranks, std::size_t floats) {
  auto st = std::make_shared<State>();
  st->iters = collectives::iterations(floats * sizeof(float));
  st->team = std::make_shared<RankTeam>(ranks);
  const auto n = static_cast<std::size_t>(ranks);
  st->ranks.resize(n);
  st->team->run([&](Communicator& comm) {  // first touched by the rank's own thread
    const int r = comm.rank();
    Rank& me = st->ranks[static_cast<std::size_t>(r)];
    me.send_counts = send_counts_of(r, ranks, floats);
    me.recv_counts.resize(n);
    for (int j = 0; j < ranks; ++j)
      me.recv_counts[static_cast<std::size_t>(j)] =
          send_counts_of(j, ranks, floats)[static_cast<std::size_t>(r)];
    me.send_at = offsets(me.send_counts);
    me.recv_at = offsets(me.recv_counts);
    me.send.resize(me.send_at.back());
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < me.send_counts[j]; ++i)
        me.send[me.send_at[j] + i] = value_of(r, static_cast<int>(j), i);
    me.recv.assign(me.recv_at.back(), kPoison);
  });
  return st;
}

// What is wrong after the last run, over every rank ("" when nothing is).
std::string first_problem(const State& st) {
  const int ranks = static_cast<int>(st.ranks.size());
  for (int r = 0; r < ranks; ++r) {
    const Rank& me = st.ranks[static_cast<std::size_t>(r)];
    std::uint64_t model = 0;
    for (int j = 0; j < ranks; ++j) {
      const auto ju = static_cast<std::size_t>(j);
      if (j != r) model += me.send_counts[ju] * sizeof(float);
      for (std::size_t i = 0; i < me.recv_counts[ju]; ++i)
        if (me.recv[me.recv_at[ju] + i] != value_of(j, r, i))
          return fmt::format("rank {}: float {} of the block from rank {} is {}, rank {} sent {}",
                             r, i, j, me.recv[me.recv_at[ju] + i], j, value_of(j, r, i));
      for (std::size_t i = 0; i < me.send_counts[ju]; ++i)
        if (me.send[me.send_at[ju] + i] != value_of(r, j, i))
          return fmt::format("rank {}: its send buffer changed (block for rank {}, float {})", r, j,
                             i);
    }
    if (me.sent != model * static_cast<std::uint64_t>(st.iters))
      return fmt::format(
          "rank {} handed {} bytes to send/isend/sendrecv in {} all-to-alls; the model is {} "
          "each (every float for another rank once, none for itself)",
          r, me.sent, st.iters, model);
  }
  return "";
}

Trial all_to_all_v_trial(Impl impl, const Params& p, GroupCache& cache) {
  const int ranks = static_cast<int>(param_int(p, "ranks"));
  const std::size_t floats = collectives::floats_of(p);
  // One team and one set of buffers for both sides: the same threads, the same memory.
  const auto st =
      cache.get<std::shared_ptr<State>>("state", [&] { return make_state(ranks, floats); });
  const auto fn = impl == Impl::student ? &student_all_to_all_v : &all_to_all_v_pairwise;
  Trial t;
  t.reset = [st] {
    for (Rank& me : st->ranks) std::fill(me.recv.begin(), me.recv.end(), kPoison);
  };
  // A few all-to-alls per sample (as ch05/all_to_all takes them), so that waking the team's
  // threads is a small part of it.
  const int iters = st->iters;
  t.run = [st, fn, iters] {
    st->team->run([&](Communicator& comm) {
      Rank& me = st->ranks[static_cast<std::size_t>(comm.rank())];
      const std::uint64_t before = comm.bytes_sent();
      for (int it = 0; it < iters; ++it)
        fn(comm, me.send, me.send_counts, me.recv, me.recv_counts, {});
      me.sent = comm.bytes_sent() - before;
    });
  };
  t.check = [st] { return first_problem(*st); };
  // The bytes that must leave the ranks, as nccl-tests' busbw counts them.
  double leaving = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<std::size_t> counts = send_counts_of(r, ranks, floats);
    for (int j = 0; j < ranks; ++j)
      if (j != r) leaving += static_cast<double>(counts[static_cast<std::size_t>(j)]);
  }
  t.work.bytes = leaving * sizeof(float) / ranks * iters;
  if (iters > 1) t.notes["iterations"] = fmt::format("{} all-to-alls per sample", iters);
  if (static_cast<unsigned>(ranks) > hardware_threads())
    t.notes["oversubscribed"] =
        fmt::format("{} ranks on {} CPUs: ranks take turns on a core", ranks, hardware_threads());
  return t;
}

}  // namespace

}  // namespace concurdl::dp

namespace concurdl::dp::exercise_timings {

Experiment all_to_all_v() {
  return exercise_timing({.title = "all-to-all with variable counts (threads backend), student vs "
                                   "all_to_all_v_pairwise",
                          .threads_axis = "ranks",
                          .axes = {{"bytes", {"16M"}, {}, AxisKind::size, collectives::kMaxBytes}},
                          .repetitions = kRepetitions,
                          .prepare = all_to_all_v_trial});
}

}  // namespace concurdl::dp::exercise_timings
