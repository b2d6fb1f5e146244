// The steps of the epoch protocol shared by the collectives (call.h), and the
// protocol's own calls for the fused ops of the Python algorithms layer
// (CollectiveBegin ... CollectiveConsumed, ops.h).
#include "ops/collective/call.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/collective/wait_note.h"
#include "ops/reduce/reduce.h"

namespace hpshmem::ops {
namespace collective {

namespace {

thread_local std::vector<char> t_stage;  // header + payload, sent as one put

const char* DTypeName(int64_t d) {
  static const char* kNames[] = {"float32", "float64", "float16", "bfloat16", "int8",
                                 "uint8",   "int16",   "int32",   "int64"};
  return d >= 0 && d < 9 ? kNames[d] : "?";
}

const char* OpName(int64_t o) {
  static const char* kNames[] = {"sum", "avg", "max", "min", "prod"};
  return o >= 0 && o < 5 ? kNames[o] : "?";
}

std::string Describe(const char* what, int64_t count, int64_t packed) {
  std::string place = " at heap place " + std::to_string(packed >> 40);
  if (std::strcmp(what, "shmem_broadcast") == 0)
    return std::to_string(count) + " bytes from root " + std::to_string((packed >> 16) & 0xffffff) + place;
  return std::to_string(count) + " elements of " + DTypeName((packed >> 8) & 0xff) + " with op " +
         OpName(packed & 0xff) + place;
}

// Counters only grow: `expected` is the total this rank has waited for so far; wait for `n` more.
Status WaitCounter(int64_t* word, int64_t* expected, int64_t n, const char* label, int team) {
  *expected += n;
  return hpshmem::SignalWaitUntil(word, kWord, Cmp::kGe, *expected, nullptr, label, team);
}

thread_local std::vector<Scratch> t_fetched;
thread_local std::vector<const void*> t_srcs;  // one source per rank: too many for the stack at large W

}  // namespace

Status Open(CollectiveCall* call, int team) {
  TeamView view;
  HPSHMEM_RETURN_IF_ERROR(GetTeam(team, &view));
  void* base = nullptr;
  HPSHMEM_RETURN_IF_ERROR(CollectiveWorkspace(&base));
  if (team == kTeamWorld && TeamBlockWords(view.size) * sizeof(int64_t) > kWorkspaceBytes) {
    return Status::Unsupported("collectives support up to " +
                               std::to_string((kWorkspaceBytes / sizeof(int64_t) - 4) / 3) + " ranks (workspace of " +
                               std::to_string(kWorkspaceBytes) + " bytes)");
  }
  call->workspace = static_cast<char*>(base);
  call->layout = LayoutAt(reinterpret_cast<int64_t*>(call->workspace + view.block[view.me]), view.size);
  call->counters = CountersOf(view);
  call->me = view.me;
  call->members = view.size;
  call->team = team;
  call->hash = view.hash;
  call->pes = view.pes;
  call->block = view.block;
  call->slot_bytes = EagerSlotBytes(view.size);
  // Mapping follows the host and never changes: looked up on the team's first call only.
  if (call->counters->spans_hosts == 0) {
    bool spans = false;
    for (int p = 0; p < view.size && !spans; ++p) spans = p != view.me && !hpshmem::Ptr(call->workspace, view.pes[p]);
    call->counters->spans_hosts = spans ? 2 : 1;
  }
  call->eager_bytes = SpansHosts(*call) ? call->slot_bytes : LocalEagerBytes(view.size);
  return Status::OK();
}

std::string Members(const CollectiveCall& call) {
  std::string s = "[";
  for (int p = 0; p < call.members && p < 16; ++p) s += (p ? ", " : "") + std::to_string(call.GlobalRank(p));
  return s + (call.members > 16 ? ", ...]" : "]");
}

Status Begin(const CollectiveCall& call, int64_t* epoch) {
  const int64_t next = ++call.counters->epoch;
  for (int k = 0; k < call.members; ++k) {  // ourselves included: code may wait on any rank uniformly
    int p = (call.me + k) % call.members;
    HPSHMEM_RETURN_IF_ERROR(
        Signal(call.AtMember(p, call.layout.ready + call.me), kWord, next, SignalOp::kSet, call.GlobalRank(p)));
  }
  *epoch = next;
  return Status::OK();
}

// A wait for a peer to enter a call is where ranks that called the
// collectives of different teams in different orders block for good; past
// kProbeAfterMs it publishes itself (NoteWait) and looks at what the peer
// waits for: the peer waiting for this rank in another team's call that this
// rank has not entered is a deadlock, reported at once on both ranks instead
// of after the timeout.
Status WaitReady(const CollectiveCall& call, int peer, int64_t epoch) {
  std::string label = "collective ready[" + std::to_string(peer) + "]";
  bool noted = false;
  auto probe = [&]() -> Status {
    if (!noted) {
      NoteWait({call.hash, epoch, call.GlobalRank(peer)});
      noted = true;
    }
    WaitNote theirs;
    // A peer that cannot be read (it died) is the wait loop's to report, in its own words.
    if (!ReadWaitNote(call.GlobalRank(peer), &theirs).ok()) return Status::OK();
    int64_t mine = 0;
    if (theirs.waiting_for != call.GlobalRank(call.me) || theirs.team_hash == call.hash ||
        !TeamEpochByHash(theirs.team_hash, &mine) || mine >= theirs.epoch)
      return Status::OK();
    return Status::CollectiveMismatch(
        "ranks entered the collectives of different groups in different orders: rank " +
        std::to_string(call.GlobalRank(call.me)) + " waits for rank " + std::to_string(call.GlobalRank(peer)) +
        " in call #" + std::to_string(epoch) + " of group " + Members(call) + ", while rank " +
        std::to_string(call.GlobalRank(peer)) + " waits for rank " + std::to_string(call.GlobalRank(call.me)) +
        " in call #" + std::to_string(theirs.epoch) +
        " of another group (the groups' collectives are now out of "
        "step: end the job)");
  };
  Status s =
      hpshmem::SignalWaitUntilProbed(call.layout.ready + peer, kWord, Cmp::kGe, epoch, label.c_str(), call.team, probe);
  // After a deadlock the note stays: the peer may not have read it yet, and
  // this call stays unfinished for good.
  if (noted && s.code() != Code::kCollectiveMismatch) NoteWait({});
  return s;
}

Status WaitArrivals(const CollectiveCall& call, int64_t n) {
  return WaitCounter(call.layout.arrivals, &call.counters->expected_arrivals, n, "collective arrivals", call.team);
}

Status WaitConsumed(const CollectiveCall& call, int64_t extra) {
  return WaitCounter(call.layout.consumed, &call.counters->expected_consumed, extra, "collective consumed", call.team);
}

bool PlanHosts(const CollectiveCall& call, HostPlan* plan) {
  plan->hosts.clear();
  plan->host_of.assign(call.members, -1);
  plan->index_of.assign(call.members, -1);
  thread_local std::unordered_map<int, size_t> index;  // host leader -> its host's place in `hosts`
  index.clear();
  for (int p = 0; p < call.members; ++p) {
    const int leader = hpshmem::HostLeader(call.GlobalRank(p));
    if (leader < 0) return false;
    const auto [it, added] = index.emplace(leader, plan->hosts.size());
    const size_t h = it->second;
    if (added) plan->hosts.emplace_back();
    plan->host_of[p] = static_cast<int>(h);
    plan->index_of[p] = static_cast<int>(plan->hosts[h].size());
    plan->hosts[h].push_back(p);
  }
  return true;
}

Status WaitRelayed(const CollectiveCall& call, int64_t n) {
  return WaitCounter(call.layout.relayed, &call.counters->expected_relayed, n, "collective relayed", call.team);
}

Status Relayed(const CollectiveCall& call, int peer) {
  return Signal(call.AtMember(peer, call.layout.relayed), kWord, 1, SignalOp::kAdd, call.GlobalRank(peer));
}

Status Consumed(const CollectiveCall& call, int peer) {
  return Signal(call.AtMember(peer, call.layout.consumed), kWord, 1, SignalOp::kAdd, call.GlobalRank(peer));
}

Status CopyChunksAsTheyArrive(const CollectiveCall& call, char* data, size_t bytes, size_t chunk, int source) {
  for (size_t off = 0; off < bytes; off += chunk) {
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, 1));
    HPSHMEM_RETURN_IF_ERROR(
        hpshmem::GetMem(data + off, data + off, std::min(chunk, bytes - off), call.GlobalRank(source)));
  }
  return Consumed(call, source);
}

Status AllConsumed(const CollectiveCall& call) {
  for (int p = 0; p < call.members; ++p)
    if (p != call.me) HPSHMEM_RETURN_IF_ERROR(Consumed(call, p));
  return WaitConsumed(call, call.members - 1);
}

Status PutSlot(const CollectiveCall& call, int p, const EagerHeader& header, const void* data, size_t bytes) {
  // Two slots per sender suffice because a sender in call e knows that every
  // member entered e - 1 (so is done with the slot of e - 2) — unless e - 1
  // was a small broadcast, whose members wait for nobody but the root.
  if (call.counters->loose_epoch == header.epoch - 1) HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, header.epoch - 1));
  size_t total = kEagerHeaderBytes + bytes;
  if (t_stage.size() < total) t_stage.resize(kEagerHeaderBytes + call.slot_bytes);
  std::memcpy(t_stage.data(), &header, sizeof header);
  if (bytes) std::memcpy(t_stage.data() + kEagerHeaderBytes, data, bytes);
  return hpshmem::PutMemSignal(call.Slot(p, call.me, header.epoch), t_stage.data(), total,
                               call.AtMember(p, call.layout.ready + call.me), kWord, header.epoch, SignalOp::kSet,
                               call.GlobalRank(p));
}

int64_t Place(const CollectiveCall& call, const void* buffer) {
  auto off = static_cast<uint64_t>(static_cast<const char*>(buffer) - call.workspace);
  return static_cast<int64_t>((off ^ (off >> 23) ^ (off >> 46)) & 0x7fffff);
}

// Every rank compares every rank's words for call `epoch`, so all reach the
// same verdict. A member that began the call eagerly sent its words in its
// slot's header instead (ReduceEager, BroadcastEager): a header of this epoch
// says so. On a mismatch nobody leaves before everyone has read the words (a
// rank gone ahead would overwrite them), then all fail alike.
Status Agree(const CollectiveCall& call, int64_t epoch, int64_t count, int64_t packed, const char* what) {
  int bad = -1;
  int64_t theirs[2] = {0, 0};
  for (int p = 0; p < call.members; ++p) {
    if (p == call.me) continue;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    const EagerHeader& slot = SlotHeader(call, p, epoch);
    const bool eager = slot.epoch == epoch;
    // Read now: once the sync below is done, p may overwrite them.
    const int64_t words[2] = {eager ? slot.count : call.layout.place[2 * p],
                              eager ? slot.place : call.layout.place[2 * p + 1]};
    if (bad < 0 && (words[0] != count || words[1] != packed)) {
      bad = p;
      theirs[0] = words[0];
      theirs[1] = words[1];
    }
  }
  if (bad < 0) return Status::OK();
  HPSHMEM_RETURN_IF_ERROR(AllConsumed(call));
  return Status::CollectiveMismatch(std::string(what) + ": ranks disagree: rank " + std::to_string(call.me) +
                                    " passes " + Describe(what, count, packed) + ", rank " + std::to_string(bad) + " " +
                                    Describe(what, theirs[0], theirs[1]));
}

Status BeginAgreed(const CollectiveCall& call, int64_t* epoch, int64_t count, int64_t packed, const char* what) {
  HPSHMEM_RETURN_IF_ERROR(BeginPlaced(call, epoch, [&](int, int64_t* words) {
    words[0] = count;
    words[1] = packed;
  }));
  return Agree(call, *epoch, count, packed, what);
}

Status ReduceRange(const CollectiveCall& call, const char* data, size_t lo, size_t hi, size_t item, DType dtype,
                   ReduceOp op, void* out) {
  size_t bytes = (hi - lo) * item;
  if (t_fetched.size() < static_cast<size_t>(call.members)) t_fetched.resize(call.members);
  if (t_srcs.size() < static_cast<size_t>(call.members)) t_srcs.resize(call.members);
  const void** srcs = t_srcs.data();
  for (int p = 0; p < call.members; ++p) {
    const char* local = data + lo * item;
    if (void* direct = hpshmem::Ptr(local, call.GlobalRank(p))) {
      srcs[p] = direct;
    } else {
      char* buf = t_fetched[p].Get(bytes);
      HPSHMEM_RETURN_IF_ERROR(hpshmem::GetMem(buf, local, bytes, call.GlobalRank(p)));
      srcs[p] = buf;
    }
  }
  return ReduceInto(out, srcs, call.members, hi - lo, dtype, op, call.members);
}

Status EagerDisagreement(const CollectiveCall& call, int64_t epoch, int64_t count, int64_t packed, const char* what) {
  // Every member that came the eager way sees a disagreement too (each reads
  // every member's header); Agree names it (from headers or place words) and
  // meets the members of the announced path.
  HPSHMEM_RETURN_IF_ERROR(Agree(call, epoch, count, packed, what));
  HPSHMEM_RETURN_IF_ERROR(AllConsumed(call));
  return Status::CollectiveMismatch(std::string(what) + ": rank " + std::to_string(call.GlobalRank(call.me)) +
                                    " and a peer entered different collectives or chose different algorithms");
}

Status AwaitEager(const CollectiveCall& call, int64_t count, int64_t packed, int64_t epoch, const char* what) {
  const int me = call.me, members = call.members;
  HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + me, kWord, epoch, SignalOp::kSet, call.GlobalRank(me)));
  bool agreed = true;
  for (int k = 1; k < members; ++k) {
    int p = (me + k) % members;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    const EagerHeader& got = SlotHeader(call, p, epoch);
    agreed &= got.epoch == epoch && got.count == count && got.place == packed;
  }
  return agreed ? Status::OK() : EagerDisagreement(call, epoch, count, packed, what);
}

Status ReduceEager(const CollectiveCall& call, const char* in, size_t stride, size_t count, DType dtype, ReduceOp op,
                   int64_t call_count, int64_t packed, void* out, const char* what) {
  const int members = call.members;
  int64_t epoch;
  const size_t bytes = count * DTypeSize(dtype);
  HPSHMEM_RETURN_IF_ERROR(
      ExchangeEager(call, call_count, packed, [&](int p) { return Piece{in + p * stride, bytes}; }, &epoch, what));
  if (t_srcs.size() < static_cast<size_t>(members)) t_srcs.resize(members);
  for (int p = 0; p < members; ++p) t_srcs[p] = p == call.me ? in + p * stride : SlotData(call, p, epoch);
  // The slots stay as they are until call e + 2, which no peer starts before
  // this rank entered e + 1.
  return ReduceInto(out, t_srcs.data(), members, count, dtype, op, members);
}

}  // namespace collective

using collective::CollectiveCall;
using collective::Open;

Status CollectiveBegin(int64_t* epoch, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  return collective::Begin(call, epoch);
}

Status CollectiveEpoch(int64_t* epoch, int team) {
  TeamView view;
  HPSHMEM_RETURN_IF_ERROR(GetTeam(team, &view));
  *epoch = CountersOf(view)->epoch;
  return Status::OK();
}

Status EagerLimit(int team, size_t* bytes) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  *bytes = call.eager_bytes;
  return Status::OK();
}

Status CollectiveWaitReady(int peer, int64_t epoch, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  if (peer < 0 || peer >= call.members) return Status::InvalidArgument("CollectiveWaitReady: peer out of range");
  return collective::WaitReady(call, peer, epoch);
}

Status CollectiveWaitArrivals(int64_t n, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  return collective::WaitArrivals(call, n);
}

Status CollectiveWaitConsumed(int64_t extra, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  return collective::WaitConsumed(call, extra);
}

Status CollectiveConsumed(int peer, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  return collective::Consumed(call, peer);
}

}  // namespace hpshmem::ops
