#include "ops/collective/wait_note.h"

#include "ops/collective/counters.h"

namespace hpshmem::ops {

void NoteWait(const WaitNote& note) { PublishWords({note.team_hash, note.epoch, note.waiting_for}); }

Status ReadWaitNote(int pe, WaitNote* out) {
  *out = WaitNote{};
  int64_t words[kPublishedWords] = {};
  bool published = false;
  HPSHMEM_RETURN_IF_ERROR(ReadPublishedWords(pe, words, &published));
  if (published) *out = WaitNote{words[0], words[1], static_cast<int>(words[2])};
  return Status::OK();
}

bool TeamEpochByHash(int64_t hash, int64_t* epoch) {
  int team = -1;
  TeamView view;
  if (!FindTeamByHash(hash, &team) || !GetTeam(team, &view).ok()) return false;
  *epoch = CountersOf(view)->epoch;
  return true;
}

}  // namespace hpshmem::ops
