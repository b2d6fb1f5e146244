// Atomics on 4- and 8-byte words of any PE: the direct route's CPU atomics
// for a peer of this host, the runtime's Amo otherwise.
#include <complex>
#include <cstring>
#include <functional>
#include <type_traits>

#include "ops/ops.h"
#include "state.h"

using namespace hpshmem;
using namespace hpshmem::oshmem;

namespace {

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

shmem_ctx_t D() { return SHMEM_CTX_DEFAULT; }

}  // namespace

extern "C" {

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

}  // extern "C"
