#include "runtime.h"

#include <sched.h>

#include <cinttypes>
#include <cstring>
#include <sstream>

#include "hpshmem/hpshmem.h"
#include "hpshmem/parallel.h"
#include "copy.h"
#include "log.h"
#include "wait.h"

namespace hpshmem {
namespace {

std::mutex g_lifecycle_mu;
std::atomic<Runtime*> g_rt{nullptr};

constexpr int kSpinIters = 2000;         // ~ a few microseconds of pause
constexpr int64_t kYieldNs = 200000;     // then yield for up to 200 us
constexpr int kSleepSliceMs = 50;        // futex sleeps re-check death/deadline this often

enum AllocKind : uint64_t { kAllocMalloc = 1, kAllocFree = 2 };

Status NotInit(const char* fn) {
  return Status::NotInitialized(std::string(fn) + " called before Init (or after Finalize)");
}

std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

Status CheckPe(const Runtime* rt, int pe, const char* what) {
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
Status HeapOffset(const Runtime* rt, const void* p, size_t bytes, const char* what, size_t* off) {
  auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(rt->sym_base);
  if (a < base || a - base > rt->sym_bytes || bytes > rt->sym_bytes - (a - base)) {
    return Status::InvalidArgument(std::string(what) + ": [" + Hex(a) + ", +" + std::to_string(bytes) +
                                   " bytes) is not inside the symmetric heap");
  }
  *off = a - base;
  return Status::OK();
}

Status CheckSignal(const Runtime* rt, const void* sig, SignalType type, const char* what, size_t* off) {
  if (type != SignalType::kInt32 && type != SignalType::kInt64)
    return Status::TypeError(std::string(what) + ": signal type must be int32 or int64");
  size_t w = static_cast<size_t>(type);
  HPSHMEM_RETURN_IF_ERROR(HeapOffset(rt, sig, w, what, off));
  if (*off % w) return Status::TypeError(std::string(what) + ": signal word is not " + std::to_string(w) + "-byte aligned");
  return Status::OK();
}

int64_t LoadSignal(const void* p, SignalType t) {
  if (t == SignalType::kInt32)
    return std::atomic_ref<int32_t>(*static_cast<int32_t*>(const_cast<void*>(p))).load(std::memory_order_acquire);
  return std::atomic_ref<int64_t>(*static_cast<int64_t*>(const_cast<void*>(p))).load(std::memory_order_acquire);
}

bool Compare(int64_t v, Cmp c, int64_t x) {
  switch (c) {
    case Cmp::kEq: return v == x;
    case Cmp::kNe: return v != x;
    case Cmp::kGt: return v > x;
    case Cmp::kGe: return v >= x;
    case Cmp::kLt: return v < x;
    case Cmp::kLe: return v <= x;
  }
  return false;
}

bool ValidCmp(Cmp c) { return static_cast<int>(c) >= 0 && static_cast<int>(c) <= 5; }

// The wait loop shared by signal waits and barriers. `ready` re-reads the
// watched word; `describe` builds the timeout message. A lost peer fails the
// wait only if the condition is still false after seeing the loss (a peer
// that arrived and then exited cleanly must not fail a completed wait).
template <class Ready, class Describe>
Status WaitLoop(Runtime* rt, PeHeader* watched, Ready&& ready, Describe&& describe) {
  if (ready()) return Status::OK();
  for (int i = 0; i < kSpinIters; ++i) {
    CpuRelax();
    if (ready()) return Status::OK();
  }
  const auto start = Clock::now();
  const Deadline dl(rt->config.timeout_sec);
  for (;;) {
    if (rt->lost_count.load(std::memory_order_acquire) > 0) {
      if (ready()) return Status::OK();
      return Status::PeerDead("rank " + std::to_string(rt->rank) + ": " + describe() + " failed: rank(s) " +
                              rt->LostRanks() + " exited or were killed");
    }
    if (dl.Expired()) {
      if (ready()) return Status::OK();
      return Status::Timeout("rank " + std::to_string(rt->rank) + ": " + describe() + " timed out after " +
                             Seconds(rt->config.timeout_sec) + " s (HYPER_PARALLEL_SHMEM_TIMEOUT_SEC)");
    }
    auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    if (waited < kYieldNs) {
      sched_yield();
      if (ready()) return Status::OK();
      continue;
    }
    if (SleepOnDoorbell(watched, dl.RemainingMs(kSleepSliceMs) + 1, ready)) return Status::OK();
  }
}

void OnPeerLost(Runtime* rt, int pe) {
  if (rt->finalizing.load()) return;
  uint8_t expect = static_cast<uint8_t>(PeerState::kAlive);
  if (rt->peer_state[pe].compare_exchange_strong(expect, static_cast<uint8_t>(PeerState::kLost))) {
    rt->lost_count.fetch_add(1, std::memory_order_release);
    HP_WARN("rank %d exited or was killed; waits on this rank will fail", pe);
    // Wake our own sleepers at once; sleepers on other doorbells notice
    // within one sleep slice.
    NotifyAll(rt->transport->Header(rt->rank));
  }
}

Status VerifyCollectiveCall(Runtime* rt, uint64_t kind, uint64_t a, uint64_t b, const char* what);

}  // namespace

std::string Runtime::LostRanks() const {
  std::string s;
  for (int r = 0; r < nranks; ++r)
    if (peer_state[r].load() != static_cast<uint8_t>(PeerState::kAlive)) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

static_assert(sizeof(PeHeader) + kWorkspaceBytes <= kHeaderBytes, "the workspace overlaps the header");

Runtime* CurrentRuntime() { return g_rt.load(std::memory_order_acquire); }

// ---------------------------------------------------------------- lifecycle

Status Init(const InitAttr& attr) {
  std::lock_guard<std::mutex> lk(g_lifecycle_mu);
  if (g_rt.load()) return Status::InvalidArgument("Init: the runtime is already initialized (call Finalize first)");
  if (attr.nranks < 1) return Status::InvalidArgument("Init: nranks must be >= 1, got " + std::to_string(attr.nranks));
  if (attr.rank < 0 || attr.rank >= attr.nranks) {
    return Status::InvalidArgument("Init: rank " + std::to_string(attr.rank) + " is out of range [0, " +
                                   std::to_string(attr.nranks) + ")");
  }
  auto rt = std::make_unique<Runtime>();
  HPSHMEM_RETURN_IF_ERROR(Config::Build(attr, &rt->config));
  SetLogLevel(rt->config.log_level);
  SetLogRank(attr.rank);
  rt->rank = attr.rank;
  rt->nranks = attr.nranks;
  // Round the heap to whole pages so every segment maps cleanly.
  rt->heap_bytes = (rt->config.heap_bytes + 4095) & ~size_t{4095};
  rt->config.heap_bytes = rt->heap_bytes;

  BootstrapParams bp;
  HPSHMEM_RETURN_IF_ERROR(ResolveBootstrap(attr, rt->config.endpoint, rt->config.secret, rt->config.job_id,
                                           rt->config.timeout_sec, &bp));
  HPSHMEM_RETURN_IF_ERROR(Bootstrap::Create(std::move(bp), &rt->boot));
  std::unique_ptr<ShmTransport> shm;
  HPSHMEM_RETURN_IF_ERROR(ShmTransport::Create(rt->boot.get(), rt->heap_bytes, rt->config.timeout_sec, &shm));
  rt->transport = std::move(shm);
  rt->peer_state.reset(new std::atomic<uint8_t>[rt->nranks]);
  // The symmetric range of each segment: the collective workspace (the end
  // of the header region), then the user heap.
  for (int r = 0; r < rt->nranks; ++r) {
    rt->peer_state[r].store(0);
    rt->peer_sym.push_back(rt->transport->Segment(r) + kHeaderBytes - kWorkspaceBytes);
  }
  rt->sym_base = rt->peer_sym[rt->rank];
  rt->sym_bytes = kWorkspaceBytes + rt->heap_bytes;
  rt->heap = rt->sym_base + kWorkspaceBytes;
  rt->alloc = std::make_unique<OffsetAllocator>(rt->heap_bytes);
  Runtime* raw = rt.get();
  rt->transport->StartMonitor([raw](int pe) { OnPeerLost(raw, pe); });
  // Every rank has mapped every segment before anyone uses one.
  Status s = rt->boot->Barrier();
  if (!s.ok()) {
    rt->transport->Shutdown();
    return s;
  }
  HP_INFO("initialized: %d ranks, heap %zu bytes, timeout %.1f s, block_dim %d", rt->nranks, rt->heap_bytes,
          rt->config.timeout_sec, rt->config.block_dim);
  g_rt.store(rt.release(), std::memory_order_release);
  return Status::OK();
}

Status Finalize() {
  std::lock_guard<std::mutex> lk(g_lifecycle_mu);
  Runtime* rt = g_rt.load();
  if (!rt) return NotInit("Finalize");
  Status s = Barrier();
  // From here on a peer that closes its sockets is leaving, not dying. The
  // second barrier makes sure every rank knows that before any rank closes.
  rt->finalizing.store(true);
  if (s.ok()) s = Barrier();
  g_rt.store(nullptr, std::memory_order_release);
  {
    std::lock_guard<std::mutex> plk(rt->pool_mu);
    rt->pool.reset();
  }
  rt->transport->Shutdown();
  rt->boot.reset();
  delete rt;
  SetLogRank(-1);
  return s;
}

Status BootstrapAllgather(const void* mine, size_t bytes, void* all) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("BootstrapAllgather");
  if (bytes > (size_t{1} << 20))
    return Status::InvalidArgument("BootstrapAllgather: " + std::to_string(bytes) + " bytes is more than 1 MiB");
  if (bytes && (!mine || !all)) return Status::InvalidArgument("BootstrapAllgather: null buffer");
  // The length travels first, so ranks that disagree fail instead of misreading.
  uint64_t len = bytes;
  std::vector<uint64_t> lens(rt->nranks);
  HPSHMEM_RETURN_IF_ERROR(rt->boot->Allgather(&len, sizeof len, lens.data()));
  for (int r = 0; r < rt->nranks; ++r) {
    if (lens[r] != len) {
      return Status::CollectiveMismatch("BootstrapAllgather: rank " + std::to_string(r) + " contributes " +
                                        std::to_string(lens[r]) + " bytes, rank " + std::to_string(rt->rank) +
                                        " " + std::to_string(len));
    }
  }
  return rt->boot->Allgather(mine, bytes, all);
}

Status BootstrapBarrier() {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("BootstrapBarrier");
  return rt->boot->Barrier();
}

bool IsInitialized() { return CurrentRuntime() != nullptr; }
int MyPe() { Runtime* rt = CurrentRuntime(); return rt ? rt->rank : -1; }
int NPes() { Runtime* rt = CurrentRuntime(); return rt ? rt->nranks : 0; }

// ---------------------------------------------------------------- heap

namespace {

// Publishes this rank's call in the header, waits for every rank to publish
// theirs (a barrier), and compares. All ranks see the same records, so all
// reach the same verdict: either every rank proceeds or every rank fails.
Status VerifyCollectiveCall(Runtime* rt, uint64_t kind, uint64_t a, uint64_t b, const char* what) {
  uint64_t seq = ++rt->alloc_seq;
  AllocRecord& mine = rt->transport->Header(rt->rank)->alloc[seq % 2];
  mine.kind = kind;
  mine.a = a;
  mine.b = b;
  std::atomic_ref<uint64_t>(mine.seq).store(seq, std::memory_order_release);
  HPSHMEM_RETURN_IF_ERROR(Barrier());
  auto describe = [](const AllocRecord& r) {
    if (r.kind == kAllocMalloc) return "malloc(" + std::to_string(r.a) + " bytes, alignment " + std::to_string(r.b) + ")";
    if (r.kind == kAllocFree) return std::string(r.b ? "free(heap offset " : "free(invalid pointer at heap offset ") + std::to_string(r.a) + ")";
    return std::string("?");
  };
  for (int p = 0; p < rt->nranks; ++p) {
    const AllocRecord& r = rt->transport->Header(p)->alloc[seq % 2];
    uint64_t rseq = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(r.seq)).load(std::memory_order_acquire);
    if (rseq != seq) {
      return Status::CollectiveMismatch(std::string(what) + ": rank " + std::to_string(p) + " is at allocator call #" +
                                        std::to_string(rseq) + " while rank " + std::to_string(rt->rank) +
                                        " is at #" + std::to_string(seq) +
                                        " (every rank must allocate and free in the same order)");
    }
    if (r.kind != mine.kind || r.a != mine.a || r.b != mine.b) {
      return Status::CollectiveMismatch(std::string(what) + ": allocator call #" + std::to_string(seq) +
                                        " differs between ranks: rank " + std::to_string(rt->rank) + " called " +
                                        describe(mine) + ", rank " + std::to_string(p) + " called " + describe(r) +
                                        " (every rank must allocate and free the same sizes in the same order)");
    }
  }
  return Status::OK();
}

Status AllocImpl(size_t alignment, size_t bytes, void** out, const char* what) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit(what);
  if (!out) return Status::InvalidArgument(std::string(what) + ": out is null");
  *out = nullptr;
  if (alignment == 0 || (alignment & (alignment - 1)) || alignment > kSegmentAlign)
    return Status::InvalidArgument(std::string(what) + ": alignment " + std::to_string(alignment) +
                                   " is not a power of two <= " + std::to_string(kSegmentAlign));
  std::lock_guard<std::mutex> lk(rt->alloc_mu);
  HPSHMEM_RETURN_IF_ERROR(VerifyCollectiveCall(rt, kAllocMalloc, bytes, alignment, what));
  size_t off = 0;
  Status s = rt->alloc->Allocate(bytes, alignment, &off);
  if (!s.ok()) {
    return Status::OutOfMemory(std::string(what) + ": symmetric heap exhausted: " + s.message() + "; " +
                               std::to_string(rt->alloc->bytes_live()) + " of " + std::to_string(rt->heap_bytes) +
                               " bytes live in " + std::to_string(rt->alloc->live().size()) +
                               " allocations, largest free block " + std::to_string(rt->alloc->largest_free()) +
                               " bytes; raise SYMMETRIC_MEMORY_HEAP_SIZE (e.g. " +
                               std::to_string(((rt->heap_bytes + bytes) >> 30) + 1) + "g)");
  }
  *out = rt->heap + off;
  return Status::OK();
}

}  // namespace

Status Malloc(size_t bytes, void** out) { return AllocImpl(64, bytes, out, "Malloc"); }

Status AlignedAlloc(size_t alignment, size_t bytes, void** out) {
  return AllocImpl(alignment, bytes, out, "AlignedAlloc");
}

Status Calloc(size_t count, size_t size, void** out) {
  if (size && count > SIZE_MAX / size) {
    // Still enter the collective so that peers making the same call fail too.
    return AllocImpl(64, SIZE_MAX, out, "Calloc");
  }
  HPSHMEM_RETURN_IF_ERROR(AllocImpl(64, count * size, out, "Calloc"));
  std::memset(*out, 0, count * size);
  // No rank may write into the new block before every rank has zeroed its
  // copy, or the memset would erase the write.
  return Barrier();
}

Status Free(void* ptr) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("Free");
  std::lock_guard<std::mutex> lk(rt->alloc_mu);
  auto a = reinterpret_cast<uintptr_t>(ptr), base = reinterpret_cast<uintptr_t>(rt->heap);
  bool inside = a >= base && a - base < rt->heap_bytes;
  uint64_t off = inside ? a - base : UINT64_MAX;
  bool valid = inside && rt->alloc->LiveSize(off) > 0;
  // An invalid free still takes part in the collective check so that every
  // rank reports it instead of the others hanging in a barrier.
  Status s = VerifyCollectiveCall(rt, kAllocFree, off, valid ? 1 : 0, "Free");
  if (!s.ok()) return s;
  if (!valid) {
    return Status::InvalidFree(inside ? "Free: heap offset " + std::to_string(off) +
                                            " is not a live allocation (double free?)"
                                      : "Free: pointer " + Hex(a) + " is not in the symmetric heap");
  }
  return rt->alloc->Release(off);
}

CollectiveCounters* GetCollectiveCounters() {
  Runtime* rt = CurrentRuntime();
  return rt ? &rt->coll : nullptr;
}

Status CollectiveWorkspace(void** base) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("CollectiveWorkspace");
  *base = rt->sym_base;
  return Status::OK();
}

void* Ptr(const void* local, int pe) {
  Runtime* rt = CurrentRuntime();
  if (!rt || pe < 0 || pe >= rt->nranks) return nullptr;
  size_t off;
  if (!HeapOffset(rt, local, 0, "Ptr", &off).ok()) return nullptr;
  return rt->peer_sym[pe] + off;
}

bool IsSymmetric(const void* p, size_t bytes) {
  Runtime* rt = CurrentRuntime();
  size_t off;
  return rt && HeapOffset(rt, p, bytes, "IsSymmetric", &off).ok();
}

// ---------------------------------------------------------------- RMA

Status PutMem(void* dest, const void* src, size_t bytes, int pe) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("PutMem");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, "PutMem"));
  HPSHMEM_RETURN_IF_ERROR(HeapOffset(rt, dest, bytes, "PutMem dest", &off));
  if (bytes && !src) return Status::InvalidArgument("PutMem: src is null");
  if (bytes) CopyBytes(rt->peer_sym[pe] + off, src, bytes);
  return Status::OK();
}

Status GetMem(void* dest, const void* src, size_t bytes, int pe) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("GetMem");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, "GetMem"));
  HPSHMEM_RETURN_IF_ERROR(HeapOffset(rt, src, bytes, "GetMem src", &off));
  if (bytes && !dest) return Status::InvalidArgument("GetMem: dest is null");
  if (bytes) CopyBytes(dest, rt->peer_sym[pe] + off, bytes);
  return Status::OK();
}

// ---------------------------------------------------------------- signals

const char* CmpName(Cmp c) {
  switch (c) {
    case Cmp::kEq: return "==";
    case Cmp::kNe: return "!=";
    case Cmp::kGt: return ">";
    case Cmp::kGe: return ">=";
    case Cmp::kLt: return "<";
    case Cmp::kLe: return "<=";
  }
  return "?";
}

Status ValidateSignal(const void* sig, SignalType type, int64_t value, SignalOp op, int pe) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("Signal");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, "Signal"));
  HPSHMEM_RETURN_IF_ERROR(CheckSignal(rt, sig, type, "Signal", &off));
  if (op != SignalOp::kSet && op != SignalOp::kAdd)
    return Status::InvalidArgument("Signal: signal_op " + std::to_string(static_cast<int>(op)) +
                                   " is not SET (0) or ADD (1)");
  if (type == SignalType::kInt32 && (value < INT32_MIN || value > INT32_MAX))
    return Status::InvalidArgument("Signal: value " + std::to_string(value) + " does not fit an int32 signal");
  return Status::OK();
}

Status Signal(void* sig, SignalType type, int64_t value, SignalOp op, int pe) {
  HPSHMEM_RETURN_IF_ERROR(ValidateSignal(sig, type, value, op, pe));
  Runtime* rt = CurrentRuntime();
  size_t off = static_cast<uint8_t*>(sig) - rt->sym_base;
  // x86 non-temporal stores (large memcpy) are not ordered by a plain
  // release; sfence makes every earlier put visible before the signal.
  (void)Fence();
  uint8_t* target = rt->peer_sym[pe] + off;
  if (type == SignalType::kInt32) {
    std::atomic_ref<int32_t> w(*reinterpret_cast<int32_t*>(target));
    if (op == SignalOp::kSet) w.store(static_cast<int32_t>(value), std::memory_order_seq_cst);
    else w.fetch_add(static_cast<int32_t>(value), std::memory_order_seq_cst);
  } else {
    std::atomic_ref<int64_t> w(*reinterpret_cast<int64_t*>(target));
    if (op == SignalOp::kSet) w.store(value, std::memory_order_seq_cst);
    else w.fetch_add(value, std::memory_order_seq_cst);
  }
  Notify(rt->transport->Header(pe));
  return Status::OK();
}

Status PutMemSignal(void* dest, const void* src, size_t bytes, void* sig, SignalType type, int64_t value,
                    SignalOp op, int pe) {
  // Validate the signal before the put writes anything.
  HPSHMEM_RETURN_IF_ERROR(ValidateSignal(sig, type, value, op, pe));
  HPSHMEM_RETURN_IF_ERROR(PutMem(dest, src, bytes, pe));
  return Signal(sig, type, value, op, pe);
}

Status SignalFetch(const void* sig, SignalType type, int64_t* out) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("SignalFetch");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckSignal(rt, sig, type, "SignalFetch", &off));
  *out = LoadSignal(sig, type);
  return Status::OK();
}

Status SignalWaitUntil(const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed,
                       const char* label) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("SignalWaitUntil");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckSignal(rt, sig, type, "SignalWaitUntil", &off));
  if (!ValidCmp(cmp))
    return Status::InvalidArgument("SignalWaitUntil: compare_op " + std::to_string(static_cast<int>(cmp)) +
                                   " is not one of EQ(0) GT(1) LT(2) NE(3) GE(4) LE(5)");
  if (type == SignalType::kInt32 && (value < INT32_MIN || value > INT32_MAX))
    return Status::InvalidArgument("SignalWaitUntil: compare value " + std::to_string(value) +
                                   " does not fit an int32 signal");
  int64_t last = 0;
  auto ready = [&] {
    last = LoadSignal(sig, type);
    return Compare(last, cmp, value);
  };
  auto describe = [&] {
    std::string name = label ? std::string(label) : "signal at heap offset " + std::to_string(off);
    return "waiting for " + name + " (" + (type == SignalType::kInt32 ? "int32" : "int64") + ") " + CmpName(cmp) +
           " " + std::to_string(value) + ", last observed " + std::to_string(last);
  };
  Status s = WaitLoop(rt, rt->transport->Header(rt->rank), ready, describe);
  if (observed) *observed = last;
  return s;
}

Status Fence() {
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return Status::OK();
}

Status Quiet() { return Fence(); }

Status Barrier() {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("Barrier");
  // A barrier can never complete once a rank is gone; failing at entry also
  // keeps a failed job's stray arrivals from completing a later barrier.
  if (rt->lost_count.load(std::memory_order_acquire) > 0) {
    return Status::PeerDead("rank " + std::to_string(rt->rank) + ": barrier #" + std::to_string(rt->barrier_epoch + 1) +
                            " cannot complete: rank(s) " + rt->LostRanks() + " exited or were killed");
  }
  (void)Fence();
  uint64_t target = ++rt->barrier_epoch * static_cast<uint64_t>(rt->nranks);
  PeHeader* root = rt->transport->Header(0);
  std::atomic_ref<uint64_t> arrivals(root->barrier_arrivals);
  arrivals.fetch_add(1, std::memory_order_seq_cst);
  Notify(root);
  uint64_t seen = 0;
  auto ready = [&] { return (seen = arrivals.load(std::memory_order_acquire)) >= target; };
  auto describe = [&] {
    uint64_t base = target - rt->nranks;
    return "barrier #" + std::to_string(rt->barrier_epoch) + " (" + std::to_string(seen > base ? seen - base : 0) +
           " of " + std::to_string(rt->nranks) + " ranks arrived)";
  };
  return WaitLoop(rt, root, ready, describe);
}

// ---------------------------------------------------------------- info

Status GetRuntimeInfo(RuntimeInfo* out) {
  Runtime* rt = CurrentRuntime();
  if (!rt) return NotInit("GetRuntimeInfo");
  std::lock_guard<std::mutex> lk(rt->alloc_mu);
  out->rank = rt->rank;
  out->nranks = rt->nranks;
  out->heap_bytes = rt->heap_bytes;
  out->timeout_sec = rt->config.timeout_sec;
  out->block_dim = rt->config.block_dim;
  out->bytes_live = rt->alloc->bytes_live();
  out->bytes_peak = rt->alloc->bytes_peak();
  out->allocations_live = rt->alloc->live().size();
  return Status::OK();
}

Status EnvironmentSettings(RuntimeInfo* out) {
  Config c;
  HPSHMEM_RETURN_IF_ERROR(Config::Build(InitAttr{}, &c));
  *out = RuntimeInfo{};
  out->heap_bytes = c.heap_bytes;
  out->timeout_sec = c.timeout_sec;
  out->block_dim = c.block_dim;
  return Status::OK();
}

std::string DebugState() {
  std::lock_guard<std::mutex> lk(g_lifecycle_mu);
  Runtime* rt = g_rt.load();
  std::ostringstream o;
  if (!rt) {
    o << "{\"initialized\": false}";
    return o.str();
  }
  std::lock_guard<std::mutex> alk(rt->alloc_mu);
  static const char* kLevels[] = {"error", "warn", "info", "debug"};
  o << "{\"initialized\": true, \"rank\": " << rt->rank << ", \"world_size\": " << rt->nranks
    << ", \"transport\": \"" << rt->transport->name() << "\", \"config\": {\"heap_bytes\": " << rt->heap_bytes
    << ", \"timeout_sec\": " << rt->config.timeout_sec << ", \"block_dim\": " << rt->config.block_dim
    << ", \"log_level\": \"" << kLevels[static_cast<int>(rt->config.log_level)] << "\", \"authenticated\": "
    << (rt->boot->has_secret() ? "true" : "false") << ", \"streaming_copy_bytes\": "
    << (StreamingCopyThreshold() == SIZE_MAX ? std::string("null") : std::to_string(StreamingCopyThreshold()))
    << "}, \"heap\": {\"bytes_live\": " << rt->alloc->bytes_live()
    << ", \"bytes_peak\": " << rt->alloc->bytes_peak() << ", \"bytes_free\": "
    << rt->heap_bytes - rt->alloc->bytes_live() << ", \"allocator_calls\": " << rt->alloc_seq
    << ", \"live_allocations\": [";
  bool first = true;
  for (auto& [off, len] : rt->alloc->live()) {
    o << (first ? "" : ", ") << "{\"offset\": " << off << ", \"bytes\": " << len << "}";
    first = false;
  }
  o << "]}, \"barriers\": " << rt->barrier_epoch << ", \"lost_ranks\": [" << rt->LostRanks() << "]}";
  return o.str();
}

// ---------------------------------------------------------------- parallel

Status ParallelFor(int n, const std::function<Status(int)>& fn) {
  Runtime* rt = CurrentRuntime();
  if (n <= 1 || !rt) {
    for (int i = 0; i < n; ++i) HPSHMEM_RETURN_IF_ERROR(fn(i));
    return Status::OK();
  }
  WorkerPool* pool;
  {
    std::lock_guard<std::mutex> lk(rt->pool_mu);
    if (!rt->pool) rt->pool = std::make_unique<WorkerPool>();
    pool = rt->pool.get();
  }
  return pool->Run(n, fn);
}

int DefaultBlockDim() {
  Runtime* rt = CurrentRuntime();
  return rt ? rt->config.block_dim : 1;
}

}  // namespace hpshmem
