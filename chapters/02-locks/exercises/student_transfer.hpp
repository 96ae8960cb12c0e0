// Exercise 2.4 (chapter 02, exercises.md): fix the deadlock.
// transfer_naive in src/hazards.cpp locks the source account, then the destination; two
// transfers in opposite directions deadlock (`concurdl run ch02/hazards` shows the watchdog
// catching it). Write a transfer that cannot deadlock.
// Check it:  concurdl exercise ch02
// or faster: ch02_tests --gtest_filter='TransferEx2_4/*'
#pragma once

#include <cstdint>

#include "concurdl/core/errors.hpp"
#include "concurdl/locks/hazards.hpp"

namespace concurdl::locks {

// Move `amount` from `from` to `to` while holding BOTH accounts' locks (from.mu and to.mu are
// TrackedMutex: Lockable, so the standard guards work). Either of two classic fixes will do:
//   - take both locks at once with a standard facility that avoids deadlock, or
//   - always lock the two in one global order that does not depend on the direction of the
//     transfer (what could that order be?).
// The tests run 2 to 8 threads transferring both ways between 2 and 3 accounts, with the race
// window widened (each lock is held a little longer after it is taken), under a watchdog that
// reports a deadlock instead of hanging; the money must be conserved.
inline void student_transfer([[maybe_unused]] Account& from, [[maybe_unused]] Account& to,
                             [[maybe_unused]] std::int64_t amount) {
  CDL_TODO("2.4 fix the deadlock");
}

}  // namespace concurdl::locks
