// RMA, signals, atomics, point-to-point synchronization and ordering. Every
// routine validates through the runtime (which checks the PE, the range and
// liveness before it writes) and maps onto one of its calls.
#include <complex>
#include <cstring>
#include <type_traits>

#include "ops/ops.h"
#include "state.h"

using namespace hpshmem;
using namespace hpshmem::oshmem;

namespace {

// Up to this size a put or get to a mapped peer takes the direct route here;
// above it the runtime's ops (worker threads) pay for their call.
constexpr size_t kDirectCopyMax = 8 << 20;

}  // namespace

namespace hpshmem::oshmem {

void PutToPe(void* d, const void* src, size_t bytes, int g, const char* fn) {
  if (bytes == 0) return;  // no transfer: the pointers may be anything, even null
  if (bytes <= kDirectCopyMax && src) {
    if (uint8_t* p = Direct(d, bytes, g)) {
      PutDirect(p, src, bytes, S().bells[g]);
      return;
    }
  }
  // To another host a put returns once `src` may be reused, as OpenSHMEM
  // asks; fence orders it, quiet and barriers complete it.
  if (Remote(g)) return Check(PutMemNbi(d, src, bytes, g), fn);
  Check(ops::PutMem(d, src, bytes, g), fn);
}

}  // namespace hpshmem::oshmem

namespace {

void PutBytes(shmem_ctx_t ctx, void* dest, const void* src, size_t bytes, int pe, const char* fn) {
  int g = GlobalPe(ctx, pe, fn);
  if (bytes) PutToPe(Sym(dest), src, bytes, g, fn);
}

void GetBytes(shmem_ctx_t ctx, void* dest, const void* src, size_t bytes, int pe, const char* fn) {
  int g = GlobalPe(ctx, pe, fn);
  if (bytes == 0) return;
  const void* s = Sym(src);
  if (bytes <= kDirectCopyMax && (dest || !bytes)) {
    if (const uint8_t* p = Direct(s, bytes, g)) {
      CopyBytes(dest, p, bytes);
      return;
    }
  }
  Check(ops::GetMem(dest, s, bytes, g), fn);
}

// Strided transfers: element i goes between dest[i * dst] and src[i * sst]
// (strides in elements). Peers of this host are written directly, the last
// element through the runtime so that a waiter on it is woken.
void IPut(shmem_ctx_t ctx, void* dest, const void* src, ptrdiff_t dst, ptrdiff_t sst, size_t n, size_t elem, int pe,
          const char* fn) {
  if (n == 0) return;
  int g = GlobalPe(ctx, pe, fn);
  auto* d = static_cast<char*>(Sym(dest));
  auto* s = static_cast<const char*>(src);
  if (dst == 1 && sst == 1) return PutToPe(d, s, n * elem, g, fn);
  // Validate the whole span before the first store.
  ptrdiff_t span = (static_cast<ptrdiff_t>(n) - 1) * dst;
  char* lo = d + (span < 0 ? span * static_cast<ptrdiff_t>(elem) : 0);
  if (!IsSymmetric(lo, (static_cast<size_t>(span < 0 ? -span : span) + 1) * elem))
    Fatal(fn, "the strided destination is not inside the symmetric heap");
  auto to = [&](size_t i) { return static_cast<ptrdiff_t>(i) * dst * static_cast<ptrdiff_t>(elem); };
  auto from = [&](size_t i) { return static_cast<ptrdiff_t>(i) * sst * static_cast<ptrdiff_t>(elem); };
  if (Remote(g)) {  // one message per element, in order, completed by quiet
    for (size_t i = 0; i < n; ++i) Check(PutMemNbi(d + to(i), s + from(i), elem, g), fn);
    return;
  }
  auto* peer = static_cast<char*>(Ptr(d, g));
  for (size_t i = 0; peer && i + 1 < n; ++i) std::memcpy(peer + to(i), s + from(i), elem);
  for (size_t i = peer ? n - 1 : 0; i < n; ++i) Check(ops::PutMem(d + to(i), s + from(i), elem, g), fn);
}

void IGet(shmem_ctx_t ctx, void* dest, const void* src, ptrdiff_t dst, ptrdiff_t sst, size_t n, size_t elem, int pe,
          const char* fn) {
  if (n == 0) return;
  int g = GlobalPe(ctx, pe, fn);
  auto* d = static_cast<char*>(dest);
  auto* s = static_cast<const char*>(Sym(src));
  if (dst == 1 && sst == 1) return Check(ops::GetMem(d, s, n * elem, g), fn);
  ptrdiff_t span = (static_cast<ptrdiff_t>(n) - 1) * sst;
  const char* lo = s + (span < 0 ? span * static_cast<ptrdiff_t>(elem) : 0);
  if (!IsSymmetric(lo, (static_cast<size_t>(span < 0 ? -span : span) + 1) * elem))
    Fatal(fn, "the strided source is not inside the symmetric heap");
  const auto* peer = static_cast<const char*>(Ptr(s, g));
  for (size_t i = 0; i < n; ++i) {
    char* to = d + static_cast<ptrdiff_t>(i) * dst * static_cast<ptrdiff_t>(elem);
    ptrdiff_t from = static_cast<ptrdiff_t>(i) * sst * static_cast<ptrdiff_t>(elem);
    if (peer)
      std::memcpy(to, peer + from, elem);
    else
      Check(ops::GetMem(to, s + from, elem, g), fn);
  }
}

void PutSignal(shmem_ctx_t ctx, void* dest, const void* src, size_t bytes, uint64_t* sig, uint64_t signal, int sig_op,
               int pe, const char* fn) {
  int g = GlobalPe(ctx, pe, fn);
  if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD)
    Fatal(fn, "sig_op " + std::to_string(sig_op) + " is not SHMEM_SIGNAL_SET or SHMEM_SIGNAL_ADD");
  void* s = Sym(sig);
  void* d = bytes ? Sym(dest) : s;  // no data: only the signal, whatever dest is
  if (!bytes) src = nullptr;
  uint8_t* pd = bytes <= kDirectCopyMax && (src || !bytes) ? Direct(d, bytes, g) : nullptr;
  uint8_t* ps = Direct(s, 8, g);
  if (pd && ps && reinterpret_cast<uintptr_t>(ps) % 8 == 0) {
    std::memcpy(pd, src, bytes);
    // The atomic is a full fence: the bytes are visible before the signal.
    ApplyAtomic(ps, SignalType::kInt64, sig_op == SHMEM_SIGNAL_SET ? SignalOp::kSet : SignalOp::kAdd,
                static_cast<int64_t>(signal));
    WakeAfterAtomic(g);
    return;
  }
  Check(PutMemSignal(Sym(dest), src, bytes, Sym(sig), SignalType::kInt64, static_cast<int64_t>(signal),
                     sig_op == SHMEM_SIGNAL_SET ? SignalOp::kSet : SignalOp::kAdd, g),
        fn);
}

// ---------------------------------------------------------------- atomics

template <class T>
int64_t Bits(T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics are on 4- and 8-byte words");
  if constexpr (sizeof(T) == 4) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return static_cast<int32_t>(u);
  } else {
    int64_t u;
    std::memcpy(&u, &v, 8);
    return u;
  }
}

template <class T>
T FromBits(int64_t b) {
  T v;
  if constexpr (sizeof(T) == 4) {
    uint32_t u = static_cast<uint32_t>(b);
    std::memcpy(&v, &u, 4);
  } else {
    std::memcpy(&v, &b, 8);
  }
  return v;
}

// Atomic on global PE g's word.
template <class T>
T AmoAt(int g, const T* target, AmoOp op, T value, T compare, const char* fn) {
  constexpr SignalType w = sizeof(T) == 4 ? SignalType::kInt32 : SignalType::kInt64;
  void* t = Sym(target);
  uint8_t* p = Direct(t, sizeof(T), g);
  if (p && reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0) {
    // The same CPU atomic the runtime applies for every transport's arrivals.
    int64_t old = ApplyAmo(p, w, op, Bits(value), Bits(compare));
    if (op != AmoOp::kFetch) WakeAfterAtomic(g);
    return FromBits<T>(old);
  }
  int64_t old = 0;
  Check(Amo(t, w, op, Bits(value), Bits(compare), g, &old), fn);
  return FromBits<T>(old);
}

template <class T>
T AmoT(shmem_ctx_t ctx, const T* target, AmoOp op, T value, T compare, int pe, const char* fn) {
  return AmoAt<T>(GlobalPe(ctx, pe, fn), target, op, value, compare, fn);
}

// A non-fetching atomic: to another host it returns before it is applied
// (quiet completes it), as OpenSHMEM allows.
template <class T>
void AmoPost(shmem_ctx_t ctx, T* target, AmoOp op, T value, int pe, const char* fn) {
  int g = GlobalPe(ctx, pe, fn);
  if (!Remote(g)) {
    AmoAt<T>(g, target, op, value, static_cast<T>(0), fn);
    return;
  }
  Check(AmoNbi(Sym(target), sizeof(T) == 4 ? SignalType::kInt32 : SignalType::kInt64, op, Bits(value), g), fn);
}

// ---------------------------------------------------------------- point-to-point synchronization

bool ValidCmp(int cmp) { return cmp >= SHMEM_CMP_EQ && cmp <= SHMEM_CMP_LE; }

template <class T>
bool Holds(T v, int cmp, T x) {
  switch (cmp) {
    case SHMEM_CMP_EQ:
      return v == x;
    case SHMEM_CMP_NE:
      return v != x;
    case SHMEM_CMP_GT:
      return v > x;
    case SHMEM_CMP_GE:
      return v >= x;
    case SHMEM_CMP_LT:
      return v < x;
    case SHMEM_CMP_LE:
      return v <= x;
  }
  return false;
}

template <class T>
T Load(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

const char* CmpText(int cmp) {
  static const char* k[] = {"==", "!=", ">", ">=", "<", "<="};
  return ValidCmp(cmp) ? k[cmp] : "?";
}

template <class T>
void WaitFor(const std::function<bool()>& ready, const char* fn, const T* first, int cmp, size_t n) {
  if (ready()) return;
  RequireInit(fn);
  Check(WaitUntil(ready,
                  [&] {
                    return std::string(fn) + " on " + std::to_string(n) + " variable(s) at " +
                           std::to_string(reinterpret_cast<uintptr_t>(first)) + " (" + CmpText(cmp) + "), first now " +
                           std::to_string(static_cast<long double>(Load(first)));
                  }),
        fn);
}

void CheckCmp(int cmp, const char* fn) {
  if (!ValidCmp(cmp)) Fatal(fn, "cmp " + std::to_string(cmp) + " is not one of the SHMEM_CMP_ constants");
}

// The test_* forms; `values` is null for a single comparison value.
// `start`: where the scan begins (the _any forms rotate it, so that one
// variable that stays true does not hide the others: the specification's fairness).
template <class T>
size_t CountHolding(T* ivars, size_t n, size_t* indices, const int* status, int cmp, T x, const T* values,
                    size_t stop_after, size_t start = 0) {
  size_t found = 0;
  for (size_t k = 0; k < n && found < stop_after; ++k) {
    size_t i = start + k < n ? start + k : start + k - n;
    if (status && status[i]) continue;
    if (Holds(Load(ivars + i), cmp, values ? values[i] : x)) {
      if (indices) indices[found] = i;
      ++found;
    }
  }
  return found;
}

template <class T>
size_t Active(size_t n, const int* status) {
  size_t a = 0;
  for (size_t i = 0; i < n; ++i) a += !(status && status[i]);
  return a;
}

template <class T>
int TestAll(T* v, size_t n, const int* st, int cmp, T x, const T* xs, const char* fn) {
  CheckCmp(cmp, fn);
  return CountHolding(v, n, nullptr, st, cmp, x, xs, SIZE_MAX) == Active<T>(n, st);
}
thread_local size_t t_any_start = 0;
size_t NextStart(size_t n) { return n ? t_any_start++ % n : 0; }

template <class T>
size_t TestAny(T* v, size_t n, const int* st, int cmp, T x, const T* xs, const char* fn) {
  CheckCmp(cmp, fn);
  size_t idx;
  return CountHolding(v, n, &idx, st, cmp, x, xs, 1, NextStart(n)) ? idx : SIZE_MAX;
}
template <class T>
size_t TestSome(T* v, size_t n, size_t* ind, const int* st, int cmp, T x, const T* xs, const char* fn) {
  CheckCmp(cmp, fn);
  return CountHolding(v, n, ind, st, cmp, x, xs, SIZE_MAX);
}
template <class T>
void WaitAll(T* v, size_t n, const int* st, int cmp, T x, const T* xs, const char* fn) {
  CheckCmp(cmp, fn);
  WaitFor<T>([&] { return CountHolding(v, n, nullptr, st, cmp, x, xs, SIZE_MAX) == Active<T>(n, st); }, fn, v, cmp, n);
}
template <class T>
size_t WaitAny(T* v, size_t n, const int* st, int cmp, T x, const T* xs, const char* fn) {
  CheckCmp(cmp, fn);
  if (Active<T>(n, st) == 0) return SIZE_MAX;
  size_t idx = SIZE_MAX, start = NextStart(n);
  WaitFor<T>([&] { return CountHolding(v, n, &idx, st, cmp, x, xs, 1, start) > 0; }, fn, v, cmp, n);
  return idx;
}
template <class T>
size_t WaitSome(T* v, size_t n, size_t* ind, const int* st, int cmp, T x, const T* xs, const char* fn) {
  CheckCmp(cmp, fn);
  if (Active<T>(n, st) == 0) return 0;
  size_t found = 0;
  WaitFor<T>([&] { return (found = CountHolding(v, n, ind, st, cmp, x, xs, SIZE_MAX)) > 0; }, fn, v, cmp, n);
  return found;
}

shmem_ctx_t D() { return SHMEM_CTX_DEFAULT; }

}  // namespace

extern "C" {

// ---------------------------------------------------------------- RMA

#define HP_RMA(T, N)                                                                                                \
  void shmem_ctx_##N##_put(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                                     \
    PutBytes(c, d, s, n * sizeof(T), pe, "shmem_" #N "_put");                                                       \
  }                                                                                                                 \
  void shmem_##N##_put(T* d, const T* s, size_t n, int pe) { shmem_ctx_##N##_put(D(), d, s, n, pe); }               \
  void shmem_ctx_##N##_put_nbi(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                                 \
    PutBytes(c, d, s, n * sizeof(T), pe, "shmem_" #N "_put_nbi");                                                   \
  }                                                                                                                 \
  void shmem_##N##_put_nbi(T* d, const T* s, size_t n, int pe) { shmem_ctx_##N##_put_nbi(D(), d, s, n, pe); }       \
  void shmem_ctx_##N##_get(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                                     \
    GetBytes(c, d, s, n * sizeof(T), pe, "shmem_" #N "_get");                                                       \
  }                                                                                                                 \
  void shmem_##N##_get(T* d, const T* s, size_t n, int pe) { shmem_ctx_##N##_get(D(), d, s, n, pe); }               \
  void shmem_ctx_##N##_get_nbi(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                                 \
    GetBytes(c, d, s, n * sizeof(T), pe, "shmem_" #N "_get_nbi");                                                   \
  }                                                                                                                 \
  void shmem_##N##_get_nbi(T* d, const T* s, size_t n, int pe) { shmem_ctx_##N##_get_nbi(D(), d, s, n, pe); }       \
  void shmem_ctx_##N##_p(shmem_ctx_t c, T* d, T v, int pe) { PutBytes(c, d, &v, sizeof(T), pe, "shmem_" #N "_p"); } \
  void shmem_##N##_p(T* d, T v, int pe) { shmem_ctx_##N##_p(D(), d, v, pe); }                                       \
  T shmem_ctx_##N##_g(shmem_ctx_t c, const T* s, int pe) {                                                          \
    T v;                                                                                                            \
    GetBytes(c, &v, s, sizeof(T), pe, "shmem_" #N "_g");                                                            \
    return v;                                                                                                       \
  }                                                                                                                 \
  T shmem_##N##_g(const T* s, int pe) { return shmem_ctx_##N##_g(D(), s, pe); }                                     \
  void shmem_ctx_##N##_iput(shmem_ctx_t c, T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {      \
    IPut(c, d, s, dst, sst, n, sizeof(T), pe, "shmem_" #N "_iput");                                                 \
  }                                                                                                                 \
  void shmem_##N##_iput(T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {                         \
    shmem_ctx_##N##_iput(D(), d, s, dst, sst, n, pe);                                                               \
  }                                                                                                                 \
  void shmem_ctx_##N##_iget(shmem_ctx_t c, T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {      \
    IGet(c, d, s, dst, sst, n, sizeof(T), pe, "shmem_" #N "_iget");                                                 \
  }                                                                                                                 \
  void shmem_##N##_iget(T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {                         \
    shmem_ctx_##N##_iget(D(), d, s, dst, sst, n, pe);                                                               \
  }                                                                                                                 \
  void shmem_ctx_##N##_put_signal(shmem_ctx_t c, T* d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op,     \
                                  int pe) {                                                                         \
    PutSignal(c, d, s, n * sizeof(T), sig, v, op, pe, "shmem_" #N "_put_signal");                                   \
  }                                                                                                                 \
  void shmem_##N##_put_signal(T* d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe) {              \
    shmem_ctx_##N##_put_signal(D(), d, s, n, sig, v, op, pe);                                                       \
  }                                                                                                                 \
  void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t c, T* d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op, \
                                      int pe) {                                                                     \
    PutSignal(c, d, s, n * sizeof(T), sig, v, op, pe, "shmem_" #N "_put_signal_nbi");                               \
  }                                                                                                                 \
  void shmem_##N##_put_signal_nbi(T* d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe) {          \
    shmem_ctx_##N##_put_signal_nbi(D(), d, s, n, sig, v, op, pe);                                                   \
  }
HPSHMEM_RMA_TYPES(HP_RMA)

#define HP_SIZED(S)                                                                                                  \
  void shmem_ctx_put##S(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {                                   \
    PutBytes(c, d, s, n * (S / 8), pe, "shmem_put" #S);                                                              \
  }                                                                                                                  \
  void shmem_put##S(void* d, const void* s, size_t n, int pe) { shmem_ctx_put##S(D(), d, s, n, pe); }                \
  void shmem_ctx_put##S##_nbi(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {                             \
    PutBytes(c, d, s, n * (S / 8), pe, "shmem_put" #S "_nbi");                                                       \
  }                                                                                                                  \
  void shmem_put##S##_nbi(void* d, const void* s, size_t n, int pe) { shmem_ctx_put##S##_nbi(D(), d, s, n, pe); }    \
  void shmem_ctx_get##S(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {                                   \
    GetBytes(c, d, s, n * (S / 8), pe, "shmem_get" #S);                                                              \
  }                                                                                                                  \
  void shmem_get##S(void* d, const void* s, size_t n, int pe) { shmem_ctx_get##S(D(), d, s, n, pe); }                \
  void shmem_ctx_get##S##_nbi(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {                             \
    GetBytes(c, d, s, n * (S / 8), pe, "shmem_get" #S "_nbi");                                                       \
  }                                                                                                                  \
  void shmem_get##S##_nbi(void* d, const void* s, size_t n, int pe) { shmem_ctx_get##S##_nbi(D(), d, s, n, pe); }    \
  void shmem_ctx_iput##S(shmem_ctx_t c, void* d, const void* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {    \
    IPut(c, d, s, dst, sst, n, S / 8, pe, "shmem_iput" #S);                                                          \
  }                                                                                                                  \
  void shmem_iput##S(void* d, const void* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {                       \
    shmem_ctx_iput##S(D(), d, s, dst, sst, n, pe);                                                                   \
  }                                                                                                                  \
  void shmem_ctx_iget##S(shmem_ctx_t c, void* d, const void* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {    \
    IGet(c, d, s, dst, sst, n, S / 8, pe, "shmem_iget" #S);                                                          \
  }                                                                                                                  \
  void shmem_iget##S(void* d, const void* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {                       \
    shmem_ctx_iget##S(D(), d, s, dst, sst, n, pe);                                                                   \
  }                                                                                                                  \
  void shmem_ctx_put##S##_signal(shmem_ctx_t c, void* d, const void* s, size_t n, uint64_t* sig, uint64_t v, int op, \
                                 int pe) {                                                                           \
    PutSignal(c, d, s, n * (S / 8), sig, v, op, pe, "shmem_put" #S "_signal");                                       \
  }                                                                                                                  \
  void shmem_put##S##_signal(void* d, const void* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe) {          \
    shmem_ctx_put##S##_signal(D(), d, s, n, sig, v, op, pe);                                                         \
  }                                                                                                                  \
  void shmem_ctx_put##S##_signal_nbi(shmem_ctx_t c, void* d, const void* s, size_t n, uint64_t* sig, uint64_t v,     \
                                     int op, int pe) {                                                               \
    PutSignal(c, d, s, n * (S / 8), sig, v, op, pe, "shmem_put" #S "_signal_nbi");                                   \
  }                                                                                                                  \
  void shmem_put##S##_signal_nbi(void* d, const void* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe) {      \
    shmem_ctx_put##S##_signal_nbi(D(), d, s, n, sig, v, op, pe);                                                     \
  }
HPSHMEM_SIZES(HP_SIZED)

void shmem_ctx_putmem(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {
  PutBytes(c, d, s, n, pe, "shmem_putmem");
}
void shmem_putmem(void* d, const void* s, size_t n, int pe) { shmem_ctx_putmem(D(), d, s, n, pe); }
void shmem_ctx_putmem_nbi(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {
  PutBytes(c, d, s, n, pe, "shmem_putmem_nbi");
}
void shmem_putmem_nbi(void* d, const void* s, size_t n, int pe) { shmem_ctx_putmem_nbi(D(), d, s, n, pe); }
void shmem_ctx_getmem(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {
  GetBytes(c, d, s, n, pe, "shmem_getmem");
}
void shmem_getmem(void* d, const void* s, size_t n, int pe) { shmem_ctx_getmem(D(), d, s, n, pe); }
void shmem_ctx_getmem_nbi(shmem_ctx_t c, void* d, const void* s, size_t n, int pe) {
  GetBytes(c, d, s, n, pe, "shmem_getmem_nbi");
}
void shmem_getmem_nbi(void* d, const void* s, size_t n, int pe) { shmem_ctx_getmem_nbi(D(), d, s, n, pe); }
void shmem_ctx_putmem_signal(shmem_ctx_t c, void* d, const void* s, size_t n, uint64_t* sig, uint64_t v, int op,
                             int pe) {
  PutSignal(c, d, s, n, sig, v, op, pe, "shmem_putmem_signal");
}
void shmem_putmem_signal(void* d, const void* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe) {
  shmem_ctx_putmem_signal(D(), d, s, n, sig, v, op, pe);
}
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t c, void* d, const void* s, size_t n, uint64_t* sig, uint64_t v, int op,
                                 int pe) {
  PutSignal(c, d, s, n, sig, v, op, pe, "shmem_putmem_signal_nbi");
}
void shmem_putmem_signal_nbi(void* d, const void* s, size_t n, uint64_t* sig, uint64_t v, int op, int pe) {
  shmem_ctx_putmem_signal_nbi(D(), d, s, n, sig, v, op, pe);
}

// ---------------------------------------------------------------- signals

uint64_t shmem_signal_fetch(const uint64_t* sig_addr) { return Load(sig_addr); }

uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value) {
  CheckCmp(cmp, "shmem_signal_wait_until");
  uint64_t seen = 0;
  WaitFor<uint64_t>([&] { return Holds(seen = Load(sig_addr), cmp, cmp_value); }, "shmem_signal_wait_until", sig_addr,
                    cmp, 1);
  return seen;
}

// ---------------------------------------------------------------- atomics

#define HP_AMO_EXT(T, N)                                                                                        \
  T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t c, const T* s, int pe) {                                           \
    return AmoT<T>(c, s, AmoOp::kFetch, static_cast<T>(0), static_cast<T>(0), pe, "shmem_" #N "_atomic_fetch"); \
  }                                                                                                             \
  T shmem_##N##_atomic_fetch(const T* s, int pe) { return shmem_ctx_##N##_atomic_fetch(D(), s, pe); }           \
  void shmem_ctx_##N##_atomic_set(shmem_ctx_t c, T* d, T v, int pe) {                                           \
    AmoPost<T>(c, d, AmoOp::kSet, v, pe, "shmem_" #N "_atomic_set");                                            \
  }                                                                                                             \
  void shmem_##N##_atomic_set(T* d, T v, int pe) { shmem_ctx_##N##_atomic_set(D(), d, v, pe); }                 \
  T shmem_ctx_##N##_atomic_swap(shmem_ctx_t c, T* d, T v, int pe) {                                             \
    return AmoT<T>(c, d, AmoOp::kSwap, v, static_cast<T>(0), pe, "shmem_" #N "_atomic_swap");                   \
  }                                                                                                             \
  T shmem_##N##_atomic_swap(T* d, T v, int pe) { return shmem_ctx_##N##_atomic_swap(D(), d, v, pe); }           \
  void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t c, T* f, const T* s, int pe) {                              \
    *f = shmem_ctx_##N##_atomic_fetch(c, s, pe);                                                                \
  }                                                                                                             \
  void shmem_##N##_atomic_fetch_nbi(T* f, const T* s, int pe) { *f = shmem_##N##_atomic_fetch(s, pe); }         \
  void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t c, T* f, T* d, T v, int pe) {                                \
    *f = shmem_ctx_##N##_atomic_swap(c, d, v, pe);                                                              \
  }                                                                                                             \
  void shmem_##N##_atomic_swap_nbi(T* f, T* d, T v, int pe) { *f = shmem_##N##_atomic_swap(d, v, pe); }
HPSHMEM_EXTENDED_AMO_TYPES(HP_AMO_EXT)

#define HP_AMO_STD(T, N)                                                                                          \
  T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t c, T* d, T cond, T v, int pe) {                               \
    return AmoT<T>(c, d, AmoOp::kCompareSwap, v, cond, pe, "shmem_" #N "_atomic_compare_swap");                   \
  }                                                                                                               \
  T shmem_##N##_atomic_compare_swap(T* d, T cond, T v, int pe) {                                                  \
    return shmem_ctx_##N##_atomic_compare_swap(D(), d, cond, v, pe);                                              \
  }                                                                                                               \
  T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t c, T* d, T v, int pe) {                                          \
    return AmoT<T>(c, d, AmoOp::kAdd, v, static_cast<T>(0), pe, "shmem_" #N "_atomic_fetch_add");                 \
  }                                                                                                               \
  T shmem_##N##_atomic_fetch_add(T* d, T v, int pe) { return shmem_ctx_##N##_atomic_fetch_add(D(), d, v, pe); }   \
  void shmem_ctx_##N##_atomic_add(shmem_ctx_t c, T* d, T v, int pe) {                                             \
    AmoPost<T>(c, d, AmoOp::kAdd, v, pe, "shmem_" #N "_atomic_add");                                              \
  }                                                                                                               \
  void shmem_##N##_atomic_add(T* d, T v, int pe) { shmem_ctx_##N##_atomic_add(D(), d, v, pe); }                   \
  T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t c, T* d, int pe) {                                               \
    return AmoT<T>(c, d, AmoOp::kAdd, static_cast<T>(1), static_cast<T>(0), pe, "shmem_" #N "_atomic_fetch_inc"); \
  }                                                                                                               \
  T shmem_##N##_atomic_fetch_inc(T* d, int pe) { return shmem_ctx_##N##_atomic_fetch_inc(D(), d, pe); }           \
  void shmem_ctx_##N##_atomic_inc(shmem_ctx_t c, T* d, int pe) {                                                  \
    AmoPost<T>(c, d, AmoOp::kAdd, static_cast<T>(1), pe, "shmem_" #N "_atomic_inc");                              \
  }                                                                                                               \
  void shmem_##N##_atomic_inc(T* d, int pe) { shmem_ctx_##N##_atomic_inc(D(), d, pe); }                           \
  void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t c, T* f, T* d, T cond, T v, int pe) {                  \
    *f = shmem_ctx_##N##_atomic_compare_swap(c, d, cond, v, pe);                                                  \
  }                                                                                                               \
  void shmem_##N##_atomic_compare_swap_nbi(T* f, T* d, T cond, T v, int pe) {                                     \
    *f = shmem_##N##_atomic_compare_swap(d, cond, v, pe);                                                         \
  }                                                                                                               \
  void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t c, T* f, T* d, int pe) {                                  \
    *f = shmem_ctx_##N##_atomic_fetch_inc(c, d, pe);                                                              \
  }                                                                                                               \
  void shmem_##N##_atomic_fetch_inc_nbi(T* f, T* d, int pe) { *f = shmem_##N##_atomic_fetch_inc(d, pe); }         \
  void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t c, T* f, T* d, T v, int pe) {                             \
    *f = shmem_ctx_##N##_atomic_fetch_add(c, d, v, pe);                                                           \
  }                                                                                                               \
  void shmem_##N##_atomic_fetch_add_nbi(T* f, T* d, T v, int pe) { *f = shmem_##N##_atomic_fetch_add(d, v, pe); }
HPSHMEM_AMO_TYPES(HP_AMO_STD)

#define HP_AMO_BIT1(T, N, OP, K)                                                                                  \
  T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t c, T* d, T v, int pe) {                                         \
    return AmoT<T>(c, d, AmoOp::K, v, static_cast<T>(0), pe, "shmem_" #N "_atomic_fetch_" #OP);                   \
  }                                                                                                               \
  T shmem_##N##_atomic_fetch_##OP(T* d, T v, int pe) { return shmem_ctx_##N##_atomic_fetch_##OP(D(), d, v, pe); } \
  void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t c, T* d, T v, int pe) {                                            \
    AmoPost<T>(c, d, AmoOp::K, v, pe, "shmem_" #N "_atomic_" #OP);                                                \
  }                                                                                                               \
  void shmem_##N##_atomic_##OP(T* d, T v, int pe) { shmem_ctx_##N##_atomic_##OP(D(), d, v, pe); }                 \
  void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t c, T* f, T* d, T v, int pe) {                          \
    *f = shmem_ctx_##N##_atomic_fetch_##OP(c, d, v, pe);                                                          \
  }                                                                                                               \
  void shmem_##N##_atomic_fetch_##OP##_nbi(T* f, T* d, T v, int pe) { *f = shmem_##N##_atomic_fetch_##OP(d, v, pe); }
#define HP_AMO_BIT(T, N) HP_AMO_BIT1(T, N, and, kAnd) HP_AMO_BIT1(T, N, or, kOr) HP_AMO_BIT1(T, N, xor, kXor)
HPSHMEM_BITWISE_AMO_TYPES(HP_AMO_BIT)

#define HP_AMO_OLD(T, N)                                                                                     \
  T shmem_##N##_fetch(const T* s, int pe) { return shmem_##N##_atomic_fetch(s, pe); }                        \
  void shmem_##N##_set(T* d, T v, int pe) { shmem_##N##_atomic_set(d, v, pe); }                              \
  T shmem_##N##_swap(T* d, T v, int pe) { return shmem_##N##_atomic_swap(d, v, pe); }                        \
  T shmem_##N##_cswap(T* d, T cond, T v, int pe) { return shmem_##N##_atomic_compare_swap(d, cond, v, pe); } \
  T shmem_##N##_finc(T* d, int pe) { return shmem_##N##_atomic_fetch_inc(d, pe); }                           \
  void shmem_##N##_inc(T* d, int pe) { shmem_##N##_atomic_inc(d, pe); }                                      \
  T shmem_##N##_fadd(T* d, T v, int pe) { return shmem_##N##_atomic_fetch_add(d, v, pe); }                   \
  void shmem_##N##_add(T* d, T v, int pe) { shmem_##N##_atomic_add(d, v, pe); }
HP_AMO_OLD(int, int)
HP_AMO_OLD(long, long)
HP_AMO_OLD(long long, longlong)
float shmem_float_fetch(const float* s, int pe) { return shmem_float_atomic_fetch(s, pe); }
void shmem_float_set(float* d, float v, int pe) { shmem_float_atomic_set(d, v, pe); }
float shmem_float_swap(float* d, float v, int pe) { return shmem_float_atomic_swap(d, v, pe); }
double shmem_double_fetch(const double* s, int pe) { return shmem_double_atomic_fetch(s, pe); }
void shmem_double_set(double* d, double v, int pe) { shmem_double_atomic_set(d, v, pe); }
double shmem_double_swap(double* d, double v, int pe) { return shmem_double_atomic_swap(d, v, pe); }
long shmem_swap(long* d, long v, int pe) { return shmem_long_atomic_swap(d, v, pe); }

// ---------------------------------------------------------------- point-to-point synchronization

#define HP_SYNC(T, N)                                                                                                  \
  void shmem_##N##_wait_until(T* v, int cmp, T x) {                                                                    \
    WaitAll<T>(v, 1, nullptr, cmp, x, nullptr, "shmem_" #N "_wait_until");                                             \
  }                                                                                                                    \
  void shmem_##N##_wait_until_all(T* v, size_t n, const int* st, int cmp, T x) {                                       \
    WaitAll<T>(v, n, st, cmp, x, nullptr, "shmem_" #N "_wait_until_all");                                              \
  }                                                                                                                    \
  size_t shmem_##N##_wait_until_any(T* v, size_t n, const int* st, int cmp, T x) {                                     \
    return WaitAny<T>(v, n, st, cmp, x, nullptr, "shmem_" #N "_wait_until_any");                                       \
  }                                                                                                                    \
  size_t shmem_##N##_wait_until_some(T* v, size_t n, size_t* ind, const int* st, int cmp, T x) {                       \
    return WaitSome<T>(v, n, ind, st, cmp, x, nullptr, "shmem_" #N "_wait_until_some");                                \
  }                                                                                                                    \
  void shmem_##N##_wait_until_all_vector(T* v, size_t n, const int* st, int cmp, T* xs) {                              \
    WaitAll<T>(v, n, st, cmp, static_cast<T>(0), xs, "shmem_" #N "_wait_until_all_vector");                            \
  }                                                                                                                    \
  size_t shmem_##N##_wait_until_any_vector(T* v, size_t n, const int* st, int cmp, T* xs) {                            \
    return WaitAny<T>(v, n, st, cmp, static_cast<T>(0), xs, "shmem_" #N "_wait_until_any_vector");                     \
  }                                                                                                                    \
  size_t shmem_##N##_wait_until_some_vector(T* v, size_t n, size_t* ind, const int* st, int cmp, T* xs) {              \
    return WaitSome<T>(v, n, ind, st, cmp, static_cast<T>(0), xs, "shmem_" #N "_wait_until_some_vector");              \
  }                                                                                                                    \
  int shmem_##N##_test(T* v, int cmp, T x) { return TestAll<T>(v, 1, nullptr, cmp, x, nullptr, "shmem_" #N "_test"); } \
  int shmem_##N##_test_all(T* v, size_t n, const int* st, int cmp, T x) {                                              \
    return TestAll<T>(v, n, st, cmp, x, nullptr, "shmem_" #N "_test_all");                                             \
  }                                                                                                                    \
  size_t shmem_##N##_test_any(T* v, size_t n, const int* st, int cmp, T x) {                                           \
    return TestAny<T>(v, n, st, cmp, x, nullptr, "shmem_" #N "_test_any");                                             \
  }                                                                                                                    \
  size_t shmem_##N##_test_some(T* v, size_t n, size_t* ind, const int* st, int cmp, T x) {                             \
    return TestSome<T>(v, n, ind, st, cmp, x, nullptr, "shmem_" #N "_test_some");                                      \
  }                                                                                                                    \
  int shmem_##N##_test_all_vector(T* v, size_t n, const int* st, int cmp, T* xs) {                                     \
    return TestAll<T>(v, n, st, cmp, static_cast<T>(0), xs, "shmem_" #N "_test_all_vector");                           \
  }                                                                                                                    \
  size_t shmem_##N##_test_any_vector(T* v, size_t n, const int* st, int cmp, T* xs) {                                  \
    return TestAny<T>(v, n, st, cmp, static_cast<T>(0), xs, "shmem_" #N "_test_any_vector");                           \
  }                                                                                                                    \
  size_t shmem_##N##_test_some_vector(T* v, size_t n, size_t* ind, const int* st, int cmp, T* xs) {                    \
    return TestSome<T>(v, n, ind, st, cmp, static_cast<T>(0), xs, "shmem_" #N "_test_some_vector");                    \
  }                                                                                                                    \
  void shmem_##N##_wait(T* v, T x) { WaitAll<T>(v, 1, nullptr, SHMEM_CMP_NE, x, nullptr, "shmem_" #N "_wait"); }
HPSHMEM_SYNC_TYPES(HP_SYNC)

void shmem_wait(long* v, long x) { shmem_long_wait(v, x); }
void shmem_wait_until(long* v, int cmp, long x) { shmem_long_wait_until(v, cmp, x); }

// ---------------------------------------------------------------- ordering

void shmem_fence(void) {
  RequireInit("shmem_fence");
  Check(Fence(), "shmem_fence");
}
void shmem_ctx_fence(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  shmem_fence();
}
void shmem_quiet(void) {
  RequireInit("shmem_quiet");
  Check(Quiet(), "shmem_quiet");
}
void shmem_ctx_quiet(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  shmem_quiet();
}

}  // extern "C"
