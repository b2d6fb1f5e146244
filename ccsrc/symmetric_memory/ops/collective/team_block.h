// What a team's block in each member's workspace (hpshmem::TeamBlockBytes)
// holds for the collectives, int64 words unless said otherwise. W members:
//   ready[W], arrivals, consumed, mismatch, relayed, place[2W]   (CollectiveLayout),
//   rounded up to 8 words, then
//   2W eager slots (per call parity, one per sender) of kEagerHeaderBytes +
//   EagerSlotBytes(W) bytes each, for teams of at most 2048 members.
// Every word is zero at team creation and only grows or is overwritten by the
// call that owns it: see ops.h for the epoch protocol.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpshmem::ops {

// Pointers into this rank's block of a team. Why place[]: alltoall needs, for
// each pair, a placement only one side knows (push: where the receiver wants
// the sender's piece; pull: where the owner keeps the reader's piece). The
// side that knows puts it into the other side's place[] in the same message
// that announces the call, so nobody has to fetch it: across hosts that is a
// round trip saved per peer.
struct CollectiveLayout {
  int64_t* ready;     // ready[p]: last call rank p has entered
  int64_t* arrivals;  // put-with-signal ADDs received (push collectives)
  int64_t* consumed;  // reads of this rank's buffers completed by peers (pull)
  int64_t* mismatch;  // peers that found this rank's sizes inconsistent
  // Data passed on to this rank by the by-host calls, counted apart from
  // `arrivals` so that a count of either tells which data is here: an
  // allgather's host-mates' copies, an allreduce's result coming back down
  // the chain of hosts.
  int64_t* relayed;
  // place[2p], place[2p+1] for peer p, written by p with ready[p]. alltoall
  // push: byte offset in p's receive buffer for this rank's piece, and the
  // elements p expects; pull: workspace-relative byte offset of p's piece
  // for this rank, and its elements.
  int64_t* place;
};

// The layout of a block that starts at `words`, for a team of `members`.
inline CollectiveLayout LayoutAt(int64_t* words, int members) {
  return {words, words + members, words + members + 1, words + members + 2, words + members + 3, words + members + 4};
}

// Words before the eager slots in a team block (CollectiveLayout, rounded to 64 bytes).
constexpr size_t TeamWordsBeforeEager(int members) { return (3 * static_cast<size_t>(members) + 4 + 7) / 8 * 8; }

// Eager slots: each member keeps, per sender and per call parity, a slot of
// kEagerHeaderBytes + EagerSlotBytes(members) bytes into which a sender may
// put a small call's data before this member has entered the call. The
// payload is a power of two, 32 KiB down to 64 B as teams grow (about 128 KiB
// per member and parity); 0 (no eager calls) past 2048 members. The whole
// slot is used across hosts, where going eager saves an announcement and a
// round trip per peer (a message's flight each); within one host a call goes
// eager only up to LocalEagerBytes, past which a direct copy into the
// destination beats a copy through the slot.
constexpr size_t kEagerHeaderBytes = 64;
constexpr size_t EagerSlotBytes(int members) {
  size_t s = 32768;
  while (s >= 64 && s * static_cast<size_t>(members) > 131072) s /= 2;
  return s >= 64 ? s : 0;
}
constexpr size_t LocalEagerBytes(int members) {
  size_t s = 4096;
  while (s >= 64 && s * static_cast<size_t>(members) > 32768) s /= 2;
  return s >= 64 && s <= EagerSlotBytes(members) ? s : 0;
}

// The block the layout above needs, in int64 words; it is exactly
// hpshmem::TeamBlockBytes(members) / 8 (collective_test checks it).
constexpr size_t TeamBlockWords(int members) {
  const size_t slot = EagerSlotBytes(members);
  return TeamWordsBeforeEager(members) + (slot ? 2 * static_cast<size_t>(members) * (kEagerHeaderBytes + slot) / 8 : 0);
}

// What a sender puts at the head of its slot in the receiver, with the
// payload after it when that fits (an eager piece). The slot is the
// receiver's only news of the call from this sender, so it also carries what
// the receiver needs to check sizes and, for pieces too large to go eager,
// where the sender should put them.
struct EagerHeader {
  int64_t epoch;  // the call; older values are a previous call's
  int64_t count;  // what the sender sends this receiver (allgather: bytes; alltoall: elements)
  int64_t place;  // alltoall: byte offset in the sender's receive buffer for the receiver's piece
  int64_t want;   // alltoall: elements the sender expects from the receiver
};
static_assert(sizeof(EagerHeader) <= kEagerHeaderBytes);

}  // namespace hpshmem::ops
