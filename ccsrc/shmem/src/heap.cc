// Collective allocation: the same offsets on every rank, checked across ranks.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "log.h"
#include "runtime.h"

namespace hpshmem {
namespace {

enum AllocKind : uint64_t { kAllocMalloc = 1, kAllocFree = 2, kAllocFreeDeferred = 3 };

std::string Describe(const AllocRecord& r) {
  if (r.kind == kAllocMalloc) return "malloc(" + std::to_string(r.a) + " bytes, alignment " + std::to_string(r.b) + ")";
  if (r.kind == kAllocFree || r.kind == kAllocFreeDeferred) {
    return std::string(r.b ? "free(heap offset " : "free(invalid pointer at heap offset ") + std::to_string(r.a) +
           (r.kind == kAllocFreeDeferred ? ", deferred)" : ")");
  }
  return "?";
}

// Deferred frees that no rank holds any more (`held`: the OR of one call's
// records, the same on every rank) become allocatable again, in slot order.
void ReclaimDeferred(Runtime* rt, uint64_t held) {
  for (uint64_t done = rt->deferred_pending & ~held; done; done &= done - 1) {
    int slot = __builtin_ctzll(done);
    (void)rt->alloc->Reclaim(rt->deferred_off[slot]);  // retired by FreeImpl: cannot fail
    rt->deferred_pending &= ~(uint64_t{1} << slot);
  }
}

// Puts this rank's call into its slot on every rank, waits for every rank to
// do the same (a barrier), and compares. All ranks see the same records, so
// all reach the same verdict: either every rank proceeds or every rank fails.
Status VerifyCollectiveCall(Runtime* rt, uint64_t kind, uint64_t a, uint64_t b, const char* what) {
  uint64_t seq = ++rt->alloc_seq;
  const AllocRecord mine{seq, kind, a, b, rt->deferred_held.load(std::memory_order_acquire) & rt->deferred_pending};
  const size_t slot = AllocRecordOffset(rt->rank, seq);
  for (int k = 0; k < rt->nranks; ++k) {
    int p = (rt->rank + k) % rt->nranks;
    if (rt->peer_state[p].load(std::memory_order_relaxed) != static_cast<uint8_t>(PeerState::kAlive)) continue;
    HPSHMEM_RETURN_IF_ERROR(rt->route[p]->Put(p, slot, &mine, sizeof mine));
  }
  HPSHMEM_RETURN_IF_ERROR(Barrier());
  const uint8_t* base = rt->segment->base();
  uint64_t held = 0;
  for (int p = 0; p < rt->nranks; ++p) {
    AllocRecord r;
    std::memcpy(&r, base + AllocRecordOffset(p, seq), sizeof r);
    held |= r.held;
    if (r.seq != seq) {
      return Status::CollectiveMismatch(std::string(what) + ": rank " + std::to_string(p) + " is at allocator call #" +
                                        std::to_string(r.seq) + " while rank " + std::to_string(rt->rank) + " is at #" +
                                        std::to_string(seq) + " (every rank must allocate and free in the same order)");
    }
    if (r.kind != mine.kind || r.a != mine.a || r.b != mine.b) {
      return Status::CollectiveMismatch(std::string(what) + ": allocator call #" + std::to_string(seq) +
                                        " differs between ranks: rank " + std::to_string(rt->rank) + " called " +
                                        Describe(mine) + ", rank " + std::to_string(p) + " called " + Describe(r) +
                                        " (every rank must allocate and free the same sizes in the same order)");
    }
  }
  ReclaimDeferred(rt, held);
  return Status::OK();
}

std::string RetiredNote(const Runtime* rt) {
  if (!rt->alloc->retired_count()) return "";
  return std::to_string(rt->alloc->bytes_retired()) + " bytes in " + std::to_string(rt->alloc->retired_count()) +
         " freed allocations still referenced by tensor views on some rank (reusable once those are gone), ";
}

Status AllocImpl(size_t alignment, size_t bytes, void** out, const char* what) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit(what);
  if (!out) return Status::InvalidArgument(std::string(what) + ": out is null");
  *out = nullptr;
  if (alignment == 0 || (alignment & (alignment - 1)) || alignment > kHeapAlign)
    return Status::InvalidArgument(std::string(what) + ": alignment " + std::to_string(alignment) +
                                   " is not a power of two <= " + std::to_string(kHeapAlign));
  std::lock_guard<std::mutex> lk(rt->alloc_mu);
  HPSHMEM_RETURN_IF_ERROR(VerifyCollectiveCall(rt, kAllocMalloc, bytes, alignment, what));
  size_t off = 0;
  Status s;
  {
    std::unique_lock<std::shared_mutex> change(rt->live_mu);
    s = rt->alloc->Allocate(bytes, alignment, &off);
  }
  if (!s.ok()) {
    return Status::OutOfMemory(std::string(what) + ": symmetric heap exhausted: " + s.message() + "; " +
                               std::to_string(rt->alloc->bytes_live()) + " of " + std::to_string(rt->heap_bytes) +
                               " bytes live in " + std::to_string(rt->alloc->live().size()) + " allocations, " +
                               RetiredNote(rt) + "largest free block " + std::to_string(rt->alloc->largest_free()) +
                               " bytes; raise SYMMETRIC_MEMORY_HEAP_SIZE (e.g. " +
                               std::to_string(((rt->heap_bytes + bytes) >> 30) + 1) + "g)");
  }
  *out = rt->heap + off;
  return Status::OK();
}

Status FreeImpl(void* ptr, bool deferred, uint64_t* token) {
  const char* what = deferred ? "FreeDeferred" : "Free";
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit(what);
  std::lock_guard<std::mutex> lk(rt->alloc_mu);
  auto a = reinterpret_cast<uintptr_t>(ptr), base = reinterpret_cast<uintptr_t>(rt->heap);
  bool inside = a >= base && a - base < rt->heap_bytes;
  uint64_t off = inside ? a - base : UINT64_MAX;
  bool valid = inside && rt->alloc->LiveSize(off) > 0;
  // An invalid free still takes part in the collective check so that every
  // rank reports it instead of the others hanging in a barrier.
  Status s = VerifyCollectiveCall(rt, deferred ? kAllocFreeDeferred : kAllocFree, off, valid ? 1 : 0, what);
  if (!s.ok()) return s;
  if (!valid) {
    return Status::InvalidFree(inside ? std::string(what) + ": heap offset " + std::to_string(off) +
                                            " is not a live allocation (double free?)"
                                      : std::string(what) + ": pointer " + Hex(a) + " is not in the symmetric heap");
  }
  {
    std::unique_lock<std::shared_mutex> change(rt->live_mu);
    if (!deferred) return rt->alloc->Release(off);
    HPSHMEM_RETURN_IF_ERROR(rt->alloc->Retire(off));
  }
  uint64_t busy = rt->deferred_pending;
  if (busy == ~uint64_t{0}) {
    // Every rank sees the same slots busy, so every rank keeps this block retired alike.
    if (rt->deferred_unslotted++ == 0) {
      HP_WARN(
          "FreeDeferred: %d freed allocations are still referenced by views; further ones stay out of the "
          "heap until finalize",
          Runtime::kDeferSlots);
    }
    *token = 0;
    return Status::OK();
  }
  int slot = __builtin_ctzll(~busy);
  rt->deferred_off[slot] = off;
  rt->deferred_pending |= uint64_t{1} << slot;
  rt->deferred_held.fetch_or(uint64_t{1} << slot, std::memory_order_acq_rel);
  *token = (rt->generation << 8) | static_cast<uint64_t>(slot + 1);
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
  uint64_t unused;
  return FreeImpl(ptr, false, &unused);
}

Status FreeDeferred(void* ptr, uint64_t* token) {
  *token = 0;
  return FreeImpl(ptr, true, token);
}

void ReleaseDeferred(uint64_t token) {
  if (!token) return;
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt || (token >> 8) != rt->generation) return;  // a finalized runtime's block: nothing to give back
  int slot = static_cast<int>(token & 0xff) - 1;
  if (slot < 0 || slot >= Runtime::kDeferSlots) return;
  rt->deferred_held.fetch_and(~(uint64_t{1} << slot), std::memory_order_acq_rel);
}

Status CollectiveWorkspace(void** base) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("CollectiveWorkspace");
  *base = rt->sym_base;
  return Status::OK();
}

void* Ptr(const void* local, int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt || pe < 0 || pe >= rt->nranks || !rt->peer_sym[pe]) return nullptr;
  size_t off;
  if (!SymOffset(rt, local, 0, "Ptr", &off).ok()) return nullptr;
  return rt->peer_sym[pe] + off;
}

bool IsSymmetric(const void* p, size_t bytes) {
  CallScope call;
  Runtime* rt = call.rt();
  size_t off;
  return rt && SymOffset(rt, p, bytes, "IsSymmetric", &off).ok();
}

bool InLiveAllocation(const void* p, size_t bytes) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return false;
  auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(rt->heap);
  if (a < base || a - base >= rt->heap_bytes) return false;
  std::shared_lock<std::shared_mutex> read(rt->live_mu);
  return rt->alloc->WithinLive(a - base, bytes);
}

bool DirectlyReachable(int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  return rt && pe >= 0 && pe < rt->nranks && rt->peer_sym[pe] != nullptr;
}

int HostLeader(int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt || pe < 0 || pe >= rt->nranks || rt->host_leader.size() != static_cast<size_t>(rt->nranks)) return -1;
  return rt->host_leader[pe];
}

namespace {
bool PageAligned(uintptr_t v) { return v % static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)) == 0; }

// mremap to a fixed address through the system call itself: UCX's memory
// hooks replace the libc function and do not pass the new address on.
void* MremapFixed(void* old, size_t old_bytes, size_t bytes, void* at) {
  long r = ::syscall(SYS_mremap, old, old_bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, at);
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}
}  // namespace

Status AliasHeap(void* at, const void* heap, size_t bytes) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("AliasHeap");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(SymOffset(rt, heap, bytes, "AliasHeap", &off));
  auto a = reinterpret_cast<uintptr_t>(at), h = reinterpret_cast<uintptr_t>(heap);
  if (!PageAligned(a) || !PageAligned(h) || !PageAligned(bytes) || bytes == 0)
    return Status::InvalidArgument("AliasHeap: addresses and size must be page-aligned and the size non-zero");
  if (a < h + bytes && h < a + bytes) return Status::InvalidArgument("AliasHeap: the ranges overlap");
  std::memcpy(const_cast<void*>(heap), at, bytes);
  // mremap with old_size 0 maps the same shared pages a second time; with
  // MREMAP_FIXED the new mapping replaces what was at `at` in one step, so
  // the old contents (copied above) never disappear from under the program.
  void* r = MremapFixed(const_cast<void*>(heap), 0, bytes, at);
  if (r != at) return Status::FromErrno("mremap of heap pages over the program's data");
  return Status::OK();
}

Status UnaliasHeap(void* at, size_t bytes) {
  auto a = reinterpret_cast<uintptr_t>(at);
  if (!PageAligned(a) || !PageAligned(bytes) || bytes == 0)
    return Status::InvalidArgument("UnaliasHeap: address and size must be page-aligned and the size non-zero");
  void* tmp = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return Status::FromErrno("mmap while restoring the program's data");
  std::memcpy(tmp, at, bytes);
  // Moving the private copy over the alias swaps the two in one step.
  if (MremapFixed(tmp, bytes, bytes, at) != at) {
    Status s = Status::FromErrno("mremap while restoring the program's data");
    ::munmap(tmp, bytes);
    return s;
  }
  return Status::OK();
}

Doorbell* PeerDoorbell(int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt || pe < 0 || pe >= rt->nranks || !rt->peer_sym[pe]) return nullptr;
  return DoorbellFor(rt->peer_sym[pe] - kSymOffset, kSymOffset);
}

Status GetDirectMap(DirectMap* out) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("GetDirectMap");
  out->sym_base = rt->sym_base;
  out->sym_bytes = rt->sym_bytes;
  out->peer_sym = rt->peer_sym.data();
  out->nranks = rt->nranks;
  return Status::OK();
}

}  // namespace hpshmem
