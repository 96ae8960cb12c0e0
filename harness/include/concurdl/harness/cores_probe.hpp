// Whether the CPUs this process may use are each a core right now. The host of a VM can give
// two of its vCPUs one physical core for a while (SMT siblings, or one core time-shared): both
// then run at about half speed, and no /proc counter shows it (the guest sees no steal). The
// calibration measures the FMA peak on 1 and on all CPUs and says `cores_short` when they
// disagree; this probe asks the same question, in a few milliseconds, around each group of
// configurations a run measures, so that a record timed in such a stretch says so in its notes
// ("cores_short") and a claim judged on it says where to look.
#pragma once

#include <cstdint>
#include <string>

namespace concurdl {

// The calibration's FMA kernel: kFmaChains independent chains of one vector register each
// (kFmaLanes floats: 16 with AVX-512, else 8), enough to cover FMA latency x FMA pipes, so one
// thread saturates its core's FMA units and two threads on one core get half each. Returns the
// chains' sum (so the work cannot be dropped); 2 x kFmaChains x kFmaLanes FLOP an iteration.
#if defined(__AVX512F__)
inline constexpr int kFmaLanes = 16;
#else
inline constexpr int kFmaLanes = 8;
#endif
inline constexpr int kFmaChains = 12;
float fma_chains(std::int64_t iterations, float seed);

// How many times one thread's FMA rate `threads` threads reach at once, each running the kernel
// for about `seconds` (one thread alone first, then all together, from a common start to the
// last finish); the best of `tries`, so that one interrupt does not make a false alarm. Near
// `threads` when each thread has a core, near 1 when they share one.
double cores_probe_ratio(int threads, double seconds = 0.004, int tries = 3);

// Below this fraction of `threads`, the threads did not get a core each (1.5 of 2).
inline constexpr double kCoresShortFraction = 0.75;

// What a group of records measured between two probes carries in its notes: "" when both
// ratios reach kCoresShortFraction of `threads`, else one sentence naming them.
std::string cores_short_note(double before, double after, int threads);

}  // namespace concurdl
