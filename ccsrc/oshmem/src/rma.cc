// RMA, put-with-signal and ordering. Every routine validates through the
// runtime (which checks the PE, the range and liveness before it writes) and
// maps onto one of its calls, or takes the direct route to a peer of this
// host (hpshmem/direct.h).
#include <complex>
#include <cstring>
#include <functional>
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
      CopyDirect(dest, p, bytes);
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
