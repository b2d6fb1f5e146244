// Point-to-point synchronization: the wait and test routines, on this PE's
// own symmetric variables, waiting as the runtime's WaitUntil does.
#include <complex>
#include <cstring>
#include <functional>
#include <type_traits>

#include "ops/ops.h"
#include "state.h"

using namespace hpshmem;
using namespace hpshmem::oshmem;

namespace {

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

}  // namespace

extern "C" {

// ---------------------------------------------------------------- signals

uint64_t shmem_signal_fetch(const uint64_t* sig_addr) { return Load(sig_addr); }

uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value) {
  CheckCmp(cmp, "shmem_signal_wait_until");
  uint64_t seen = 0;
  WaitFor<uint64_t>([&] { return Holds(seen = Load(sig_addr), cmp, cmp_value); }, "shmem_signal_wait_until", sig_addr,
                    cmp, 1);
  return seen;
}

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

}  // extern "C"
