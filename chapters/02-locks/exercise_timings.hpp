// The timed halves of chapter 02's exercises: each builds the experiment that times the
// student's code against its reference row, in the file that measures that row
// (experiments_locks.cpp, experiments_queues.cpp, experiments_hazards.cpp). exercises.cpp
// registers the exercises.
#pragma once

#include "concurdl/harness/experiment.hpp"

namespace concurdl::locks::exercise_timings {

Experiment ttas_backoff();    // 2.1: StudentTtasBackoffLock vs v3_ttas_backoff
Experiment ticket();          // 2.2: StudentTicketLock vs v4_ticket
Experiment blocking_queue();  // 2.3: the student's bounded blocking queue vs v1_blocking_queue
Experiment treiber_stack();   // 2.5: the student's Treiber stack vs the reference
Experiment transfers();       // 2.4: the student's deadlock-free transfers vs std::scoped_lock

}  // namespace concurdl::locks::exercise_timings
