// Teams: ordered subsets of the ranks with their own collective words.
//
// Workspace layout (byte offsets from the workspace base, zero at Init):
//   [0, world)            the world team's block, TeamBlockBytes(nranks)
//   [mailbox, +40*nranks) one mailbox per sender rank: {offset, hash, size,
//                         hello, verdict}, written only by that sender
//   [note, +32)           this rank's published words: {seq, word 0, 1, 2}
//   [arena, end)          the other teams' blocks, allocated per rank
//
// Why mailboxes: members of a new team must learn where each other keeps the
// team's words without any rank outside the team taking part (torch's groups
// and OpenSHMEM's splits are created by their members, in an order only the
// members share). A member allocates its block locally and tells every other
// member where, in that member's mailbox slot for it. Each pair counts the
// creations and destructions it shares (`team_pair_seq`), so "hello" and
// "verdict" are GE comparisons against a count that only grows: nothing is
// ever reset, and a slot is rewritten only after its reader has read it (a
// member sends the next hello only after every verdict of the last creation,
// which its peers send after reading their hellos).
#include <cstring>
#include <iterator>

#include "runtime.h"

namespace hpshmem {
namespace {

constexpr size_t kMailboxWords = 5;  // off, hash, size, hello, verdict
constexpr size_t kAlign = 64;

size_t RoundUp(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }
size_t WorldBytes(int n) { return TeamBlockBytes(n); }
size_t MailboxOffset(int nranks) { return WorldBytes(nranks); }
size_t NoteOffset(int nranks) {
  return RoundUp(MailboxOffset(nranks) + static_cast<size_t>(nranks) * kMailboxWords * sizeof(int64_t));
}
size_t ArenaOffset(int nranks) { return NoteOffset(nranks) + kAlign; }

int64_t* Mailbox(Runtime* rt, int sender) {
  return reinterpret_cast<int64_t*>(rt->sym_base + MailboxOffset(rt->nranks)) + sender * kMailboxWords;
}

// The member list as one word, so that members can compare lists in a message.
int64_t HashMembers(const int* pes, int n) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the ranks, in order
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  mix(static_cast<uint64_t>(n));
  for (int i = 0; i < n; ++i) mix(static_cast<uint64_t>(pes[i]));
  return static_cast<int64_t>(h >> 1);  // non-negative: signal words compare signed
}

std::string Describe(const int* pes, int n) {
  std::string s = "[";
  for (int i = 0; i < n && i < 16; ++i) s += (i ? ", " : "") + std::to_string(pes[i]);
  if (n > 16) s += ", ... (" + std::to_string(n) + " ranks)";
  return s + "]";
}

// First fit in the arena; under team_mu.
bool ArenaAlloc(Runtime* rt, size_t bytes, size_t* off) {
  for (auto it = rt->team_free.begin(); it != rt->team_free.end(); ++it) {
    if (it->second < bytes) continue;
    *off = it->first;
    size_t left = it->second - bytes;
    rt->team_free.erase(it);
    if (left) rt->team_free[*off + bytes] = left;
    return true;
  }
  return false;
}

void ArenaFree(Runtime* rt, size_t off, size_t bytes) {
  auto next = rt->team_free.lower_bound(off);
  if (next != rt->team_free.end() && off + bytes == next->first) {  // merge with the range after
    bytes += next->second;
    next = rt->team_free.erase(next);
  }
  if (next != rt->team_free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {  // and with the one before
      prev->second += bytes;
      return;
    }
  }
  rt->team_free[off] = bytes;
}

TeamState* Lookup(Runtime* rt, int team) {
  std::lock_guard<std::mutex> lk(rt->team_mu);
  if (team < 0 || static_cast<size_t>(team) >= rt->teams.size()) return nullptr;
  return rt->teams[team].get();
}

// One exchange among the members of `pes` other than this rank: sends `words`
// (3 words, or none) and a hello numbered by the pair's count, then reads each
// member's. `check(i, theirs)` judges member i's words; then every member
// sends and collects verdicts, so that a member that found a disagreement
// fails everyone. Returns the first disagreement seen here or reported.
template <class Check>
Status Exchange(Runtime* rt, const int* pes, int n, const int64_t* words, const std::vector<uint8_t>& scope,
                const char* what, Check&& check) {
  const int me = rt->rank;
  std::vector<int64_t> seq(n, 0);
  {
    std::lock_guard<std::mutex> lk(rt->team_mu);
    for (int i = 0; i < n; ++i)
      if (pes[i] != me) seq[i] = ++rt->team_pair_seq[pes[i]];
  }
  int64_t* mine = Mailbox(rt, me);  // our slot, at the same offset on every peer
  for (int i = 0; i < n; ++i) {
    if (pes[i] == me) continue;
    if (words) {
      HPSHMEM_RETURN_IF_ERROR(
          PutMemSignal(mine, words, 3 * sizeof(int64_t), mine + 3, SignalType::kInt64, seq[i], SignalOp::kSet, pes[i]));
    } else {
      HPSHMEM_RETURN_IF_ERROR(Signal(mine + 3, SignalType::kInt64, seq[i], SignalOp::kSet, pes[i]));
    }
  }
  std::string bad;
  for (int i = 0; i < n; ++i) {
    if (pes[i] == me) continue;
    int64_t* slot = Mailbox(rt, pes[i]);
    std::string label = std::string(what) + ": hello from rank " + std::to_string(pes[i]);
    int64_t seen = 0;
    HPSHMEM_RETURN_IF_ERROR(
        WaitSignal(rt, slot + 3, SignalType::kInt64, Cmp::kGe, seq[i], &seen, label.c_str(), &scope));
    if (seen != seq[i] && bad.empty()) {
      bad = "rank " + std::to_string(pes[i]) + " has created or destroyed " + std::to_string(seen - seq[i]) +
            " more team(s) shared with rank " + std::to_string(me) +
            " than this rank (teams must be created in "
            "the same order on their members)";
    }
    if (bad.empty()) {
      int64_t theirs[3];
      for (int k = 0; k < 3; ++k) theirs[k] = std::atomic_ref<int64_t>(slot[k]).load(std::memory_order_acquire);
      bad = check(i, theirs);
    }
  }
  for (int i = 0; i < n; ++i) {
    if (pes[i] == me) continue;
    HPSHMEM_RETURN_IF_ERROR(
        Signal(mine + 4, SignalType::kInt64, 2 * seq[i] + (bad.empty() ? 0 : 1), SignalOp::kSet, pes[i]));
  }
  std::string reported;
  for (int i = 0; i < n; ++i) {
    if (pes[i] == me) continue;
    int64_t v = 0;
    std::string label = std::string(what) + ": verdict of rank " + std::to_string(pes[i]);
    HPSHMEM_RETURN_IF_ERROR(
        WaitSignal(rt, Mailbox(rt, pes[i]) + 4, SignalType::kInt64, Cmp::kGe, 2 * seq[i], &v, label.c_str(), &scope));
    if ((v & 1) && reported.empty()) reported = std::to_string(pes[i]);
  }
  if (!bad.empty()) return Status::CollectiveMismatch(std::string(what) + ": " + bad);
  if (!reported.empty())
    return Status::CollectiveMismatch(std::string(what) + ": rank " + reported +
                                      " found that the members disagree on the team");
  return Status::OK();
}

}  // namespace

// The words, 3n + 4 int64 rounded up to 64 bytes, then the slots: 2n of 64
// bytes and a payload that keeps them near 128 KiB per parity, up to 2048
// members (ops/collective/team_block.h lays them out).
size_t TeamBlockBytes(int members) {
  const size_t n = static_cast<size_t>(members);
  size_t payload = 32768;
  while (payload >= 64 && payload * n > 131072) payload /= 2;
  const size_t words = (3 * n + 4 + 7) / 8 * 8;
  return RoundUp((words + (payload >= 64 ? 2 * n * (64 + payload) / 8 : 0)) * sizeof(int64_t));
}

void InitTeams(Runtime* rt) {
  auto world = std::make_unique<TeamState>();
  world->pes.resize(rt->nranks);
  for (int r = 0; r < rt->nranks; ++r) world->pes[r] = r;
  world->block.assign(rt->nranks, 0);
  world->member.assign(rt->nranks, 1);
  world->me = rt->rank;
  world->hash = HashMembers(world->pes.data(), rt->nranks);
  rt->teams.clear();
  rt->teams.push_back(std::move(world));
  rt->team_pair_seq.assign(rt->nranks, 0);
  rt->team_free.clear();
  size_t arena = ArenaOffset(rt->nranks);
  if (arena < kWorkspaceBytes) rt->team_free[arena] = kWorkspaceBytes - arena;
}

const std::vector<uint8_t>* TeamScope(Runtime* rt, int team) {
  if (team == kTeamWorld || team < 0) return nullptr;
  TeamState* t = Lookup(rt, team);
  return t ? &t->member : nullptr;
}

Status GetTeam(int team, TeamView* out) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("GetTeam");
  TeamState* t = Lookup(rt, team);
  if (!t) return Status::InvalidArgument("team id " + std::to_string(team) + " names no live team");
  out->size = static_cast<int>(t->pes.size());
  out->me = t->me;
  out->pes = t->pes.data();
  out->block = t->block.data();
  out->state = t->state;
  out->hash = t->hash;
  return Status::OK();
}

// The record is a seqlock: odd while being written, so a reader (which may
// be a get from another host) retries rather than mixing two records.
void PublishWords(const int64_t (&words)[kPublishedWords]) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt || ArenaOffset(rt->nranks) > kWorkspaceBytes) return;
  auto* w = reinterpret_cast<int64_t*>(rt->sym_base + NoteOffset(rt->nranks));
  std::atomic_ref<int64_t> seq(w[0]);
  int64_t s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int k = 0; k < kPublishedWords; ++k)
    std::atomic_ref<int64_t>(w[1 + k]).store(words[k], std::memory_order_relaxed);
  seq.store(s + 2, std::memory_order_release);
}

Status ReadPublishedWords(int pe, int64_t (&words)[kPublishedWords], bool* published) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("ReadPublishedWords");
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, "ReadPublishedWords"));
  *published = false;
  if (ArenaOffset(rt->nranks) > kWorkspaceBytes) return Status::OK();
  auto* local = reinterpret_cast<int64_t*>(rt->sym_base + NoteOffset(rt->nranks));
  for (int attempt = 0; attempt < 8; ++attempt) {
    int64_t v[4], again = -1;
    if (auto* direct = static_cast<int64_t*>(Ptr(local, pe))) {
      v[0] = std::atomic_ref<int64_t>(direct[0]).load(std::memory_order_acquire);
      for (int k = 1; k < 4; ++k) v[k] = std::atomic_ref<int64_t>(direct[k]).load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      again = std::atomic_ref<int64_t>(direct[0]).load(std::memory_order_relaxed);
    } else {  // word by word with atomic reads (a fetching add of 0) the target makes
      for (int k = 0; k < 4; ++k)
        HPSHMEM_RETURN_IF_ERROR(AtomicFetch(local + k, SignalType::kInt64, 0, SignalOp::kAdd, pe, &v[k]));
      HPSHMEM_RETURN_IF_ERROR(AtomicFetch(local, SignalType::kInt64, 0, SignalOp::kAdd, pe, &again));
    }
    if ((v[0] & 1) || again != v[0]) continue;
    for (int k = 0; k < kPublishedWords; ++k) words[k] = v[1 + k];
    *published = true;
    return Status::OK();
  }
  return Status::OK();  // always being rewritten: nothing to read
}

bool FindTeamByHash(int64_t hash, int* team) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return false;
  std::lock_guard<std::mutex> lk(rt->team_mu);
  int found = 0;
  for (size_t id = 0; id < rt->teams.size(); ++id) {
    if (rt->teams[id] && rt->teams[id]->hash == hash) {
      ++found;
      *team = static_cast<int>(id);
    }
  }
  return found == 1;
}

Status TeamCreate(const int* pes, int n, int* team) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("TeamCreate");
  const char* what = "team creation";
  if (n < 1 || !pes) return Status::InvalidArgument("team creation: the member list is empty");
  auto t = std::make_unique<TeamState>();
  t->member.assign(rt->nranks, 0);
  for (int i = 0; i < n; ++i) {
    if (pes[i] < 0 || pes[i] >= rt->nranks)
      return Status::InvalidArgument("team creation: rank " + std::to_string(pes[i]) + " is out of range [0, " +
                                     std::to_string(rt->nranks) + ")");
    if (t->member[pes[i]])
      return Status::InvalidArgument("team creation: rank " + std::to_string(pes[i]) + " is listed twice");
    t->member[pes[i]] = 1;
    if (pes[i] == rt->rank) t->me = i;
  }
  if (t->me < 0)
    return Status::InvalidArgument("team creation: rank " + std::to_string(rt->rank) + " is not in the member list " +
                                   Describe(pes, n) + " (only members create a team)");
  for (int i = 0; i < n; ++i) HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pes[i], what));
  t->pes.assign(pes, pes + n);
  t->block.assign(n, 0);
  t->own_bytes = TeamBlockBytes(n);
  size_t off = 0;
  bool room;
  {
    std::lock_guard<std::mutex> lk(rt->team_mu);
    room = ArenaAlloc(rt, t->own_bytes, &off);
  }
  // Nobody writes these words before reading our hello, sent below.
  if (room) std::memset(rt->sym_base + off, 0, t->own_bytes);
  t->block[t->me] = static_cast<int64_t>(off);
  const int64_t hash = HashMembers(pes, n);
  t->hash = hash;
  // Without room the hello still goes out (offset -1): members' workspaces
  // fill at different rates, and every member must learn that the team fails.
  const int64_t words[3] = {room ? static_cast<int64_t>(off) : -1, hash, n};
  int no_room = room ? -1 : rt->rank;
  Status s = Exchange(rt, pes, n, words, t->member, what, [&](int i, const int64_t* theirs) -> std::string {
    if (theirs[1] == hash && theirs[2] == n) {
      if (theirs[0] < 0 && no_room < 0) no_room = pes[i];
      t->block[i] = theirs[0];
      return "";
    }
    return "rank " + std::to_string(rt->rank) + " creates the team " + Describe(pes, n) + ", but rank " +
           std::to_string(pes[i]) + " a different one (" + std::to_string(theirs[2]) +
           " ranks; the same ranks in another order also differ)";
  });
  std::lock_guard<std::mutex> lk(rt->team_mu);
  if (s.ok() && no_room >= 0) {
    s = Status::OutOfMemory("team creation: rank " + std::to_string(no_room) + " has no room for a team of " +
                            std::to_string(n) + " ranks in its collective workspace (" +
                            std::to_string(kWorkspaceBytes) +
                            " bytes, shared by its live teams); destroy teams "
                            "no longer used");
  }
  if (!s.ok()) {
    if (room) ArenaFree(rt, off, t->own_bytes);
    return s;
  }
  size_t id = 1;
  while (id < rt->teams.size() && rt->teams[id]) ++id;
  if (id == rt->teams.size()) rt->teams.emplace_back();
  rt->teams[id] = std::move(t);
  *team = static_cast<int>(id);
  return Status::OK();
}

Status TeamDestroy(int team) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("TeamDestroy");
  if (team == kTeamWorld) return Status::InvalidArgument("the world team cannot be destroyed");
  TeamState* t = Lookup(rt, team);
  if (!t) return Status::InvalidArgument("team id " + std::to_string(team) + " names no live team");
  // Our updates to the members' words land before they may reuse them.
  HPSHMEM_RETURN_IF_ERROR(rt->QuietAll());
  HPSHMEM_RETURN_IF_ERROR(Exchange(rt, t->pes.data(), static_cast<int>(t->pes.size()), nullptr, t->member,
                                   "team destruction", [](int, const int64_t*) { return std::string(); }));
  std::lock_guard<std::mutex> lk(rt->team_mu);
  ArenaFree(rt, static_cast<size_t>(t->block[t->me]), t->own_bytes);
  rt->teams[team].reset();
  return Status::OK();
}

}  // namespace hpshmem
