// Memory-ordering litmus tests: two threads, two shared locations, one outcome that sequential
// consistency (SC: one interleaving of both threads' program orders) forbids, run many times to
// count how often the machine shows it anyway.
//
//   store buffering (SB)            message passing (MP)
//     T0: x = 1;  r1 = y;             T0: data = 1;  flag = 1;
//     T1: y = 1;  r2 = x;             T1: r1 = flag; r2 = data;
//     SC forbids r1 == 0 && r2 == 0   SC forbids r1 == 1 && r2 == 0
//
// Each access is a std::atomic<int> with the order of the row: relaxed; acquire/release (release
// stores, acquire loads); seq_cst. What the C++ model allows: SB's outcome under relaxed and
// acquire/release (a release store may be reordered after a later acquire load of another
// location), never under seq_cst; MP's outcome under relaxed only (an acquire load that reads a
// release store sees everything written before it). What the hardware shows: x86-TSO has a
// store buffer, so a store may become visible after a later load of another location: SB shows
// up unless the store is seq_cst (xchg or mov + mfence); but x86 keeps stores in order and
// loads in order, so MP never shows up at the hardware level, even relaxed (only a compiler
// reordering the relaxed accesses could show it). ARM and POWER reorder both: relaxed shows SB
// and MP, acquire/release fixes MP (stlr/ldar), only seq_cst fixes SB.
//
// How trials are made cheaply (the approach of litmus7): two persistent threads, a two-thread
// spin barrier per trial (an arrival counter each, spinning a bounded while then yielding, so
// that an oversubscribed machine still progresses), then a small random delay so that the two
// threads' accesses overlap in time sometimes earlier, sometimes later. Trial i stores the value
// i, so nothing is reset between trials: a load returns i (this trial's store, "1" above) or
// i - 1 (the previous trial's, "0" above); the barrier makes anything else impossible, and a
// check counts it. Each thread writes its loads' outcomes to its own array (plain bytes), read
// only after both threads are joined.
//   ch02_tests --gtest_filter='Litmus*'; concurdl run ch02/litmus
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace concurdl::locks {

enum class LitmusTest { store_buffering, message_passing };
enum class LitmusOrder { relaxed, acq_rel, seq_cst };

inline constexpr std::array<LitmusTest, 2> kLitmusTests = {LitmusTest::store_buffering,
                                                           LitmusTest::message_passing};
inline constexpr std::array<LitmusOrder, 3> kLitmusOrders = {
    LitmusOrder::relaxed, LitmusOrder::acq_rel, LitmusOrder::seq_cst};

std::string_view litmus_name(LitmusTest t);
std::string_view litmus_name(LitmusOrder o);
std::optional<LitmusTest> parse_litmus_test(std::string_view name);
std::optional<LitmusOrder> parse_litmus_order(std::string_view name);

// Whether the C++ memory model forbids the test's non-SC outcome at this order (SB: seq_cst
// only; MP: acquire/release and seq_cst). Seeing it there is a wrong result, not a lesson.
bool cpp_forbids(LitmusTest t, LitmusOrder o);

// The most trials one run takes: trial numbers are the stored ints, and each trial keeps two
// outcome bytes (128 MiB at this limit, tens of seconds).
inline constexpr std::int64_t kMaxLitmusTrials = std::int64_t{1} << 26;

struct LitmusResult {
  LitmusTest test = LitmusTest::store_buffering;
  LitmusOrder order = LitmusOrder::relaxed;
  std::uint64_t trials = 0;
  // outcome[r1][r2]: 1 = the load saw this trial's store, 0 = it saw the previous trial's.
  std::array<std::array<std::uint64_t, 2>, 2> outcome{};
  std::uint64_t impossible = 0;  // trials where a load saw neither (the barrier failed)
  double seconds = 0;            // the trials, from release to join

  // The outcome SC forbids: SB r1 = r2 = 0, MP r1 = 1 and r2 = 0.
  std::uint64_t forbidden() const;
  double forbidden_per_million() const;
  std::uint64_t counted() const;  // the four outcomes together; == trials when all is well
};

// Runs `trials` trials (1 .. kMaxLitmusTrials) on two new threads. `max_delay`: each thread waits
// a random 0 .. max_delay - 1 iterations of an empty loop between the barrier and its first
// access, so that the two threads' accesses meet at varying offsets.
inline constexpr unsigned kLitmusMaxDelay = 64;
LitmusResult run_litmus(LitmusTest t, LitmusOrder o, std::uint64_t trials,
                        unsigned max_delay = kLitmusMaxDelay);

// "" when the result is consistent: every trial counted once in one of the four outcomes, no
// impossible load, and no outcome the C++ model forbids at this order; otherwise what is wrong.
std::string check_litmus(const LitmusResult& r);

}  // namespace concurdl::locks
