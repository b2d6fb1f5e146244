// The control block at the start of every rank's segment. Peers reach it
// through their transport's verbs (shared-memory peers also map it and use
// std::atomic_ref on its plain words, since the memory comes from mmap,
// zero-filled). Every word that a peer writes is written by exactly one peer
// (its slot), so SET suffices and no cross-transport atomics are needed.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

#include "hpshmem/direct.h"
#include "hpshmem/hpshmem.h"

namespace hpshmem {

// Segments are mapped at kSegmentAlign-aligned addresses and the user heap
// starts kHeaderBytes in, so heap addresses (not just offsets) honour any
// alignment up to kSegmentAlign on every rank. The header's pages beyond the
// first few are never touched and cost nothing.
constexpr size_t kSegmentAlign = size_t{2} << 20;
// The header region holds the control block, the allocator records and the
// collective workspace (kWorkspaceBytes), in whole kSegmentAlign units.
constexpr size_t kHeaderBytes = 5 * kSegmentAlign;
// The largest alignment an allocation may ask for: each rank's own heap starts
// at an address aligned to it (peers' mappings of it need not be).
constexpr size_t kHeapAlign = size_t{1} << 30;
constexpr uint64_t kHeaderMagic = 0x314d454d48535048ULL;  // "HPSHMEM1"

// One collective allocator call, published to every peer so that each can compare.
struct AllocRecord {
  uint64_t seq;   // 1-based call number
  uint64_t kind;  // AllocKind
  uint64_t a;     // bytes (alloc) or heap offset (free)
  uint64_t b;     // alignment (alloc) or validity (free)
  // Not compared: the deferred frees (bit = slot) this rank still holds
  // references to. Every rank ORs all records, so all reclaim alike.
  uint64_t held;
};

constexpr int kBarrierRounds = 32;  // dissemination rounds: enough for 2^32 ranks

// After the header: the allocator records, two per rank (indexed by seq % 2),
// at kAllocRecordsOffset + (rank * 2 + seq % 2) * sizeof(AllocRecord); then,
// at the end of the header region, the collective workspace (hpshmem.h).
constexpr size_t kAllocRecordsOffset = 4096;
// The symmetric range (collective workspace, then the user heap) starts this
// far into every segment.
constexpr size_t kSymOffset = kHeaderBytes - kWorkspaceBytes;
// Allocator records of every rank must fit between the header and the workspace.
constexpr int kMaxRanks = static_cast<int>((kSymOffset - kAllocRecordsOffset) / (2 * sizeof(AllocRecord)));
constexpr int kLostWords = (kMaxRanks + 63) / 64;

// Doorbell (a futex word per waited-on range) is in hpshmem/direct.h.

struct alignas(64) PeHeader {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
  uint64_t heap_bytes;
  uint64_t job_id;
  // Two doorbells, so that a stream of signals to one kind of word does not
  // wake the sleepers on the other: `data` for words of the symmetric range
  // (user signals, collective counters), `control` for the runtime's words in
  // this header (barrier).
  Doorbell data;
  Doorbell control;
  // Dissemination barrier: in round k of barrier e, rank (r - 2^k) mod n sets
  // rank r's barrier_round[k] to e. Monotonic, so back-to-back barriers need
  // no reset.
  alignas(64) uint64_t barrier_round[kBarrierRounds];
  // The last barrier this rank entered (written by the rank itself): on a
  // timeout, the waiting rank reads its same-host peers' to name who is missing.
  alignas(64) uint64_t barrier_entered;
  // Central barrier (used on rank 0's header only, when every rank shares
  // this host): every rank adds 1 to `central_arrived` at barrier e; the one
  // that brings it to e * n sets `central_released` to e. One wait per rank
  // instead of log2(n) in a row, which matters when ranks outnumber cores.
  alignas(64) uint64_t central_arrived;
  alignas(64) uint64_t central_released;
  // The ranks this rank has seen exit or die, one bit each, set by this rank
  // only. A rank of its host that sees it leave takes them as lost too: the
  // loss of a rank on another host reaches each rank through its own
  // connection, at its own pace, and a peer that gave up because of it must
  // not be reported as the cause in its place.
  alignas(64) uint64_t lost[kLostWords];
};

static_assert(sizeof(PeHeader) <= kAllocRecordsOffset, "header too large");

inline size_t AllocRecordOffset(int rank, uint64_t seq) {
  return kAllocRecordsOffset + (static_cast<size_t>(rank) * 2 + seq % 2) * sizeof(AllocRecord);
}
inline size_t BarrierRoundOffset(int round) { return offsetof(PeHeader, barrier_round) + round * sizeof(uint64_t); }

// The doorbell that a change of the word at `off` in a segment rings.
inline Doorbell* DoorbellFor(uint8_t* segment, size_t off) {
  auto* h = reinterpret_cast<PeHeader*>(segment);
  return off < kSymOffset ? &h->control : &h->data;
}

}  // namespace hpshmem
