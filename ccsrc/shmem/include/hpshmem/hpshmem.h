// libhpshmem: one-sided communication over a symmetric heap, for the ranks of
// one job on Linux hosts. Framework-agnostic; usable from C++ alone.
//
// Model (OpenSHMEM-like): every rank (PE) owns a heap of the same size in
// shared memory that the other ranks on its host map directly; ranks on other
// hosts reach it through UCX (the same calls, the same guarantees). Collective
// allocations done in the same order on every rank return the same offset
// everywhere, so Ptr(local, pe) is the peer's copy of the same object.
//
// Units: every size in this header is in BYTES. Every call returns a Status;
// none throws. Collective calls must be made by every rank, in the same order,
// from one thread per rank. Non-collective calls are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "hpshmem/status.h"

namespace hpshmem {

// ---------------------------------------------------------------- bootstrap

constexpr size_t kUniqueIdBytes = 128;

// Opaque rendezvous token: address and port of rank 0's bootstrap listener,
// a job id and a per-job secret. Treat it like a password: whoever holds it
// may join the job.
struct UniqueId {
  unsigned char bytes[kUniqueIdBytes];
};

// Opens the bootstrap listener (a port chosen by the kernel) in THIS process,
// which must then be the process that calls Init as rank 0, and describes it
// in `out`. `host` is the address to bind and advertise; empty means
// $HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST, else 127.0.0.1.
// Errors: kSystem (socket calls), kInvalidArgument (bad host).
Status GetUniqueId(UniqueId* out, const std::string& host = "");

// The numeric address of this host's interface that routes toward `host`:
// what rank 0 should advertise to ranks that reach it from there (e.g. the
// framework's rendezvous host). Sends nothing. Errors: kInvalidArgument, kSystem.
Status LocalAddressToward(const std::string& host, std::string* out);

// ---------------------------------------------------------------- lifecycle

struct InitAttr {
  int rank = -1;   // this process's rank, 0 <= rank < nranks
  int nranks = 0;  // number of ranks in the job
  // Rendezvous: exactly one of these (unique_id wins when both are given).
  // With neither, $HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT is used.
  const UniqueId* unique_id = nullptr;
  std::string endpoint;  // "tcp://host:port"; rank 0 listens there
  // Overrides of the environment; 0 means "take it from the environment".
  size_t heap_bytes = 0;   // SYMMETRIC_MEMORY_HEAP_SIZE (default 1 GiB)
  double timeout_sec = 0;  // HYPER_PARALLEL_SHMEM_TIMEOUT_SEC (default 120); (0, 1e9] or inf = forever
  int block_dim = 0;       // HYPER_PARALLEL_SHMEM_BLOCK_DIM (default 1)
};

// Collective. Connects the ranks, creates and maps the heaps. Fails (no hang)
// — at once with kBootstrap when the unique id advertises a loopback address
// of another machine —
// with kBootstrap/kTimeout naming the missing ranks when a rank does not show
// up within the timeout. Ranks of one host (boot id + network namespace, or
// $HYPER_PARALLEL_SHMEM_HOST_ID) share memory; other pairs, or every pair
// under $HYPER_PARALLEL_SHMEM_TRANSPORT=ucx, connect through UCX.
// Errors: kInvalidArgument, kBootstrap, kTimeout, kCollectiveMismatch (heap
// sizes differ), kUnsupported (more ranks than this build supports), kSystem (incl. UCX).
Status Init(const InitAttr& attr);

// Collective. Barrier, then releases every resource of the runtime (threads,
// sockets, mappings). Resources are released even when the barrier fails (a
// dead peer); the failure is still returned.
Status Finalize();

bool IsInitialized();
int MyPe();  // -1 when not initialized
int NPes();  // 0 when not initialized

// Collective, over the bootstrap connections (not the heap): every rank
// contributes `bytes` bytes (the same count on every rank, at most 1 MiB);
// `all` receives nranks * bytes, in rank order. For exchanging small setup
// data (addresses, keys, shapes). Errors: kInvalidArgument, kPeerDead, kTimeout.
Status BootstrapAllgather(const void* mine, size_t bytes, void* all);
// Collective barrier over the bootstrap connections.
Status BootstrapBarrier();

// ---------------------------------------------------------------- heap

// Collective allocation of `bytes` (may be 0) aligned to 64 bytes, or
// `alignment` (a power of two, at most 1 GiB). Every rank must ask for the same sizes in the
// same order: this is verified, and a disagreement returns
// kCollectiveMismatch on every rank instead of aliasing memory.
// Errors: kOutOfMemory (says what is live), kCollectiveMismatch,
// kInvalidArgument, kPeerDead, kTimeout.
Status Malloc(size_t bytes, void** out);
// Zero-filled on every rank before any rank returns (ends with a barrier).
Status Calloc(size_t count, size_t size, void** out);
Status AlignedAlloc(size_t alignment, size_t bytes, void** out);

// Collective. Errors: kInvalidFree (double free, pointer not from Malloc) —
// reported on every rank, since the ranks compare their calls.
Status Free(void* ptr);

// Collective free for memory that something outside the runtime (a tensor
// view) may still reference on some rank: the block leaves the live set at
// once (a second free is kInvalidFree), but its bytes are not handed out again
// until every rank has called ReleaseDeferred(*token); allocator calls reclaim
// them, the same on every rank. *token is 0 when the block stays out of the
// heap until Finalize (64 deferred frees already pending). Errors as Free; a
// rank calling Free while another calls FreeDeferred is kCollectiveMismatch.
Status FreeDeferred(void* ptr, uint64_t* token);
// This rank no longer references the block of `token`. Local, cheap, safe
// from any thread at any time (a token of a finalized runtime is ignored).
void ReleaseDeferred(uint64_t token);

// Address of the object `local` (in this rank's heap) on rank `pe`, for
// direct loads/stores; nullptr when `local` is not in the heap, pe is out of
// range, or pe is not directly reachable (another host, or UCX forced).
void* Ptr(const void* local, int pe);

// A symmetric block of kWorkspaceBytes reserved by Init for the library's
// own collectives (epoch signals, exchanged counts, the teams' words): zero
// at Init, at the same offset on every rank, never handed out by Malloc. Its
// pages cost memory only once used.
constexpr size_t kWorkspaceBytes = size_t{8} << 20;
Status CollectiveWorkspace(void** base);

// ---------------------------------------------------------------- teams
// A team is an ordered set of the job's ranks that runs collectives among
// itself: member i is "team rank i". Each team has a block of its own in every
// member's workspace and a private state on every member, so teams run
// collectives concurrently and back to back without involving (or blocking)
// anyone else; what the block and the state hold is the collective layer's
// business (symmetric_memory/ops/collective). Team ids are this rank's handles
// (a team may have different ids on different members); kTeamWorld is every
// rank in rank order.
constexpr int kTeamWorld = 0;

// Bytes (a multiple of 64) that a team of `members` ranks reserves in each
// member's workspace for its collectives: per member three int64 words and
// three more, then, for teams of at most 2048, two message slots per member
// of 64 bytes and a power of two from 32 KiB down to 64 bytes (about 128 KiB
// per member). Zero at team creation.
size_t TeamBlockBytes(int members);

// Bytes of this rank's private state per team (TeamView::state).
constexpr size_t kTeamStateBytes = 64;

struct TeamView {
  int size = 0;              // members
  int me = -1;               // this rank's team rank
  const int* pes = nullptr;  // global rank of each member, in team order
  // Per member: byte offset, from the workspace base, of that member's
  // TeamBlockBytes(size) bytes of this team (the world's are at 0 on all).
  const int64_t* block = nullptr;
  // kTeamStateBytes of this rank's own, 64-byte aligned, zero at team
  // creation: the collective layer's bookkeeping of the team's calls. Its
  // first int64 counts the calls this rank has entered (DebugState shows it).
  void* state = nullptr;
  int64_t hash = 0;  // of the member list: equal on every member, differs between teams
};
// Errors: kNotInitialized; kInvalidArgument for an id that names no live team.
// The view's arrays, like the workspace, live until Finalize: code that uses
// them across several calls holds a CallHold meanwhile.
Status GetTeam(int team, TeamView* out);

// While one lives on any thread, Finalize (on another thread) does not
// release the runtime: it wakes the waits in progress, which fail with
// kNotInitialized, as do calls begun after it started, and waits for every
// hold to end. For code that makes several calls and uses what they handed
// out (a TeamView, the workspace, Ptr addresses) in between. Costs a store
// each way; nests with itself and with the library's own calls.
class CallHold {
 public:
  CallHold();
  ~CallHold();
  CallHold(const CallHold&) = delete;
  CallHold& operator=(const CallHold&) = delete;
};

// For collectives built on this API: while one lives on a thread, the
// Signal and PutMemSignal calls of that thread are the collective's own
// protocol, whose receivers wait for them themselves (in that call or the
// next), so Quiet (and the Quiet of every barrier) need not complete them.
// Across hosts that spares the next Quiet a round trip to every peer the
// collective wrote to. The user's puts made before or after are completed
// by Quiet as always. Also a CallHold.
class CollectiveScope {
 public:
  CollectiveScope();
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;

 private:
  CallHold hold_;
};

// Bounds the waits of the calling thread by `seconds` instead of the job's
// HYPER_PARALLEL_SHMEM_TIMEOUT_SEC (a torch process group made with a timeout
// of its own); seconds <= 0 restores the job's. Returns the previous setting
// (0: the job's). A wait that runs out fails with kTimeout as usual.
double SetThreadWaitTimeout(double seconds);

// SetThreadWaitTimeout for the scope's lifetime; scopes nest.
class WaitTimeoutScope {
 public:
  explicit WaitTimeoutScope(double seconds) : saved_(SetThreadWaitTimeout(seconds)) {}
  ~WaitTimeoutScope() { SetThreadWaitTimeout(saved_); }
  WaitTimeoutScope(const WaitTimeoutScope&) = delete;
  WaitTimeoutScope& operator=(const WaitTimeoutScope&) = delete;

 private:
  double saved_;
};

// Collective over the n members only (ranks not in `pes` take no part and
// never block): creates the team of the distinct global ranks pes[0..n), this
// rank among them, and returns its id. Members that share teams must create
// (and destroy) them in the same order. Errors: kInvalidArgument (rank out of
// range, repeated, or this rank not a member); kCollectiveMismatch on every
// member that sees another member pass a different list (same ranks in
// another order included); kOutOfMemory when the workspace has no room for
// the team's words; kTimeout / kPeerDead (a member never came, or died).
Status TeamCreate(const int* pes, int n, int* team);
// Collective over the team's members: completes this rank's updates, waits
// until every member has entered, then releases the team's words. The world
// cannot be destroyed (kInvalidArgument). Errors: as TeamCreate.
Status TeamDestroy(int team);

// The id of this rank's one team whose TeamView::hash is `hash`; false when
// it has no such team, or several, or is not initialized.
bool FindTeamByHash(int64_t hash, int* team);

// A record of kPublishedWords int64 words that this rank keeps in its
// workspace for its peers to read: what a layer over the runtime wants peers
// to know of this rank while it waits (the collectives say where they are
// blocked, so that a blocked peer can tell a wait that will end from a
// deadlock). A reader never sees half of one record and half of another.
constexpr int kPublishedWords = 3;
// Replaces this rank's record. Does nothing when not initialized or when the
// workspace has no room for it (more ranks than the collectives support).
void PublishWords(const int64_t (&words)[kPublishedWords]);
// Rank pe's record (a direct load on this host, atomic fetches otherwise);
// all zero when pe never published one. *published is false, and `words`
// untouched, when there is none to read (no room, or pe kept rewriting it).
// Errors: kNotInitialized; kInvalidArgument (pe); as AtomicFetch.
Status ReadPublishedWords(int pe, int64_t (&words)[kPublishedWords], bool* published);

// True when [p, p + bytes) lies within this rank's heap.
bool IsSymmetric(const void* p, size_t bytes);

// Whether [p, p + bytes) lies within the bytes one live allocation of this
// rank's heap asked for: what makes a tensor symmetric, for every front end.
// Never waits on an allocator call's agreement with the other ranks (only on
// the instant its allocator changes), so a thread may ask while another
// allocates. False when not initialized.
bool InLiveAllocation(const void* p, size_t bytes);
// Whether `pe` is this rank or shares memory with it (puts are plain copies).
bool DirectlyReachable(int pe);
// The first rank of pe's host, when pe maps that rank's memory (ranks with
// the same answer share memory); pe itself otherwise. The same answer on
// every rank, so collectives can plan by host alike. -1 when not
// initialized or pe is out of range.
int HostLeader(int pe);

// ---------------------------------------------------------------- RMA

// Copies `bytes` from local `src` to symmetric `dest` on rank `pe`. Blocking:
// on return the data is in the target's heap (for a peer on another host:
// written there, and ordered after this rank's earlier calls to it). Single-threaded; see
// hpshmem/ops.h for the block_dim-parallel versions.
// Errors: kNotInitialized, kInvalidArgument (pe, ranges).
Status PutMem(void* dest, const void* src, size_t bytes, int pe);

// PutMem that returns as soon as `src` may be reused (OpenSHMEM's put): to a
// rank of this host that is at once; to another host the bytes are on their
// way, ordered after this rank's earlier calls to pe and before its later
// ones, and in pe's heap after the next Quiet or Barrier. A peer that dies
// meanwhile makes that Quiet fail. Errors: as PutMem (checked before anything
// is sent); kPeerDead.
Status PutMemNbi(void* dest, const void* src, size_t bytes, int pe);

// Copies `bytes` from symmetric `src` on rank `pe` into local `dest`.
Status GetMem(void* dest, const void* src, size_t bytes, int pe);

// ---------------------------------------------------------------- signals

enum class SignalOp : int { kSet = 0, kAdd = 1 };
enum class SignalType : int { kInt32 = 4, kInt64 = 8 };  // value = width in bytes
enum class Cmp : int { kEq = 0, kGt = 1, kLt = 2, kNe = 3, kGe = 4, kLe = 5 };

const char* CmpName(Cmp cmp);  // "==", ">", ...
// Whether `value` cmp `x` holds (signed).
bool CmpHolds(int64_t value, Cmp cmp, int64_t x);

// Atomically sets or adds `value` to the signal word `sig` (symmetric,
// naturally aligned) on rank `pe`, with release ordering after every earlier
// put from this thread, and wakes that rank's sleeping waiters. To a peer on
// another host it may return before the update lands (it lands in order,
// and Quiet/Barrier complete it).
// Errors: kNotInitialized, kInvalidArgument, kTypeError (misaligned), kPeerDead.
Status Signal(void* sig, SignalType type, int64_t value, SignalOp op, int pe);

// Atomic fetch-and-SET (swap) or fetch-and-ADD on rank `pe`'s signal word;
// blocking, *old receives the previous value; wakes that rank's waiters.
// Atomic with respect to Signal and AtomicFetch from every rank, whatever
// transport each uses. Errors: as Signal, and kInvalidArgument (old null).
Status AtomicFetch(void* sig, SignalType type, int64_t value, SignalOp op, int pe, int64_t* old);

// Every atomic of OpenSHMEM on a naturally aligned 4- or 8-byte word: SET,
// ADD, AND, OR, XOR (bitwise on the word's bits), SWAP (SET returning the old
// value), COMPARE_SWAP (SET to `value` when the word equals `compare`) and
// FETCH (read). Signed and unsigned integers and IEEE floats all travel as
// their bits; ADD wraps (two's complement).
enum class AmoOp : int { kSet, kAdd, kAnd, kOr, kXor, kSwap, kCompareSwap, kFetch };

// Atomic `op` on rank pe's word `target` (symmetric, `width` bytes, naturally
// aligned); *old (may be null) receives the value before. Atomic with respect
// to every other Amo, Signal and AtomicFetch on the word, from any rank over
// any transport. Blocking: on return the update is applied at pe. Wakes pe's
// waiters (WaitUntil, SignalWaitUntil).
// Errors: kNotInitialized, kInvalidArgument (pe, range, op), kTypeError
// (misaligned), kPeerDead.
Status Amo(void* target, SignalType width, AmoOp op, int64_t value, int64_t compare, int pe, int64_t* old);
// Amo of an op without a result (kSet, kAdd, kAnd, kOr, kXor) that may return
// before it is applied (OpenSHMEM's non-fetching atomics): on this host it is
// applied at once; to another host it is ordered after this rank's earlier
// calls to pe and before its later ones, and applied by the next Quiet or
// Barrier. Errors: as Amo (an op with a result is kInvalidArgument).
Status AmoNbi(void* target, SignalType width, AmoOp op, int64_t value, int pe);

// Checks the arguments of Signal without touching memory (same errors).
Status ValidateSignal(const void* sig, SignalType type, int64_t value, SignalOp op, int pe);

// Put, release fence, then Signal: a rank that observes the signal observes
// every byte of the put. Returns once `src` may be reused; to a peer on
// another host the data and signal travel as one message and land in order
// (Quiet/Barrier complete it).
Status PutMemSignal(void* dest, const void* src, size_t bytes, void* sig, SignalType type, int64_t value, SignalOp op,
                    int pe);

// Blocks until the local signal word `sig` compares true with `value`
// (signed), spinning briefly, then yielding, then sleeping on a futex.
// Stores the observed value in *observed (may be null). `label` names the
// signal in error messages (e.g. "signal[3]"); null names the heap offset.
// Errors: kTimeout (rank, signal, relation, last value), kPeerDead (names the
// dead rank), kInvalidArgument, kTypeError.
// A lost rank fails the wait only when it is a member of `team` (a team's
// collectives are not affected by ranks outside it).
Status SignalWaitUntil(const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed,
                       const char* label = nullptr, int team = kTeamWorld);
// SignalWaitUntil that, once it has waited kProbeAfterMs, calls `probe` about
// every 50 ms while it sleeps; a probe's error ends the wait with that error.
constexpr int kProbeAfterMs = 100;
Status SignalWaitUntilProbed(const void* sig, SignalType type, Cmp cmp, int64_t value, const char* label, int team,
                             const std::function<Status()>& probe);

// Blocks until ready() (called on this thread) returns true, waiting as
// SignalWaitUntil does: for a condition on this rank's symmetric memory,
// which every put, signal and atomic from a peer wakes (puts through UCX's
// RMA path excepted: a sleeping waiter sees those within 50 ms). `describe`
// names what is waited for in the timeout message. A lost rank fails the
// wait when the condition is still false. Errors: kTimeout, kPeerDead,
// kNotInitialized.
Status WaitUntil(const std::function<bool()>& ready, const std::function<std::string()>& describe);

// Makes [at, at + bytes) a second mapping of this rank's heap pages at
// [heap, heap + bytes) (a live allocation): the bytes at `at` are replaced
// atomically by the heap's; stores through either address are seen through
// the other, and peers reach them as heap memory. `at`, `heap` and `bytes`
// must be page-aligned; what was mapped at `at` is gone. UnaliasHeap puts
// private memory with the same contents back. For the OpenSHMEM layer's
// symmetric global data. Errors: kInvalidArgument, kSystem.
Status AliasHeap(void* at, const void* heap, size_t bytes);
Status UnaliasHeap(void* at, size_t bytes);

// For a front end with a fast path of its own (the OpenSHMEM layer): this
// rank's symmetric range (workspace, then heap) and each rank's range as
// mapped here (null where the rank is not load/store reachable). Valid from
// Init to Finalize. Errors: kNotInitialized.
struct DirectMap {
  uint8_t* sym_base = nullptr;
  size_t sym_bytes = 0;
  uint8_t* const* peer_sym = nullptr;  // [nranks]
  int nranks = 0;
};
// Stores through it must wake the peer's waiters as PutMem does: see
// hpshmem/direct.h (PutDirect, or PublishStores then Notify on PeerDoorbell).
Status GetDirectMap(DirectMap* out);

// Reads a local signal word atomically.
Status SignalFetch(const void* sig, SignalType type, int64_t* out);

// Orders earlier puts before later puts/signals to each target.
Status Fence();
// Completes every earlier put, signal and put-with-signal of this rank at its
// target (on one host a fence; to other hosts a round trip to each peer with
// updates in flight).
Status Quiet();
// Collective. Quiet, then waits for every rank: on one host a central
// counter; across hosts a dissemination (ceil(log2 n) rounds of one signal
// each), among one rank per host when hosts hold several ranks (the others
// meet it through shared memory). Errors: kTimeout, kPeerDead,
// kCollectiveMismatch (refused after an earlier barrier failed here).
Status Barrier();

// ---------------------------------------------------------------- config / diagnostics

// Effective settings, read once at Init.
struct RuntimeInfo {
  int rank = -1, nranks = 0;
  size_t heap_bytes = 0;
  double timeout_sec = 0;
  int block_dim = 1;
  size_t bytes_live = 0, bytes_peak = 0, allocations_live = 0;
};
Status GetRuntimeInfo(RuntimeInfo* out);

// The settings Init would take from the environment alone (heap_bytes,
// timeout_sec, block_dim; allocation fields zero), without initializing.
// Errors: kInvalidArgument naming a malformed variable.
Status EnvironmentSettings(RuntimeInfo* out);

// JSON text: config, heap size, bytes live, peak, live allocations
// (offset, bytes), the transport of each peer, lost peers. Works before Init too.
std::string DebugState();

// "self", "shm" or "ucx": how this rank reaches `pe`; nullptr when not
// initialized or pe is out of range.
const char* PeerTransport(int pe);

// Parses "1073741824", "64k", "512M", "1g", "2GiB" (case-insensitive; k=1024)
// into bytes. Errors: kInvalidArgument naming `what`.
Status ParseByteSize(const std::string& text, const char* what, size_t* out);

}  // namespace hpshmem
