// Waiting without burning a core: spin briefly, then yield, then sleep on the
// watched rank's doorbell futex. Ranks may outnumber cores, so the sleep
// phase must be reached quickly.
//
// Lost-wakeup-free protocol (Dekker style, all seq_cst):
//   waiter:   sleepers++; d = doorbell; if (cond) done; futex_wait(doorbell, d)
//   notifier: <update word>; if (sleepers > 0) { doorbell++; futex_wake }
// Either the waiter's check sees the update, or the notifier sees the sleeper
// and changes the doorbell (so futex_wait returns at once or is woken).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "hpshmem/direct.h"
#include "hpshmem/hpshmem.h"
#include "pe_header.h"

namespace hpshmem {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Ordering that runs through other processes. A rank's UCX progress thread
// applies a peer's put only after that peer saw a signal this rank's
// application thread sent after writing the same memory (and the other way
// round); the chain passes through other processes, which ThreadSanitizer
// cannot see, so it would call the two threads' accesses a race. Every
// outgoing signal or message releases one process-wide token and every
// incoming one acquires it, which states that order to TSan. Elsewhere the
// hardware and the kernel already order these (atomics, socket syscalls), so
// the calls compile to nothing.
#if defined(__SANITIZE_THREAD__)
#define HPSHMEM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HPSHMEM_TSAN 1
#endif
#endif
#ifdef HPSHMEM_TSAN
}  // namespace hpshmem
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
namespace hpshmem {
inline char g_cross_process_token;
inline void CrossProcessRelease() { __tsan_release(&g_cross_process_token); }
inline void CrossProcessAcquire() { __tsan_acquire(&g_cross_process_token); }
#else
inline void CrossProcessRelease() {}
inline void CrossProcessAcquire() {}
#endif

// ApplyAtomic and ApplyAmo, the atomics of every transport: hpshmem/direct.h.
// Reads a signal word atomically (acquire).
int64_t LoadSignal(const void* word, SignalType type);

// How long a wait spins (pause, re-check) and then yields (sched_yield,
// re-check) before it sleeps on a futex. A spin wins when the rank waited for
// runs on another core; when ranks outnumber cores, the rank waited for is
// often queued behind the waiter itself, and every microsecond spent spinning
// is taken from it. Chosen at Init (ChooseWaitPolicy).
struct WaitPolicy {
  int64_t spin_ns = 50000;
  int64_t yield_ns = 200000;
  int cpus = 0;     // CPUs this rank may use: affinity mask, capped by the cgroup's CPU quota
  int sharing = 0;  // ranks of this machine allowed on those CPUs, this one included
  bool oversubscribed = false;
  std::string mode = "spin";  // what chose it: auto's verdict ("spin" / "yield") or "custom"
};

// The CPUs this process may use: its affinity mask (copied into
// `mask_words`, 16 words, CPUs 0..1023) counted, capped by the CPU quota of
// its cgroup (v2 cpu.max or v1 cfs_quota_us, rounded up).
int UsableCpus(uint64_t* mask_words);
// The policy for `sharing` ranks on `cpus` CPUs: `mode` "auto" picks "spin"
// (sharing <= cpus) or "yield"; "custom" takes spin_us / yield_us.
WaitPolicy ChooseWaitPolicy(const std::string& mode, double spin_us, double yield_us, int cpus, int sharing);

// Waking without a fence on the writer's side. A writer that stores plain
// bytes (a put) and then looks at `sleepers` needs a full fence between the
// two (a store-load pair), ~7 ns on every put. Instead, a waiter that is about
// to sleep makes every CPU running a rank of the job execute a full barrier
// (membarrier's global expedited command, a few microseconds, paid only on
// the way to sleep): either the writer's bytes are then visible to the
// waiter's re-check, or the writer's later look at `sleepers` sees the
// waiter. On when every rank registered at Init (Linux >= 4.16).
// AsymWake, PublishStores (the writer's half), Notify and NotifyAll are in
// hpshmem/direct.h.
bool RegisterAsymWake();
void SetAsymWake(bool on);
// The waiter's half: a barrier on every CPU that runs a registered process.
void AsymWakeBarrier();

// Sleep step of a wait: registers as a sleeper on `bell`, re-checks `ready`,
// and sleeps at most `max_ms` unless the doorbell moved. Returns ready()'s
// last value.
template <class Ready>
bool SleepOnDoorbell(Doorbell* bell, int max_ms, Ready&& ready);

void FutexWait(uint32_t* addr, uint32_t expected, int max_ms);
void FutexWaitUs(uint32_t* addr, uint32_t expected, int64_t max_us);
void FutexWakeAll(uint32_t* addr);

template <class Ready>
bool SleepOnDoorbell(Doorbell* b, int max_ms, Ready&& ready) {
  std::atomic_ref<uint32_t> sleepers(b->sleepers), ring(b->ring);
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (AsymWake()) AsymWakeBarrier();
  uint32_t d = ring.load(std::memory_order_seq_cst);
  bool ok = ready();
  if (!ok) {
    FutexWait(&b->ring, d, max_ms);
    ok = ready();
  }
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
  return ok;
}

}  // namespace hpshmem
