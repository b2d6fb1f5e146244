// Where this rank's collective is blocked, published through the runtime
// (hpshmem::PublishWords) so that a peer blocked on it can tell a wait that
// will end from a deadlock: ranks that entered the collectives of different
// teams in different orders (A waits in team X for B, which waits in team Y
// for A, which has not entered that call of Y and cannot while it waits in X).
#pragma once

#include <cstdint>

#include "hpshmem/hpshmem.h"

namespace hpshmem::ops {

struct WaitNote {
  int64_t team_hash = 0;  // TeamView::hash of the team whose call waits
  int64_t epoch = 0;      // the call waited in
  int waiting_for = -1;   // global rank waited for; -1: not blocked in a collective
};

// Publishes `note` as this rank's; WaitNote{} says it no longer waits.
void NoteWait(const WaitNote& note);

// Rank pe's note; WaitNote{} when it has none to read. Errors: as
// hpshmem::ReadPublishedWords.
Status ReadWaitNote(int pe, WaitNote* out);

// This rank's collective calls entered in its team whose member-list hash is
// `hash`; false when it has no such team (or several).
bool TeamEpochByHash(int64_t hash, int64_t* epoch);

}  // namespace hpshmem::ops
