// The process-wide runtime state behind the functions of hpshmem.h, and the
// checks and wait loop that the files implementing them share:
//   runtime.cc     lifecycle: Init (bootstrap, segment, transports per peer), Finalize
//   heap.cc        collective allocation and its cross-rank agreement
//   rma.cc         put, get, fence, quiet
//   signals.cc     signal SET/ADD, put-with-signal, waits
//   barrier.cc     the dissemination barrier
//   debug_state.cc settings, DebugState, the worker pool
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "allocator.h"
#include "bootstrap.h"
#include "config.h"
#include "segment.h"
#include "transport.h"
#include "wait.h"
#include "worker_pool.h"

namespace hpshmem {

enum class PeerState : uint8_t { kAlive = 0, kLost = 1 };

static_assert(kAllocRecordsOffset < kSymOffset, "the workspace overlaps the header");

// One team (hpshmem.h, "teams"). `member[r]` is nonzero for the global ranks
// in it: a wait on the team's words fails only for the loss of one of those.
struct TeamState {
  std::vector<int> pes;
  std::vector<int64_t> block;  // workspace byte offset of each member's words
  std::vector<uint8_t> member;
  int me = -1;
  size_t own_bytes = 0;  // this rank's block in the team arena (0 for the world: not from the arena)
  int64_t hash = 0;      // of the member list (TeamView::hash)
  alignas(64) std::byte state[kTeamStateBytes] = {};  // TeamView::state
};

struct Runtime {
  Config config;
  WaitPolicy wait;  // chosen at Init, once every rank's CPUs are known
  // Moving average (1/8 weight) of how long the waits that outlasted their
  // spin took, ns: when waits mostly end asleep anyway, yielding first only
  // burns CPU, so the yield phase shrinks (WaitLoop). Racy updates are fine.
  std::atomic<int64_t> slow_wait_ns{0};
  int rank = -1, nranks = 0;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<LocalSegment> segment;
  // The transports that carry a peer of this rank, in MakeTransports' order.
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<Transport*> progressed;  // those of them that waits progress (Transport::NeedsProgress)
  std::vector<Transport*> route;       // the transport of each rank, chosen once at Init
  std::vector<uint8_t*> peer_sym;      // each rank's symmetric range mapped here, or null (not load/store reachable)
  // Every rank of the job maps every other's segment (the same on every
  // rank): the barrier is then a central counter in rank 0's header.
  bool all_mapped = false;
  // The barrier's plan when not every rank is mapped (barrier.cc), the same
  // on every rank. Grouped when every host's ranks map their host's first
  // rank (its leader) and some host holds several: a host's ranks meet at
  // its leader through shared memory, and only the leaders run the
  // dissemination. Otherwise every rank runs it.
  std::vector<int> barrier_ranks;  // who runs the dissemination, ascending
  int barrier_pos = -1;            // this rank's index in barrier_ranks; -1: it meets its leader instead
  int leader = -1;                 // grouped: this rank's host's leader; else this rank
  int host_ranks = 1;              // grouped: the ranks of this rank's host, leader included; else 1
  // Each rank's host leader: the first rank of its host when that rank's
  // memory it maps, else itself (HostLeader). The same on every rank.
  std::vector<int> host_leader;
  std::unique_ptr<OffsetAllocator> alloc;
  std::mutex alloc_mu;
  // Held exclusively, beside alloc_mu, only while the allocator's live blocks
  // change, so that InLiveAllocation reads them without waiting out alloc_mu:
  // an allocator call holds that through its agreement with the other ranks.
  std::shared_mutex live_mu;
  uint64_t alloc_seq = 0;  // collective allocator calls so far
  // Deferred frees (FreeDeferred): a freed block whose memory something
  // outside the runtime may still reference stays retired in the allocator,
  // in a slot, until every rank has let it go (ReleaseDeferred). Slots and
  // pending are changed only under alloc_mu, identically on every rank;
  // `deferred_held` is this rank's own view and changes at any time.
  static constexpr int kDeferSlots = 64;
  size_t deferred_off[kDeferSlots] = {};
  uint64_t deferred_pending = 0;
  std::atomic<uint64_t> deferred_held{0};
  uint64_t deferred_unslotted = 0;  // deferred frees retired until finalize (all slots were busy)
  uint64_t generation = 0;          // distinguishes this runtime's deferral tokens from an earlier one's
  uint64_t barrier_epoch = 0;
  uint8_t* sym_base = nullptr;  // this rank's symmetric range: workspace, then heap
  size_t sym_bytes = 0;
  uint8_t* heap = nullptr;  // this rank's user heap (sym_base + kWorkspaceBytes)
  size_t heap_bytes = 0;
  std::unique_ptr<std::atomic<uint8_t>[]> peer_state;
  std::atomic<int> lost_count{0};
  std::vector<std::string> host_name;  // each rank's host, for errors; "" for this host's ranks
  std::mutex loss_mu;
  std::vector<std::string> loss_cause;  // why each lost rank was lost (Transport::LostFn)
  std::vector<int> loss_order;          // when, as 1, 2, ... (0: not lost): errors name the first cause first
  std::atomic<bool> finalizing{false};
  // Finalize is releasing the runtime: calls in flight leave with an error,
  // new ones are refused (see CallScope).
  std::atomic<bool> closing{false};
  // Set when a barrier failed on this rank (timeout): its arrival may already
  // count on peers, so a later barrier could pair with the wrong one of
  // theirs. Every later barrier on this rank then fails at once, naming it
  // (its peers, missing this rank's arrivals, fail too: nobody pairs wrongly).
  std::atomic<bool> broken_flag{false};  // broken is set (read without the lock on every barrier)
  std::mutex broken_mu;
  std::string broken;
  std::unique_ptr<WorkerPool> pool;
  std::mutex pool_mu;
  // Teams by id (null: destroyed); [kTeamWorld] is made at Init. A team's
  // state stays put while it lives, so calls use it without the lock.
  std::mutex team_mu;
  std::vector<std::unique_ptr<TeamState>> teams;
  std::vector<int64_t> team_pair_seq;  // per peer: team creations/destructions shared with it so far
  std::map<size_t, size_t> team_free;  // free byte ranges of the team arena in the workspace: offset -> bytes

  PeHeader* header() const { return segment->header(); }
  // Ranks lost so far, e.g. "2" or "1, 3"; empty when none. With `scope`,
  // only those where scope[r] is nonzero.
  std::string LostRanks(const std::vector<uint8_t>* scope = nullptr) const;
  // The same, with why, for errors: "rank(s) 2, 3 exited or were killed",
  // "rank(s) 2 (host nodeB) became unreachable (...)", causes joined by "; ".
  std::string LossText(const std::vector<uint8_t>* scope = nullptr);
  // " (host nodeB)" for a rank of another host, "" for this host's: how
  // every message names a rank's host.
  std::string HostSuffix(int pe) const;
  // One lost rank with its host and cause, for transports' errors (see
  // Transport::StartMonitor): "rank 3 (host nodeB): the rank lost its connection ...".
  std::string LostPeer(int pe);
  // Whether a rank in `scope` (every rank when null) is lost.
  bool AnyLost(const std::vector<uint8_t>* scope) const;
  // Quiet on every transport.
  Status QuietAll();
  // The transports' names joined by '+', e.g. "shm+ucx".
  std::string TransportNames() const;
};

// The live runtime, or nullptr. Public calls use CallScope instead.
Runtime* CurrentRuntime();

// Every public call runs inside one. While any exists, Finalize does not
// release the runtime (it wakes the waits among them, which leave with
// kNotInitialized, and waits for the rest to return); once Finalize has
// begun closing, rt() is null, so a call started then is refused at once.
class CallScope {
 public:
  CallScope();
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  Runtime* rt() const { return rt_; }

 private:
  Runtime* rt_ = nullptr;
};
// Held by Init, Finalize and DebugState.
std::mutex& LifecycleMutex();

// ---------------------------------------------------------------- shared checks

Status NotInit(const char* fn);

// ---------------------------------------------------------------- teams (team.cc)

// Makes the world team and the empty team arena (Init).
void InitTeams(Runtime* rt);
// The ranks whose loss fails a wait on `team`'s words: null for the world
// (any rank) or an unknown id.
const std::vector<uint8_t>* TeamScope(Runtime* rt, int team);
std::string Hex(uint64_t v);

inline Status CheckPe(const Runtime* rt, int pe, const char* what) {
  if (pe < 0 || pe >= rt->nranks) {
    return Status::InvalidArgument(std::string(what) + ": rank " + std::to_string(pe) + " is out of range [0, " +
                                   std::to_string(rt->nranks) + ")");
  }
  if (rt->peer_state[pe].load(std::memory_order_relaxed) != static_cast<uint8_t>(PeerState::kAlive)) {
    return Status::PeerDead(std::string(what) + ": rank " + std::to_string(pe) + " has exited or was killed");
  }
  return Status::OK();
}

// Offset of [p, p + bytes) in this rank's symmetric range (workspace + heap),
// or an error naming `what`.
inline Status SymOffset(const Runtime* rt, const void* p, size_t bytes, const char* what, size_t* off) {
  auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(rt->sym_base);
  if (a < base || a - base > rt->sym_bytes || bytes > rt->sym_bytes - (a - base)) {
    return Status::InvalidArgument(std::string(what) + ": [" + Hex(a) + ", +" + std::to_string(bytes) +
                                   " bytes) is not inside the symmetric heap");
  }
  *off = a - base;
  return Status::OK();
}

Status CheckSignal(const Runtime* rt, const void* sig, SignalType type, const char* what, size_t* off);
// SignalWaitUntil on a live runtime; a lost rank fails it only where scope[rank] (any, when null).
Status WaitSignal(Runtime* rt, const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed,
                  const char* label, const std::vector<uint8_t>* scope, const std::function<Status()>* probe = nullptr);

// ---------------------------------------------------------------- waiting

// The limit of this thread's waits, seconds (a WaitTimeoutScope's, else the
// job's), and what set it, for the timeout message.
double WaitTimeoutSec(const Runtime* rt);
std::string WaitTimeoutSource();

constexpr int kSleepSliceMs = 50;  // futex sleeps re-check death/deadline this often

// The wait loop shared by signal waits and barriers, on a word of this rank's
// segment (where every transport delivers) whose changes ring `bell`. `ready` re-reads the watched
// word; `describe` builds the timeout message. A lost peer fails the wait
// only if the condition is still false after seeing the loss (a peer that
// arrived and then exited cleanly must not fail a completed wait). It spins,
// yields and sleeps as rt->wait says; while it spins it lets the
// transports that need it make progress on this thread.
// `scope`: the ranks whose loss fails the wait (null: any rank). `probe`
// (may be null): see SignalWaitUntilProbed. `poll` false: the word is set
// through shared memory only, so the wait leaves the transports to their
// progress threads.
template <class Ready, class Describe>
Status WaitLoop(Runtime* rt, Doorbell* bell, Ready&& ready, Describe&& describe,
                const std::vector<uint8_t>* scope = nullptr, const std::function<Status()>* probe = nullptr,
                bool poll = true) {
  if (ready()) return Status::OK();
  static const std::vector<Transport*> kNone;
  const std::vector<Transport*>& busy = poll ? rt->progressed : kNone;
  PollAllScope polling(busy);
  const WaitPolicy& policy = rt->wait;
  const auto start = Clock::now();
  if (policy.spin_ns > 0) {
    // The clock is read every 32 pauses (~1 us): a read costs about one pause.
    for (int i = 1;; ++i) {
      if (busy.empty())
        CpuRelax();
      else
        for (Transport* t : busy) t->Progress();
      if (ready()) return Status::OK();
      if ((i & 31) == 0 &&
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count() >= policy.spin_ns)
        break;
    }
  }
  const double limit_sec = WaitTimeoutSec(rt);
  const Deadline dl(limit_sec);
  const int64_t yield_ns = rt->slow_wait_ns.load(std::memory_order_relaxed) > 2 * (policy.spin_ns + policy.yield_ns)
                               ? policy.yield_ns / 8
                               : policy.yield_ns;
  struct Track {  // every return from here on counts
    Runtime* rt;
    Clock::time_point start;
    ~Track() {
      int64_t d = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
      int64_t avg = rt->slow_wait_ns.load(std::memory_order_relaxed);
      rt->slow_wait_ns.store(avg + (d - avg) / 8, std::memory_order_relaxed);
    }
  } track{rt, start};
  for (;;) {
    if (rt->lost_count.load(std::memory_order_acquire) > 0 && rt->AnyLost(scope)) {
      if (ready()) return Status::OK();
      return Status::PeerDead("rank " + std::to_string(rt->rank) + ": " + describe() +
                              " failed: " + rt->LossText(scope));
    }
    if (dl.Expired()) {
      if (ready()) return Status::OK();
      return Status::Timeout("rank " + std::to_string(rt->rank) + ": " + describe() + " timed out after " +
                             Seconds(limit_sec) + " s (" + WaitTimeoutSource() + ")");
    }
    if (rt->closing.load(std::memory_order_acquire)) {
      return Status::NotInitialized("rank " + std::to_string(rt->rank) + ": " + describe() +
                                    " was interrupted: the runtime was finalized while waiting");
    }
    auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    if (waited < policy.spin_ns + yield_ns) {
      for (Transport* t : busy) t->Progress();
      sched_yield();
      if (ready()) return Status::OK();
      continue;
    }
    if (probe && waited >= int64_t{kProbeAfterMs} * 1000000) {
      Status s = (*probe)();
      if (!s.ok()) return ready() ? Status::OK() : s;
    }
    // Remote arrivals are handled by the transport's progress thread, which
    // rings this doorbell like a local signal does.
    polling.End(/*to_sleep=*/true);
    if (SleepOnDoorbell(bell, dl.RemainingMs(kSleepSliceMs) + 1, ready)) return Status::OK();
  }
}

}  // namespace hpshmem
