// The control block at the start of every rank's shared segment. Peers on the
// host map it and touch it with atomics (std::atomic_ref on plain words, since
// the memory comes from mmap, zero-filled).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

namespace hpshmem {

// Segments are mapped at kSegmentAlign-aligned addresses and the user heap
// starts kHeaderBytes in, so heap addresses (not just offsets) honour any
// alignment up to kSegmentAlign on every rank. The header's pages beyond the
// first few are never touched and cost nothing.
constexpr size_t kSegmentAlign = size_t{2} << 20;
constexpr size_t kHeaderBytes = kSegmentAlign;
constexpr uint64_t kHeaderMagic = 0x314d454d48535048ULL;  // "HPSHMEM1"

// One collective allocator call, published so that peers can compare.
struct AllocRecord {
  uint64_t seq;   // 1-based call number; written last (release)
  uint64_t kind;  // AllocKind
  uint64_t a;     // bytes (alloc) or heap offset (free)
  uint64_t b;     // alignment (alloc) or validity (free)
};

struct alignas(64) PeHeader {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
  uint64_t heap_bytes;
  uint64_t job_id;
  // Futex word: bumped by whoever changes a word this rank may wait on, when
  // `sleepers` says someone sleeps. See wait.h for the protocol.
  alignas(64) uint32_t doorbell;
  alignas(64) uint32_t sleepers;
  // Rank 0's copy counts barrier arrivals (monotonic; barrier k completes at
  // k * nranks), so back-to-back barriers need no reset.
  alignas(64) uint64_t barrier_arrivals;
  alignas(64) AllocRecord alloc[2];  // indexed by seq % 2
};
static_assert(sizeof(PeHeader) <= kHeaderBytes, "header too large");

}  // namespace hpshmem
