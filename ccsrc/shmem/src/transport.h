// Transports move bytes and atomics between ranks. The runtime keeps a list
// of them (transports.cc, MakeTransports: shared memory first, then UCX),
// gives each peer to the first that can reach it at Init, and routes every
// call to it without deciding again (runtime.h, `route`). Everything the
// runtime does with all transports (quiet, progress, monitor, shutdown)
// loops over the list: no transport is named outside its own files and the
// list.
//
// Offsets are bytes from the start of the peer's segment (its header
// included; the symmetric range follows it, see pe_header.h). Every verb
// validated its arguments in the runtime before it gets here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpshmem/hpshmem.h"
#include "bootstrap.h"
#include "config.h"
#include "segment.h"

namespace hpshmem {

// Whether this thread is inside a collective (hpshmem.h, CollectiveScope):
// its signals and put-with-signals are then waited for by their receivers
// themselves, and a transport need not make Quiet complete them.
bool InCollective();

// The cause of a loss when a peer's process is gone (Transport::LostFn).
inline constexpr char kExitedCause[] = "exited or was killed";
// What a transport's error says of a lost peer whose cause is not known (yet).
inline constexpr char kUnknownLossCause[] = "exited, was killed, or its connection was lost";

class Transport {
 public:
  virtual ~Transport() = default;
  // Its name in PeerTransport and DebugState ("shm", "ucx").
  virtual const char* name() const = 0;

  // ---- set-up (Init), in list order, on every rank alike

  // Before the ranks exchange their cards: writes this rank's part of its
  // card (what a peer needs to reach it). Errors: kSystem.
  virtual Status Prepare(PeerCard* card) { return Status::OK(); }
  // Whether rank `a` reaches rank `b` through this transport, from the cards
  // every rank received alike: the same answer on every rank, and for (b, a).
  // Asked only for pairs that no earlier transport of the list reaches.
  virtual bool CanReach(const std::vector<PeerCard>& cards, int a, int b) const = 0;
  // Collective: every rank calls it when any pair of ranks in the job is
  // routed through this transport, even a rank whose `reach` is all false.
  // reach[r]: this rank reaches rank r through it (the runtime drops a
  // transport that reaches no peer of this rank once it returns). Errors:
  // kSystem, kBootstrap, kTimeout, kPeerDead.
  virtual Status Connect(const std::vector<PeerCard>& cards, const std::vector<bool>& reach, double timeout_sec) = 0;

  // The peer's segment mapped into this process for loads and stores, or
  // nullptr when this transport does not map it.
  virtual uint8_t* Segment(int pe) const = 0;
  // Whether every peer it reaches has a Segment (load/store peers).
  virtual bool MapsPeers() const { return false; }

  // Blocking: on return the bytes are in pe's segment, ordered after every
  // earlier verb of this process to pe.
  virtual Status Put(int pe, size_t off, const void* src, size_t bytes) = 0;
  // Put that returns once `src` may be reused, ordered like Put; Quiet
  // completes it. A transport whose puts complete at once has only Put.
  virtual Status PutNbi(int pe, size_t off, const void* src, size_t bytes) { return Put(pe, off, src, bytes); }
  // Blocking: on return the bytes are in `dst`, and reflect every earlier
  // verb of this process to pe.
  virtual Status Get(int pe, void* dst, size_t off, size_t bytes) = 0;
  // Atomic SET/ADD on pe's signal word at `off`, applied after every earlier
  // verb of this process to pe, waking pe's sleeping waiters. It may return
  // before it is applied; Quiet completes it.
  virtual Status Signal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) = 0;
  // Signal that Quiet need not complete: for protocols that wait for its
  // effect themselves (the barrier), so that it does not make the next Quiet
  // cost a round trip.
  virtual Status ProtocolSignal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) {
    return Signal(pe, off, type, op, value);
  }
  // Put, then Signal, such that a rank that observes the signal observes the
  // bytes. Returns once `src` may be reused; Quiet completes it.
  virtual Status PutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type,
                           SignalOp op, int64_t value) = 0;
  // Amo (hpshmem.h) on pe's word; blocking, *old (may be null) receives the
  // value before. Applied after every earlier verb of this process to pe;
  // wakes pe's waiters.
  virtual Status Amo(int pe, size_t off, SignalType type, AmoOp op, int64_t value, int64_t compare, int64_t* old) = 0;
  // Amo without a result (SET, ADD, AND, OR, XOR) that may return before it
  // is applied: ordered like Amo, completed by Quiet.
  virtual Status AmoNbi(int pe, size_t off, SignalType type, AmoOp op, int64_t value) {
    return Amo(pe, off, type, op, value, 0, nullptr);
  }
  // Atomic fetch-and-SET (swap) or fetch-and-ADD on pe's word: the Amo of that op.
  Status FetchAtomic(int pe, size_t off, SignalType type, SignalOp op, int64_t value, int64_t* old) {
    return Amo(pe, off, type, op == SignalOp::kSet ? AmoOp::kSwap : AmoOp::kAdd, value, 0, old);
  }
  // Completes every verb this process issued through this transport.
  virtual Status Quiet() = 0;
  // What a barrier completes before this rank arrives. Quiet, unless the
  // transport's signals already order every earlier verb at their target
  // (the barrier's arrivals are signals).
  virtual Status BarrierQuiet() { return Quiet(); }
  // Whether a verb may still be in flight after the barrier that follows it
  // returns (delivered by messages): Finalize then meets every rank once
  // more before any closes its connections.
  virtual bool InFlightAfterBarrier() const { return false; }
  // How many completion round trips Quiet has paid so far (one per peer
  // that had something to complete): for DebugState.
  virtual uint64_t QuietRoundTrips() const { return 0; }
  // Whether arrivals need the target's CPU (Progress): waits then progress
  // it while they spin.
  virtual bool NeedsProgress() const { return false; }
  // Gives the transport a chance to handle incoming work on the caller's
  // thread (waits call it while they spin). Cheap when there is none.
  virtual void Progress() {}
  // A thread that is about to call Progress in a loop (a wait) brackets the
  // loop with PollBegin/PollEnd, so that a transport's own progress thread
  // keeps off the engine meanwhile instead of fighting for its lock.
  // to_sleep: the caller stops polling to sleep, so the transport must take
  // over at once; otherwise it returns, and usually polls again soon.
  virtual void PollBegin() {}
  virtual void PollEnd(bool to_sleep) {}

  // Makes waits inside the transport return kNotInitialized at once (the
  // runtime is being finalized under them). Irreversible.
  virtual void Interrupt() {}

  // This rank leaves a job in which `lost` ranks died: tell the peers, so
  // that they name those ranks rather than this one, whose connections close.
  virtual void Leave(const std::vector<int>& lost) {}

  // Starts watching the peers; `on_peers_lost(pes, cause)` runs (on a
  // transport thread) when peers' processes or connections go away: every
  // loss seen at once in one call, so a waiter it wakes names all of them.
  // `cause` completes "rank 2 ..." (e.g. kExitedCause), empty when that is
  // all that is known. The runtime keeps each loss's cause and each rank's
  // host: `lost_peer` gives its account of a lost rank for the transport's
  // own errors ("rank 3 (host nodeB): the rank lost its connection ...").
  using LostFn = std::function<void(const std::vector<int>& pes, const std::string& cause)>;
  using LostPeerFn = std::function<std::string(int pe)>;
  virtual void StartMonitor(LostFn on_peers_lost, LostPeerFn lost_peer) = 0;
  // Stops the monitor, closes connections and releases mappings and
  // registrations. Idempotent.
  virtual void Shutdown() = 0;
};

// Brackets a polling loop on `t` (Transport::PollBegin/PollEnd); null: nothing.
class PollScope {
 public:
  explicit PollScope(Transport* t) : t_(t) {
    if (t_) t_->PollBegin();
  }
  ~PollScope() { End(false); }
  void End(bool to_sleep) {
    if (t_) t_->PollEnd(to_sleep);
    t_ = nullptr;
  }
  PollScope(const PollScope&) = delete;
  PollScope& operator=(const PollScope&) = delete;

 private:
  Transport* t_;
};

// Brackets a polling loop on every transport of `ts`.
class PollAllScope {
 public:
  explicit PollAllScope(const std::vector<Transport*>& ts) : ts_(&ts) {
    for (Transport* t : *ts_) t->PollBegin();
  }
  ~PollAllScope() { End(false); }
  void End(bool to_sleep) {
    if (!ts_) return;
    for (Transport* t : *ts_) t->PollEnd(to_sleep);
    ts_ = nullptr;
  }
  PollAllScope(const PollAllScope&) = delete;
  PollAllScope& operator=(const PollAllScope&) = delete;

 private:
  const std::vector<Transport*>* ts_;
};

// The transports of this rank for `config`, in the order that peers are
// offered to them (the first that can reach a peer carries it), not yet
// connected. The one place that names them: a new transport is added there
// (transports.cc). Errors: kSystem.
Status MakeTransports(Bootstrap* boot, LocalSegment* seg, const Config& config,
                      std::vector<std::unique_ptr<Transport>>* out);

}  // namespace hpshmem
