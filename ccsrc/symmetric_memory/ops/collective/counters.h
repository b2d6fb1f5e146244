// This rank's bookkeeping of one team's collective calls, kept in the team's
// private state (hpshmem::TeamView::state): zero when the team is created, so
// every job and every team starts from zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "hpshmem/hpshmem.h"

namespace hpshmem::ops {

struct CollectiveCounters {
  int64_t epoch = 0;              // collective calls entered so far (counted alike on every member)
  int64_t expected_arrivals = 0;  // put-with-signal ADDs this rank has waited for, in total
  int64_t expected_consumed = 0;  // completed reads of this rank's buffers it has waited for
  int64_t expected_relayed = 0;   // relayed deliveries (CollectiveLayout::relayed) it has waited for
  int64_t mismatch_seen = 0;      // size-mismatch reports already raised
  // The last call after which members need not have seen every other member
  // enter it (a small broadcast): the next eager put into a member's slot
  // first waits for that member to have entered it (see PutSlot).
  int64_t loose_epoch = 0;
  int64_t spans_hosts = 0;  // 0: not looked up yet; 1: one host; 2: some member on another
};
static_assert(sizeof(CollectiveCounters) <= kTeamStateBytes && alignof(CollectiveCounters) <= 64);
static_assert(offsetof(CollectiveCounters, epoch) == 0, "the runtime's DebugState reads the first word as the calls");

// The counters of the team `view` describes. The state's zero bytes are
// zero counters: it holds nothing else.
inline CollectiveCounters* CountersOf(const TeamView& view) {
  return std::launder(static_cast<CollectiveCounters*>(view.state));
}

}  // namespace hpshmem::ops
