// Collectives (team forms and the deprecated active-set forms), reductions
// and distributed locks, over libhpshmem's team algorithms.
#include <complex>
#include <cstring>
#include <map>
#include <tuple>

#include "ops/collective/team_block.h"
#include "ops/ops.h"
#include "state.h"

using namespace hpshmem;
using namespace hpshmem::oshmem;

namespace {

// The team of an active set (PE_start, 2^logPE_stride, PE_size): created the
// first time its members use it (collective over them), then reused.
shmem_team_t ActiveSet(int start, int log_stride, int size, const long* pSync, const char* fn) {
  RequireInit(fn);
  if (!pSync) Fatal(fn, "pSync is null");
  int n = S().npes;
  if (size < 1 || start < 0 || log_stride < 0 || log_stride > 30)
    Fatal(fn, "the active set (PE_start " + std::to_string(start) + ", logPE_stride " + std::to_string(log_stride) +
                  ", PE_size " + std::to_string(size) + ") is malformed");
  long stride = 1L << log_stride, last = start + stride * (size - 1);
  if (last >= n) Fatal(fn, "the active set reaches PE " + std::to_string(last) + " of " + std::to_string(n));
  if (start == 0 && stride == 1 && size == n) return SHMEM_TEAM_WORLD;
  static auto* sets = new std::map<std::tuple<int, int, int>, shmem_team_t>();
  auto key = std::make_tuple(start, log_stride, size);
  {
    std::lock_guard<std::mutex> lk(S().mu);
    auto it = sets->find(key);
    if (it != sets->end()) return it->second;
  }
  // Only the set's members call: the team is made among them alone.
  std::vector<int> pes;
  for (int i = 0; i < size; ++i) pes.push_back(static_cast<int>(start + stride * i));
  shmem_team_t t = SHMEM_TEAM_INVALID;
  if (MakeTeam(pes, nullptr, 0, &t, fn) != 0)
    Fatal(fn, "no room in the collective workspace for the active set's team; destroy teams no longer used");
  if (t == SHMEM_TEAM_INVALID) Fatal(fn, "this PE is not in the active set");
  std::lock_guard<std::mutex> lk(S().mu);
  (*sets)[key] = t;
  return t;
}

bool Usable(shmem_team_t team, const char* fn) {
  RequireInit(fn);
  return ValidTeam(team);
}

void Broadcast(shmem_team_t t, void* dest, const void* src, size_t bytes, int root, bool root_dest, const char* fn) {
  if (root < 0 || root >= static_cast<int>(t->pes.size()))
    Fatal(fn, "PE_root " + std::to_string(root) + " is not in the team of " + std::to_string(t->pes.size()));
  if (bytes <= t->eager_bytes)
    Check(ops::BroadcastSmall(dest, bytes, root, t->id, src), fn);
  else
    Check(ops::Broadcast(Sym(dest), bytes, root, t->id, src), fn);
  if (root_dest && t->me == root && dest != src) std::memmove(dest, src, bytes);
}

void Fcollect(shmem_team_t t, void* dest, const void* src, size_t bytes, const char* fn) {
  Check(ops::Allgather(Sym(dest), src, bytes, /*pull=*/false, 0, t->id), fn);
}

// Pieces of different sizes: the sizes are gathered first (which also tells
// that every member has entered, so its dest may be written), then each
// member puts its piece at its offset everywhere.
void Collect(shmem_team_t t, void* dest, const void* src, size_t bytes, const char* fn) {
  int n = static_cast<int>(t->pes.size());
  int64_t mine = static_cast<int64_t>(bytes);
  auto* sizes = static_cast<int64_t*>(S().scratch);
  Check(ops::Allgather(sizes, &mine, sizeof mine, false, 0, t->id), fn);
  size_t off = 0;
  for (int i = 0; i < t->me; ++i) off += static_cast<size_t>(sizes[i]);
  auto* d = static_cast<char*>(Sym(dest));
  for (int k = 0; k < n; ++k) {
    int p = (t->me + k) % n;
    PutToPe(d + off, src, bytes, t->pes[p], fn);  // the barrier's quiet completes those to other hosts
  }
  Check(ops::TeamBarrier(t->id), fn);
}

void Alltoall(shmem_team_t t, void* dest, const void* src, size_t bytes, const char* fn) {
  int n = static_cast<int>(t->pes.size());
  std::vector<const void*> sends(n);
  std::vector<int64_t> counts(n, static_cast<int64_t>(bytes));
  for (int p = 0; p < n; ++p) sends[p] = static_cast<const char*>(src) + p * bytes;
  Check(ops::Alltoall(sends.data(), counts.data(), Sym(dest), counts.data(), 1, false, 0, t->id), fn);
}

// Element j of the block for member p is src[sst * (p * nelems + j)]; it
// lands at dest[dst * (me * nelems + j)] on p (strides in elements).
void Alltoalls(shmem_team_t t, void* dest, const void* src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t elem,
               const char* fn) {
  if (dst < 1 || sst < 1) Fatal(fn, "the strides must be at least 1");
  int n = static_cast<int>(t->pes.size());
  Check(ops::TeamBarrier(t->id), fn);  // every member's dest is free
  for (int k = 0; k < n; ++k) {
    int p = (t->me + k) % n;
    auto* d = static_cast<char*>(dest) + static_cast<ptrdiff_t>(t->me * nelems) * dst * static_cast<ptrdiff_t>(elem);
    auto* s = static_cast<const char*>(src) + static_cast<ptrdiff_t>(p * nelems) * sst * static_cast<ptrdiff_t>(elem);
    switch (elem) {
      case 1:
        shmem_iput8(d, s, dst, sst, nelems, t->pes[p]);
        break;
      case 2:
        shmem_iput16(d, s, dst, sst, nelems, t->pes[p]);
        break;
      case 4:
        shmem_iput32(d, s, dst, sst, nelems, t->pes[p]);
        break;
      case 8:
        shmem_iput64(d, s, dst, sst, nelems, t->pes[p]);
        break;
      default:
        shmem_iput128(d, s, dst, sst, nelems * elem / 16, t->pes[p]);
        break;
    }
  }
  Check(ops::TeamBarrier(t->id), fn);
}

template <class T>
struct Impl {
  using type = T;
};
template <>
struct Impl<float _Complex> {
  using type = std::complex<float>;
};
template <>
struct Impl<double _Complex> {
  using type = std::complex<double>;
};

template <class T>
constexpr ops::DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return ops::DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return ops::DType::kFloat64;
  else if constexpr (std::is_same_v<T, long double>)
    return ops::DType::kLongDouble;
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return ops::DType::kComplex64;
  else if constexpr (std::is_same_v<T, std::complex<double>>)
    return ops::DType::kComplex128;
  else if constexpr (std::is_signed_v<T>)
    return sizeof(T) == 1   ? ops::DType::kInt8
           : sizeof(T) == 2 ? ops::DType::kInt16
           : sizeof(T) == 4 ? ops::DType::kInt32
                            : ops::DType::kInt64;
  else
    return sizeof(T) == 1   ? ops::DType::kUInt8
           : sizeof(T) == 2 ? ops::DType::kUInt16
           : sizeof(T) == 4 ? ops::DType::kUInt32
                            : ops::DType::kUInt64;
}

template <class T>
int Reduce(shmem_team_t t, T* dest, const T* src, size_t n, ops::ReduceOp op, const char* fn) {
  if (!Usable(t, fn)) return 1;
  int tn = static_cast<int>(t->pes.size());
  size_t bytes = n * sizeof(T);
  if (tn > 1 && bytes <= t->eager_bytes && bytes * tn <= S().scratch_bytes) {
    // Small: every member's values in one eager allgather (no announcement
    // round), then each member reduces them itself, in team-rank order like
    // the runtime's allreduce, so all get the same bits.
    Check(ops::CheckReducible(DTypeOf<T>(), op, fn), fn);
    auto* all = static_cast<char*>(S().scratch);
    Check(ops::Allgather(all, src, bytes, /*pull=*/false, 0, t->id), fn);
    thread_local std::vector<const void*> srcs;
    srcs.resize(tn);
    for (int p = 0; p < tn; ++p) srcs[p] = all + p * bytes;
    Check(ops::ReduceInto(dest, srcs.data(), tn, n, DTypeOf<T>(), op, 1), fn);
    return 0;
  }
  Check(ops::Allreduce(Sym(dest), n, DTypeOf<T>(), op, ops::AllreduceAlgorithm::kAuto, t->id, src), fn);
  return 0;
}

// ---------------------------------------------------------------- locks
// An MCS queue lock in the lock's own symmetric word: on PE 0 the upper
// 32 bits hold the tail (last PE + 1; 0 = free); on every PE the lower
// 32 bits are that PE's queue node: bit 31 "still waiting", bits 0..30 the
// next PE + 1. Each waiter spins (or sleeps) on its own word only.
constexpr int64_t kWaiting = int64_t{1} << 31;
constexpr int64_t kNextMask = kWaiting - 1;

int32_t* Node(long* lock) { return reinterpret_cast<int32_t*>(lock); }
int32_t* Tail(long* lock) { return reinterpret_cast<int32_t*>(lock) + 1; }  // little-endian: the upper half

int64_t LockAmo(int32_t* word, AmoOp op, int64_t v, int64_t cmp, int pe, const char* fn) {
  int64_t old = 0;
  Check(Amo(Sym(word), SignalType::kInt32, op, v, cmp, pe, &old), fn);
  return static_cast<uint32_t>(old);
}

void CheckLock(long* lock, const char* fn) {
  RequireInit(fn);
  if (!lock || reinterpret_cast<uintptr_t>(lock) % 8) Fatal(fn, "the lock is null or not 8-byte aligned");
  if (!IsSymmetric(Sym(lock), sizeof(long))) Fatal(fn, "the lock is not a symmetric object");
}

}  // namespace

extern "C" {

void shmem_barrier_all(void) {
  RequireInit("shmem_barrier_all");
  Check(Barrier(), "shmem_barrier_all");
}

void shmem_sync_all(void) {
  RequireInit("shmem_sync_all");
  Check(Barrier(), "shmem_sync_all");
}

int shmem_sync(shmem_team_t team) { return shmem_team_sync(team); }

void hpshmem_sync_active_set(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  shmem_barrier(PE_start, logPE_stride, PE_size, pSync);
}

int shmem_team_sync(shmem_team_t team) {
  if (!Usable(team, "shmem_team_sync")) return 1;
  Check(ops::TeamBarrier(team->id), "shmem_team_sync");
  return 0;
}

int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems, int PE_root) {
  if (!Usable(team, "shmem_broadcastmem")) return 1;
  Broadcast(team, dest, source, nelems, PE_root, true, "shmem_broadcastmem");
  return 0;
}
int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  if (!Usable(team, "shmem_collectmem")) return 1;
  Collect(team, dest, source, nelems, "shmem_collectmem");
  return 0;
}
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  if (!Usable(team, "shmem_fcollectmem")) return 1;
  Fcollect(team, dest, source, nelems, "shmem_fcollectmem");
  return 0;
}
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  if (!Usable(team, "shmem_alltoallmem")) return 1;
  Alltoall(team, dest, source, nelems, "shmem_alltoallmem");
  return 0;
}
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems) {
  if (!Usable(team, "shmem_alltoallsmem")) return 1;
  Alltoalls(team, dest, source, dst, sst, nelems, 1, "shmem_alltoallsmem");
  return 0;
}

#define HP_COLL(T, N)                                                                                   \
  int shmem_##N##_broadcast(shmem_team_t t, T* d, const T* s, size_t n, int root) {                     \
    if (!Usable(t, "shmem_" #N "_broadcast")) return 1;                                                 \
    Broadcast(t, d, s, n * sizeof(T), root, true, "shmem_" #N "_broadcast");                            \
    return 0;                                                                                           \
  }                                                                                                     \
  int shmem_##N##_collect(shmem_team_t t, T* d, const T* s, size_t n) {                                 \
    if (!Usable(t, "shmem_" #N "_collect")) return 1;                                                   \
    Collect(t, d, s, n * sizeof(T), "shmem_" #N "_collect");                                            \
    return 0;                                                                                           \
  }                                                                                                     \
  int shmem_##N##_fcollect(shmem_team_t t, T* d, const T* s, size_t n) {                                \
    if (!Usable(t, "shmem_" #N "_fcollect")) return 1;                                                  \
    Fcollect(t, d, s, n * sizeof(T), "shmem_" #N "_fcollect");                                          \
    return 0;                                                                                           \
  }                                                                                                     \
  int shmem_##N##_alltoall(shmem_team_t t, T* d, const T* s, size_t n) {                                \
    if (!Usable(t, "shmem_" #N "_alltoall")) return 1;                                                  \
    Alltoall(t, d, s, n * sizeof(T), "shmem_" #N "_alltoall");                                          \
    return 0;                                                                                           \
  }                                                                                                     \
  int shmem_##N##_alltoalls(shmem_team_t t, T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n) { \
    if (!Usable(t, "shmem_" #N "_alltoalls")) return 1;                                                 \
    Alltoalls(t, d, s, dst, sst, n, sizeof(T), "shmem_" #N "_alltoalls");                               \
    return 0;                                                                                           \
  }
HPSHMEM_RMA_TYPES(HP_COLL)

// Reductions. C's complex types are layout-compatible with std::complex,
// which the reduction kernels take.
#define HP_REDUCE(T, N, OP, K)                                                                       \
  int shmem_##N##_##OP##_reduce(shmem_team_t t, T* d, const T* s, size_t n) {                        \
    using U = Impl<T>::type;                                                                         \
    return Reduce<U>(t, reinterpret_cast<U*>(d), reinterpret_cast<const U*>(s), n, ops::ReduceOp::K, \
                     "shmem_" #N "_" #OP "_reduce");                                                 \
  }
#define HP_REDUCE_BIT(T, N) HP_REDUCE(T, N, and, kAnd) HP_REDUCE(T, N, or, kOr) HP_REDUCE(T, N, xor, kXor)
#define HP_REDUCE_MINMAX(T, N) HP_REDUCE(T, N, max, kMax) HP_REDUCE(T, N, min, kMin)
#define HP_REDUCE_ARITH(T, N) HP_REDUCE(T, N, sum, kSum) HP_REDUCE(T, N, prod, kProd)
HPSHMEM_BITWISE_REDUCE_TYPES(HP_REDUCE_BIT)
HPSHMEM_MINMAX_REDUCE_TYPES(HP_REDUCE_MINMAX)
HPSHMEM_ARITH_REDUCE_TYPES(HP_REDUCE_ARITH)

// ---------------------------------------------------------------- deprecated active-set forms

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  shmem_team_t t = ActiveSet(PE_start, logPE_stride, PE_size, pSync, "shmem_barrier");
  Check(ops::TeamBarrier(t->id), "shmem_barrier");
}

#define HP_ASET(S)                                                                                                   \
  void shmem_broadcast##S(void* d, const void* s, size_t n, int root, int start, int log_stride, int size,           \
                          long* pSync) {                                                                             \
    shmem_team_t t = ActiveSet(start, log_stride, size, pSync, "shmem_broadcast" #S);                                \
    Broadcast(t, d, s, n * (S / 8), root, false, "shmem_broadcast" #S);                                              \
  }                                                                                                                  \
  void shmem_collect##S(void* d, const void* s, size_t n, int start, int log_stride, int size, long* pSync) {        \
    shmem_team_t t = ActiveSet(start, log_stride, size, pSync, "shmem_collect" #S);                                  \
    Collect(t, d, s, n * (S / 8), "shmem_collect" #S);                                                               \
  }                                                                                                                  \
  void shmem_fcollect##S(void* d, const void* s, size_t n, int start, int log_stride, int size, long* pSync) {       \
    shmem_team_t t = ActiveSet(start, log_stride, size, pSync, "shmem_fcollect" #S);                                 \
    Fcollect(t, d, s, n * (S / 8), "shmem_fcollect" #S);                                                             \
  }                                                                                                                  \
  void shmem_alltoall##S(void* d, const void* s, size_t n, int start, int log_stride, int size, long* pSync) {       \
    shmem_team_t t = ActiveSet(start, log_stride, size, pSync, "shmem_alltoall" #S);                                 \
    Alltoall(t, d, s, n * (S / 8), "shmem_alltoall" #S);                                                             \
  }                                                                                                                  \
  void shmem_alltoalls##S(void* d, const void* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int start, int log_stride, \
                          int size, long* pSync) {                                                                   \
    shmem_team_t t = ActiveSet(start, log_stride, size, pSync, "shmem_alltoalls" #S);                                \
    Alltoalls(t, d, s, dst, sst, n, S / 8, "shmem_alltoalls" #S);                                                    \
  }
HP_ASET(32)
HP_ASET(64)

#define HP_TOALL(T, N, OP, K)                                                                                          \
  void shmem_##N##_##OP##_to_all(T* d, const T* s, int n, int start, int log_stride, int size, T* pWrk, long* pSync) { \
    const char* fn = "shmem_" #N "_" #OP "_to_all";                                                                    \
    shmem_team_t t = ActiveSet(start, log_stride, size, pSync, fn);                                                    \
    if (n < 0) Fatal(fn, "nreduce is negative");                                                                       \
    using U = Impl<T>::type;                                                                                           \
    Reduce<U>(t, reinterpret_cast<U*>(d), reinterpret_cast<const U*>(s), static_cast<size_t>(n), ops::ReduceOp::K,     \
              fn);                                                                                                     \
  }
#define HP_TOALL_BIT(T, N) HP_TOALL(T, N, and, kAnd) HP_TOALL(T, N, or, kOr) HP_TOALL(T, N, xor, kXor)
#define HP_TOALL_MINMAX(T, N) HP_TOALL(T, N, max, kMax) HP_TOALL(T, N, min, kMin)
#define HP_TOALL_ARITH(T, N) HP_TOALL(T, N, sum, kSum) HP_TOALL(T, N, prod, kProd)
HPSHMEM_TOALL_BITWISE_TYPES(HP_TOALL_BIT)
HPSHMEM_TOALL_MINMAX_TYPES(HP_TOALL_MINMAX)
HPSHMEM_TOALL_ARITH_TYPES(HP_TOALL_ARITH)

// ---------------------------------------------------------------- locks

void shmem_set_lock(long* lock) {
  const char* fn = "shmem_set_lock";
  CheckLock(lock, fn);
  int me = S().me;
  LockAmo(Node(lock), AmoOp::kSet, kWaiting, 0, me, fn);
  int64_t prev = LockAmo(Tail(lock), AmoOp::kSwap, me + 1, 0, 0, fn);
  if (prev == 0) return;
  // Queue behind prev, then wait on this PE's own node until prev hands over.
  LockAmo(Node(lock), AmoOp::kOr, me + 1, 0, static_cast<int>(prev - 1), fn);
  int32_t* node = Node(lock);
  auto handed = [node] { return (static_cast<uint32_t>(__atomic_load_n(node, __ATOMIC_ACQUIRE)) & kWaiting) == 0; };
  if (!handed()) Check(WaitUntil(handed, [] { return std::string("shmem_set_lock waiting for the lock"); }), fn);
}

int shmem_test_lock(long* lock) {
  const char* fn = "shmem_test_lock";
  CheckLock(lock, fn);
  int me = S().me;
  LockAmo(Node(lock), AmoOp::kSet, kWaiting, 0, me, fn);
  return LockAmo(Tail(lock), AmoOp::kCompareSwap, me + 1, 0, 0, fn) == 0 ? 0 : 1;
}

void shmem_clear_lock(long* lock) {
  const char* fn = "shmem_clear_lock";
  CheckLock(lock, fn);
  int me = S().me;
  Check(Quiet(), fn);  // what the holder wrote is complete before the next holder enters
  int32_t* node = Node(lock);
  auto next = [node] { return static_cast<uint32_t>(__atomic_load_n(node, __ATOMIC_ACQUIRE)) & kNextMask; };
  if (next() == 0) {
    if (LockAmo(Tail(lock), AmoOp::kCompareSwap, 0, me + 1, 0, fn) == me + 1) return;  // nobody queued
    // A PE swapped itself in as the tail but has not linked to this one yet.
    Check(WaitUntil([&] { return next() != 0; },
                    [] { return std::string("shmem_clear_lock waiting for the next holder to queue"); }),
          fn);
  }
  int successor = static_cast<int>(next()) - 1;
  LockAmo(Node(lock), AmoOp::kSet, 0, 0, me, fn);
  LockAmo(Node(lock), AmoOp::kAnd, ~kWaiting, 0, successor, fn);
}

}  // extern "C"
