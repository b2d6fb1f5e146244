// One collective call of a team, and the steps of the epoch protocol (ops.h)
// that the collectives (ops/allgather, ops/alltoall, ops/allreduce,
// ops/reduce_scatter, ops/broadcast, ops/team_barrier) share. Indices p are
// team ranks; every Status is the runtime's, carried up unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/collective/counters.h"
#include "ops/collective/team_block.h"
#include "ops/ops.h"

namespace hpshmem::ops::collective {

constexpr SignalType kWord = SignalType::kInt64;

// What one collective call needs, looked up once per call rather than per step.
struct CollectiveCall {
  // The team's arrays and the workspace below belong to the runtime: a
  // Finalize on another thread must not release them under this call. Every
  // signal of a collective is waited for by its receiver (CollectiveScope).
  CollectiveScope scope;
  CollectiveLayout layout;  // this rank's block of the team
  CollectiveCounters* counters = nullptr;
  int me = 0, members = 0, team = kTeamWorld;
  int64_t hash = 0;
  const int* pes = nullptr;
  const int64_t* block = nullptr;
  char* workspace = nullptr;  // workspace base (the symmetric range starts with it)
  size_t slot_bytes = 0;      // EagerSlotBytes(members): payload a slot holds
  // The largest piece a call sends eagerly: the whole slot when the team
  // spans hosts, LocalEagerBytes(members) within one (the same on every member).
  size_t eager_bytes = 0;

  int GlobalRank(int p) const { return pes[p]; }
  // Member p's copy of `word`, one of this rank's layout words (a team's
  // block may sit at a different workspace offset on each member; the
  // world's never does), as a symmetric address.
  int64_t* AtMember(int p, int64_t* word) const {
    return reinterpret_cast<int64_t*>(reinterpret_cast<char*>(word) + (block[p] - block[me]));
  }
  // Member `holder`'s slot for sender `from` in call `epoch`, as a symmetric
  // address (a put's target at `holder`, or read here when holder == me).
  char* Slot(int holder, int from, int64_t epoch) const {
    size_t i = static_cast<size_t>(epoch & 1) * members + from;
    return workspace + block[holder] + TeamWordsBeforeEager(members) * sizeof(int64_t) +
           i * (kEagerHeaderBytes + slot_bytes);
  }
};

// Fills `call` for the team's next call. Errors: kNotInitialized;
// kInvalidArgument for an unknown team; kUnsupported past the ranks the
// workspace holds (world).
Status Open(CollectiveCall* call, int team);

// The team's global ranks, for messages: "[3, 1]".
std::string Members(const CollectiveCall& call);

// Enters the next call: *epoch = its number, announced to every member (this one too).
Status Begin(const CollectiveCall& call, int64_t* epoch);

// Begin whose announcement to each member p carries the two words
// place_for(p, words) (see CollectiveLayout::place). Defined here: the
// callback runs once per member.
template <class PlaceFor>
Status BeginPlaced(const CollectiveCall& call, int64_t* epoch, PlaceFor&& place_for) {
  const int64_t next = ++call.counters->epoch;
  for (int k = 0; k < call.members; ++k) {
    int p = (call.me + k) % call.members;
    int64_t words[2];
    place_for(p, words);
    HPSHMEM_RETURN_IF_ERROR(hpshmem::PutMemSignal(call.AtMember(p, call.layout.place + 2 * call.me), words,
                                                  sizeof words, call.AtMember(p, call.layout.ready + call.me), kWord,
                                                  next, SignalOp::kSet, call.GlobalRank(p)));
  }
  *epoch = next;
  return Status::OK();
}

// Blocks until member `peer` has entered call `epoch`. Past kProbeAfterMs it
// notes the wait and detects the deadlock of teams entered in different
// orders (wait_note.h), which fails with kCollectiveMismatch on both ranks.
Status WaitReady(const CollectiveCall& call, int peer, int64_t epoch);
// Blocks until `n` more put-with-signal ADDs have reached this rank's arrival counter.
Status WaitArrivals(const CollectiveCall& call, int64_t n);
// Blocks until peers have finished every read of this rank's buffers announced
// so far, plus `extra` more (which then count as announced).
Status WaitConsumed(const CollectiveCall& call, int64_t extra);
// Blocks until `n` more relayed deliveries (CollectiveLayout::relayed) have
// reached this rank: host-mates' copies (Relayed) or puts that signal it.
Status WaitRelayed(const CollectiveCall& call, int64_t n);
// Tells host-mate `peer` that this rank has finished copying into its buffers.
Status Relayed(const CollectiveCall& call, int peer);
// Tells member `peer` that this rank has finished reading its buffers.
Status Consumed(const CollectiveCall& call, int peer);
// A host-mate's side of a relay through member `source` (BroadcastByHost,
// AllreduceByHost): for each `chunk` bytes of `bytes` in turn, waits for the
// arrival that says `source` holds it, then copies it from `source`'s `data`
// (a symmetric address) into this rank's; then tells `source` it is done.
Status CopyChunksAsTheyArrive(const CollectiveCall& call, char* data, size_t bytes, size_t chunk, int source);
// Tells every peer this rank is done reading its buffers, then waits until
// every peer is done reading this rank's: after it, no rank of the call is
// still reading, so nobody's buffers or words are in use any more.
Status AllConsumed(const CollectiveCall& call);

// Puts `header` (and `bytes` of `data` after it, at most slot_bytes) into
// member p's slot for this rank, setting ready[me] at p to the call's epoch:
// the data is there when p sees it.
Status PutSlot(const CollectiveCall& call, int p, const EagerHeader& header, const void* data, size_t bytes);
// This rank's copy of what member p put into its slot here for call `epoch`.
inline const EagerHeader& SlotHeader(const CollectiveCall& call, int p, int64_t epoch) {
  return *reinterpret_cast<const EagerHeader*>(call.Slot(call.me, p, epoch));
}
inline const char* SlotData(const CollectiveCall& call, int p, int64_t epoch) {
  return call.Slot(call.me, p, epoch) + kEagerHeaderBytes;
}

// What every member of a reducing call or broadcast must pass alike, as the
// two words BeginPlaced carries: an element (or byte) count, and the rest
// packed in one word.
inline int64_t Pack(int64_t dtype, int64_t op, int64_t extra) { return (extra << 16) | (dtype << 8) | op; }
// Where a symmetric buffer lies, folded to 23 bits (the workspace opens the
// symmetric range at the same offset on every rank): peers read and write the
// buffer at this rank's offset, so ranks that pass buffers at different places
// (one rank a tensor of the heap, another a staging copy) must fail like ranks
// that pass different sizes, not read each other's unrelated bytes.
int64_t Place(const CollectiveCall& call, const void* buffer);
// Begins the call announcing (count, packed), then compares every member's:
// on a disagreement every member fails alike with kCollectiveMismatch naming
// `what` and both sides' arguments, after all have read the words. Members
// that took the eager path of the same call (EagerDisagreement) take part.
Status BeginAgreed(const CollectiveCall& call, int64_t* epoch, int64_t count, int64_t packed, const char* what);
// The comparison half of BeginAgreed, for a call begun another way: each
// member's (count, packed) for `epoch` is in its place words, or in its slot's
// header when it went eager (ExchangeEager).
Status Agree(const CollectiveCall& call, int64_t epoch, int64_t count, int64_t packed, const char* what);

// Whether a member's memory is not mapped here (it lives on another host):
// the same answer on every member, since mapping follows the host.
inline bool SpansHosts(const CollectiveCall& call) { return call.counters->spans_hosts == 2; }

// The team's members by host: hosts in the order of their first members,
// each host's members in team-rank order. The same on every member
// (hpshmem::HostLeader).
struct HostPlan {
  std::vector<std::vector<int>> hosts;
  std::vector<int> host_of;   // member -> its host's index in `hosts`
  std::vector<int> index_of;  // member -> its index among its host's members
  bool AnyShared() const {
    for (const auto& h : hosts)
      if (h.size() > 1) return true;
    return false;
  }
};
// Fills *plan; false when a member's host is unknown (not initialized).
bool PlanHosts(const CollectiveCall& call, HostPlan* plan);

// Ends an eager call whose headers disagreed: every member fails alike with
// kCollectiveMismatch, whichever path it took (Agree reads the arguments of
// an eager member from its slot's header, of the others from the place words).
// An eager call (a PutSlot to every member, whose header carries the call's
// (count, packed) in count and place) reads no place words otherwise: a member
// that agreed may already be in the next call, rewriting them.
Status EagerDisagreement(const CollectiveCall& call, int64_t epoch, int64_t count, int64_t packed, const char* what);

// What an eager call sends one member: `bytes` bytes at `data`.
struct Piece {
  const char* data;
  size_t bytes;
};

// The second half of ExchangeEager: marks this rank as entered, then waits
// for every peer's header of `epoch`. OK when all carry (count, packed), else
// ends the call as EagerDisagreement does.
Status AwaitEager(const CollectiveCall& call, int64_t count, int64_t packed, int64_t epoch, const char* what);

// Starts an eager call across hosts: *epoch = its number; piece_of(p) (a
// Piece, at most slot_bytes), behind a header carrying (count, packed), into
// every peer p's slot; then AwaitEager.
template <class PieceOf>
Status ExchangeEager(const CollectiveCall& call, int64_t count, int64_t packed, PieceOf&& piece_of, int64_t* epoch,
                     const char* what) {
  *epoch = ++call.counters->epoch;
  const EagerHeader header{*epoch, count, packed, 0};
  for (int k = 1; k < call.members; ++k) {
    const int p = (call.me + k) % call.members;
    const Piece piece = piece_of(p);
    HPSHMEM_RETURN_IF_ERROR(PutSlot(call, p, header, piece.data, piece.bytes));
  }
  return AwaitEager(call, count, packed, *epoch, what);
}

// Up to these many bytes an allreduce or broadcast across hosts that does not
// fit one eager slot goes as eager steps, a slot per member at a time
// (AllreduceInSteps, BroadcastInSteps); past them, announced. Measured on two
// real hosts (2 and 4 ranks): the steps beat the announced path at every size
// up to 16 MiB for allreduce (16 MiB: 11.4 against 15.7 ms on 2 ranks), while a
// 16 MiB broadcast, which the announced path moves with one get per member,
// was faster announced on 4 ranks; a broadcast in steps is ahead up to 4 MiB.
constexpr size_t kAllreduceStepsMaxBytes = size_t{16} << 20;
constexpr size_t kBroadcastStepsMaxBytes = size_t{4} << 20;
// A reduce-scatter across hosts past one slot per member goes as eager steps
// (ReduceEager on a slot of each member's block at a time) up to this many
// bytes of input. Measured on two real hosts: 2.3-2.5x faster than the
// announced path at 1-4 MiB; at 16 MiB 13.3 against 20.0 ms on 4 ranks and
// at par (7.3 against 6.8 ms) on 2.
constexpr size_t kReduceScatterStepsMaxBytes = size_t{16} << 20;

// The eager reducing call across hosts (allreduce, reduce-scatter up to an
// eager slot, and each step of a larger reduce-scatter): sends member p the
// `count` elements at in + p * stride, with the call's arguments
// (call_count, packed) in the header; then reduces, in team-rank order, this
// rank's own piece and every piece received into `out`. One message per peer
// pair each way, where the announced path pays an announcement, a get and a
// release. On a disagreement (headers here, or Agree's words) every member
// fails alike with kCollectiveMismatch, writing nothing.
Status ReduceEager(const CollectiveCall& call, const char* in, size_t stride, size_t count, DType dtype, ReduceOp op,
                   int64_t call_count, int64_t packed, void* out, const char* what);

// Memory that outlives a call: a fresh allocation per call costs a page
// fault per 4 KiB (and zeroing) at the sizes where it matters.
struct Scratch {
  std::unique_ptr<char[]> p;
  size_t size = 0;
  char* Get(size_t bytes) {
    if (bytes > size) {
      p.reset(new char[bytes]);
      size = bytes;
    }
    return p.get();
  }
};

// Reduces element range [lo, hi) of symmetric `data` over every member, in
// team-rank order, into `out` (which may be this rank's own range). Peers'
// copies are read in place where their memory is mapped here, else fetched
// first. Peers must have entered the call.
Status ReduceRange(const CollectiveCall& call, const char* data, size_t lo, size_t hi, size_t item, DType dtype,
                   ReduceOp op, void* out);

}  // namespace hpshmem::ops::collective
