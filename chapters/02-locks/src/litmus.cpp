// The litmus tests of litmus.hpp: two threads, a spin barrier per trial, outcomes counted after
// the join.
#include "concurdl/locks/litmus.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <thread>
#include <vector>

#include "concurdl/core/hardware.hpp"

namespace concurdl::locks {

namespace {

// Each location on its own cache line: the two threads' stores then take separate lines, as in
// the textbook tests, and the barrier's counters do not share a line with the data.
struct alignas(kCacheLine) Cell {
  std::atomic<int> v{0};
};
struct alignas(kCacheLine) Arrival {
  std::atomic<std::uint64_t> n{0};
};

struct Shared {
  Cell x, y;  // SB: x and y; MP: data (x) and flag (y)
  Arrival arrived[2];
};

// A two-thread barrier for trial n: say "I have arrived at n", wait until the other has. The
// release/acquire pair orders everything a thread did in trial n - 1 before everything the other
// does in trial n, so a load of trial n sees trial n - 1's store or a later one. Spin with pause
// a while, then yield on every check: with more threads than CPUs, the other thread needs this
// CPU to arrive at all.
constexpr unsigned kSpinsBeforeYield = 32;

void arrive_and_wait(Arrival& mine, const Arrival& other, std::uint64_t n) {
  mine.n.store(n, std::memory_order_release);
  unsigned spins = 0;
  while (other.n.load(std::memory_order_acquire) < n) {
    if (spins < kSpinsBeforeYield) {
      ++spins;
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

// xorshift32: each thread its own, so the delay costs no shared cache line.
struct Rng {
  std::uint32_t state;
  std::uint32_t below(unsigned bound) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return bound == 0 ? 0 : state % bound;
  }
};

// An empty loop the compiler keeps (a signal fence is a compiler barrier, no instruction).
void delay(std::uint32_t iterations) {
  for (std::uint32_t k = 0; k < iterations; ++k)
    std::atomic_signal_fence(std::memory_order_seq_cst);
}

// What a load of trial i saw: 1 = this trial's store, 0 = the previous trial's, 2 = neither.
std::uint8_t seen(int r, int i) {
  if (r == i) return 1;
  if (r == i - 1) return 0;
  return 2;
}

// Store buffering, thread `me`: store my location, load the other's; out[n - 1] = what I saw.
template <std::memory_order St, std::memory_order Ld>
void sb_thread(Shared& s, unsigned me, std::uint64_t trials, unsigned max_delay,
               std::uint8_t* out) {
  std::atomic<int>& mine = me == 0 ? s.x.v : s.y.v;
  std::atomic<int>& theirs = me == 0 ? s.y.v : s.x.v;
  Rng rng{0x9E3779B9u * (me + 1)};
  for (std::uint64_t n = 1; n <= trials; ++n) {
    arrive_and_wait(s.arrived[me], s.arrived[1 - me], n);
    delay(rng.below(max_delay));
    const int i = static_cast<int>(n);
    mine.store(i, St);
    const int r = theirs.load(Ld);
    out[n - 1] = seen(r, i);
  }
}

// Message passing: thread 0 writes data then flag; thread 1 reads flag (r1) then data (r2).
template <std::memory_order St>
void mp_writer(Shared& s, std::uint64_t trials, unsigned max_delay) {
  Rng rng{0x9E3779B9u};
  for (std::uint64_t n = 1; n <= trials; ++n) {
    arrive_and_wait(s.arrived[0], s.arrived[1], n);
    delay(rng.below(max_delay));
    const int i = static_cast<int>(n);
    s.x.v.store(i, St);
    s.y.v.store(i, St);
  }
}

template <std::memory_order Ld>
void mp_reader(Shared& s, std::uint64_t trials, unsigned max_delay, std::uint8_t* r1,
               std::uint8_t* r2) {
  Rng rng{0x3C6EF372u};
  for (std::uint64_t n = 1; n <= trials; ++n) {
    arrive_and_wait(s.arrived[1], s.arrived[0], n);
    delay(rng.below(max_delay));
    const int i = static_cast<int>(n);
    const int flag = s.y.v.load(Ld);
    const int data = s.x.v.load(Ld);
    r1[n - 1] = seen(flag, i);
    r2[n - 1] = seen(data, i);
  }
}

template <std::memory_order St, std::memory_order Ld>
void run_trials(LitmusTest t, std::uint64_t trials, unsigned max_delay, std::uint8_t* r1,
                std::uint8_t* r2) {
  Shared s;
  std::jthread a, b;
  if (t == LitmusTest::store_buffering) {
    a = std::jthread([&] { sb_thread<St, Ld>(s, 0, trials, max_delay, r1); });
    b = std::jthread([&] { sb_thread<St, Ld>(s, 1, trials, max_delay, r2); });
  } else {
    a = std::jthread([&] { mp_writer<St>(s, trials, max_delay); });
    b = std::jthread([&] { mp_reader<Ld>(s, trials, max_delay, r1, r2); });
  }
  a.join();
  b.join();
}

}  // namespace

std::string_view litmus_name(LitmusTest t) {
  return t == LitmusTest::store_buffering ? "store_buffering" : "message_passing";
}

std::string_view litmus_name(LitmusOrder o) {
  switch (o) {
    case LitmusOrder::relaxed:
      return "relaxed";
    case LitmusOrder::acq_rel:
      return "acq_rel";
    case LitmusOrder::seq_cst:
      return "seq_cst";
  }
  return "?";
}

std::optional<LitmusTest> parse_litmus_test(std::string_view name) {
  for (LitmusTest t : kLitmusTests)
    if (litmus_name(t) == name) return t;
  return std::nullopt;
}

std::optional<LitmusOrder> parse_litmus_order(std::string_view name) {
  for (LitmusOrder o : kLitmusOrders)
    if (litmus_name(o) == name) return o;
  return std::nullopt;
}

bool cpp_forbids(LitmusTest t, LitmusOrder o) {
  return o == LitmusOrder::seq_cst ||
         (t == LitmusTest::message_passing && o == LitmusOrder::acq_rel);
}

std::uint64_t LitmusResult::forbidden() const {
  return test == LitmusTest::store_buffering ? outcome[0][0] : outcome[1][0];
}

double LitmusResult::forbidden_per_million() const {
  return trials == 0 ? 0.0 : 1e6 * static_cast<double>(forbidden()) / static_cast<double>(trials);
}

std::uint64_t LitmusResult::counted() const {
  return outcome[0][0] + outcome[0][1] + outcome[1][0] + outcome[1][1];
}

LitmusResult run_litmus(LitmusTest t, LitmusOrder o, std::uint64_t trials, unsigned max_delay) {
  if (trials < 1 || trials > static_cast<std::uint64_t>(kMaxLitmusTrials))
    throw std::invalid_argument(
        fmt::format("run_litmus: {} trials (1 .. {})", trials, kMaxLitmusTrials));
  // Pre-zeroed, so that no page fault lands inside the trials.
  std::vector<std::uint8_t> r1(trials), r2(trials);
  const auto start = std::chrono::steady_clock::now();
  switch (o) {
    case LitmusOrder::relaxed:
      run_trials<std::memory_order_relaxed, std::memory_order_relaxed>(t, trials, max_delay,
                                                                       r1.data(), r2.data());
      break;
    case LitmusOrder::acq_rel:
      run_trials<std::memory_order_release, std::memory_order_acquire>(t, trials, max_delay,
                                                                       r1.data(), r2.data());
      break;
    case LitmusOrder::seq_cst:
      run_trials<std::memory_order_seq_cst, std::memory_order_seq_cst>(t, trials, max_delay,
                                                                       r1.data(), r2.data());
      break;
  }
  LitmusResult r{.test = t, .order = o, .trials = trials};
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::size_t n = 0; n < trials; ++n) {
    if (r1[n] > 1 || r2[n] > 1)
      ++r.impossible;
    else
      ++r.outcome[r1[n]][r2[n]];
  }
  return r;
}

std::string check_litmus(const LitmusResult& r) {
  if (r.impossible != 0)
    return fmt::format(
        "{} of {} trials had a load that saw neither this trial's store nor the previous "
        "trial's: the per-trial barrier did not order the trials",
        r.impossible, r.trials);
  if (r.counted() != r.trials)
    return fmt::format("the four outcomes add up to {} trials, not {}", r.counted(), r.trials);
  if (r.forbidden() != 0 && cpp_forbids(r.test, r.order))
    return fmt::format("{} of {} {} trials under {} showed {}, which the C++ memory model forbids",
                       r.forbidden(), r.trials, litmus_name(r.test), litmus_name(r.order),
                       r.test == LitmusTest::store_buffering ? "r1 = r2 = 0" : "r1 = 1, r2 = 0");
  return "";
}

}  // namespace concurdl::locks
