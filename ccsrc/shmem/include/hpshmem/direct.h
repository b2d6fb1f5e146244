// The direct route to a rank of this host: its symmetric range is mapped
// here (GetDirectMap), so a put is a copy, an atomic a CPU atomic, and a peer
// that sleeps waiting on its memory is woken through its doorbell. The
// shared-memory transport takes this route, and so may a front end with a
// fast path of its own (the OpenSHMEM layer), so that both write a peer's
// memory the same way. Inline where a call would cost more than the work.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hpshmem/hpshmem.h"

namespace hpshmem {

// A futex word bumped by whoever changes a word a waiter of a rank watches,
// when `sleepers` says someone sleeps. Lost-wakeup-free (Dekker style, all
// seq_cst): the waiter counts itself in `sleepers`, reads `ring`, re-checks
// its condition and sleeps on `ring`; the writer updates the word, then looks
// at `sleepers`. Either the waiter sees the update or the writer the sleeper.
struct Doorbell {
  alignas(64) uint32_t ring;
  alignas(64) uint32_t sleepers;
};

// The doorbell that rank pe's waiters on its symmetric range sleep on, as
// mapped here; null when pe is not load/store reachable or the runtime is
// not initialized. Valid until Finalize.
Doorbell* PeerDoorbell(int pe);

// Wakes every waiter sleeping on `bell`.
void NotifyAll(Doorbell* bell);
// Wakes the waiters sleeping on `bell`, if any sleeps. The stores they wait
// for must be visible first: an atomic, or PublishStores after plain stores.
inline void Notify(Doorbell* bell) {
  if (std::atomic_ref<uint32_t>(bell->sleepers).load(std::memory_order_seq_cst) > 0) NotifyAll(bell);
}

// Copies `bytes` from `src` to `dst` (overlap allowed). From a size at which
// the copy no longer fits the last-level cache alongside its readers, it
// streams the stores past the cache (non-temporal AVX2 stores): a regular
// store first reads the destination line in (a read-for-ownership), so a
// cache-missing memcpy moves three bytes over the memory bus per byte
// copied, a streaming copy two. Measured on the reference host: 13 GB/s vs
// 7.5 GB/s from 8 MiB up. Below the threshold, and for overlapping ranges or
// CPUs without AVX2, it is memmove. Callers fence before signalling (see
// Signal): streaming stores are weakly ordered.
void CopyBytes(void* dst, const void* src, size_t bytes);
// The size from which CopyBytes streams (bytes; SIZE_MAX when it never does).
size_t StreamingCopyThreshold();

// CopyBytes for a load/store peer's memory, with copies under 4 KiB inline:
// there the call into CopyBytes and its threshold check cost as much as the
// copy itself (an 8-byte get through the call takes ~1.5x as long).
inline void CopyDirect(void* dst, const void* src, size_t bytes) {
  if (bytes < 4096) {
    if (bytes) std::memmove(dst, src, bytes);
    return;
  }
  CopyBytes(dst, src, bytes);
}

// Makes every earlier store of this thread, streaming stores included,
// visible before any later one (sfence + a full fence).
inline void StoreFence() {
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#endif
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

namespace direct_detail {
// Set at Init (before any put): read inline on every put.
inline std::atomic<bool> g_asym_wake{false};
inline std::atomic<size_t> g_streaming_from{0};  // StreamingCopyThreshold()
}  // namespace direct_detail

// Whether waking needs no fence on the writer's side (chosen at Init): a
// waiter about to sleep then makes every CPU running a rank of the job
// execute a full barrier, so a writer's plain stores are visible to its
// re-check, or the writer's later look at `sleepers` sees it.
inline bool AsymWake() { return direct_detail::g_asym_wake.load(std::memory_order_relaxed); }
// The writer's half of waking, after plain stores of `bytes` bytes to memory
// a peer may wait on and before Notify: a compiler fence under AsymWake, else
// StoreFence. Streaming stores (large copies) are weakly ordered: they keep
// their fence.
inline void PublishStores(size_t bytes) {
  if (AsymWake() && bytes < direct_detail::g_streaming_from.load(std::memory_order_relaxed))
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    StoreFence();
}

// Atomically SETs (swap) or ADDs `value` to the signal word at `word`
// (naturally aligned, mapped here), seq_cst; returns the old value. Every
// transport applies signals through this, so a word updated by same-host and
// remote peers at once loses no update.
int64_t ApplyAtomic(void* word, SignalType type, SignalOp op, int64_t value);
// Amo's update of a word mapped here (seq_cst); returns the old value.
int64_t ApplyAmo(void* word, SignalType type, AmoOp op, int64_t value, int64_t compare);

// A put to a rank of this host: `bytes` from `src` to `dst`, an address in
// that rank's memory as mapped here, then a wake-up of its waiters on `bell`
// (PeerDoorbell). On return the bytes are visible to the peer.
inline void PutDirect(void* dst, const void* src, size_t bytes, Doorbell* bell) {
  CopyDirect(dst, src, bytes);
  // A waiter may sleep on any word of the heap (WaitUntil), not only on
  // signals: the stores are published before the look at `sleepers`, so a
  // waiter registered before them is woken.
  PublishStores(bytes);
  Notify(bell);
}

}  // namespace hpshmem
