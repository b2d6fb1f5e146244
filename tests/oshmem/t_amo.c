/* Atomics for every standard AMO type, from every PE at once: fetch_add / add /
 * fetch_inc / inc counted exactly, compare_swap as a ticket lock-free counter,
 * swap chains, set/fetch, bitwise and/or/xor with their fetching forms, the nbi
 * fetching forms, float/double, and the deprecated names. */
#include "check.h"

#define ITERS 300
static int me, n;

#define TEST_AMO(T, N)                                                                                            \
  static void amo_##N(shmem_ctx_t ctx) {                                                                          \
    T* w = shmem_calloc(8, sizeof(T));                                                                            \
    T f;                                                                                                          \
    for (int i = 0; i < ITERS; i++) {                                                                             \
      shmem_ctx_##N##_atomic_add(ctx, &w[0], (T)2, 0);                                                            \
      (void)shmem_ctx_##N##_atomic_fetch_add(ctx, &w[0], (T)1, 0);                                                \
      shmem_ctx_##N##_atomic_inc(ctx, &w[1], n - 1);                                                              \
      shmem_ctx_##N##_atomic_fetch_inc_nbi(ctx, &f, &w[1], n - 1);                                                \
    }                                                                                                             \
    /* compare_swap increments: each lands exactly once */                                                        \
    for (int i = 0; i < ITERS; i++) {                                                                             \
      T seen = shmem_ctx_##N##_atomic_fetch(ctx, &w[2], 0), old;                                                  \
      while ((old = shmem_ctx_##N##_atomic_compare_swap(ctx, &w[2], seen, (T)(seen + 1), 0)) != seen) seen = old; \
    }                                                                                                             \
    /* swap: the values that come back, plus the last, are 0..n exactly once */                                   \
    T back = shmem_ctx_##N##_atomic_swap(ctx, &w[3], (T)(me + 1), 0);                                             \
    T* olds = shmem_malloc(n * sizeof(T));                                                                        \
    shmem_##N##_fcollect(SHMEM_TEAM_WORLD, olds, &back, 1);                                                       \
    shmem_barrier_all();                                                                                          \
    if (me == 0) {                                                                                                \
      T expect = (T)(3 * ITERS * n);                                                                              \
      CHECK(w[0] == expect, #N " add/fetch_add: %lld != %lld", (long long)w[0], (long long)expect);               \
      CHECK(w[2] == (T)(ITERS * n), #N " compare_swap: %lld", (long long)w[2]);                                   \
      unsigned long long mask = 1ull << (long long)w[3];                                                          \
      for (int i = 0; i < n; i++) mask |= 1ull << (long long)olds[i];                                             \
      CHECK(mask == (2ull << n) - 1, #N " swap chain");                                                           \
    }                                                                                                             \
    if (me == n - 1) CHECK(w[1] == (T)(2 * ITERS * n), #N " inc/fetch_inc: %lld", (long long)w[1]);               \
    /* set and fetch; the nbi fetch */                                                                            \
    shmem_barrier_all();                                                                                          \
    shmem_ctx_##N##_atomic_set(ctx, &w[4], (T)(40 + me), (me + 1) % n);                                           \
    shmem_barrier_all();                                                                                          \
    CHECK(w[4] == (T)(40 + (me + n - 1) % n), #N " set: %lld", (long long)w[4]);                                  \
    shmem_barrier_all(); /* every PE has checked its word before anyone changes it again */                       \
    shmem_ctx_##N##_atomic_fetch_nbi(ctx, &f, &w[4], (me + 1) % n);                                               \
    shmem_ctx_quiet(ctx);                                                                                         \
    CHECK(f == (T)(40 + me), #N " fetch_nbi");                                                                    \
    T g2;                                                                                                         \
    shmem_ctx_##N##_atomic_compare_swap_nbi(ctx, &g2, &w[4], (T)(40 + me), (T)7, (me + 1) % n);                   \
    shmem_ctx_##N##_atomic_fetch_add_nbi(ctx, &f, &w[4], (T)1, (me + 1) % n);                                     \
    shmem_ctx_quiet(ctx);                                                                                         \
    CHECK(g2 == (T)(40 + me) && f == (T)7, #N " compare_swap_nbi / fetch_add_nbi");                               \
    shmem_barrier_all();                                                                                          \
    CHECK(w[4] == (T)8, #N " after nbi");                                                                         \
    shmem_free(olds);                                                                                             \
    shmem_free(w);                                                                                                \
  }
HPSHMEM_AMO_TYPES(TEST_AMO)

#define TEST_BIT(T, N)                                                     \
  static void bit_##N(shmem_ctx_t ctx) {                                   \
    T* w = shmem_calloc(4, sizeof(T));                                     \
    w[1] = (T) ~(T)0;                                                      \
    shmem_barrier_all();                                                   \
    T bit = (T)((T)1 << me);                                               \
    shmem_ctx_##N##_atomic_or(ctx, &w[0], bit, 0);                         \
    T before = shmem_ctx_##N##_atomic_fetch_and(ctx, &w[1], (T)~bit, 0);   \
    CHECK((before & bit) == bit, #N " fetch_and saw its own bit cleared"); \
    shmem_ctx_##N##_atomic_xor(ctx, &w[2], (T)0x55, 0);                    \
    T x;                                                                   \
    shmem_ctx_##N##_atomic_fetch_xor_nbi(ctx, &x, &w[3], bit, 0);          \
    shmem_ctx_##N##_atomic_fetch_or_nbi(ctx, &x, &w[3], bit, 0);           \
    (void)shmem_ctx_##N##_atomic_fetch_or(ctx, &w[3], (T)0, 0);            \
    shmem_ctx_##N##_atomic_and(ctx, &w[3], (T) ~(T)0, 0);                  \
    (void)shmem_ctx_##N##_atomic_fetch_xor(ctx, &w[3], (T)0, 0);           \
    shmem_ctx_quiet(ctx);                                                  \
    shmem_barrier_all();                                                   \
    if (me == 0) {                                                         \
      T all = (T)(((T)1 << n) - 1);                                        \
      CHECK(w[0] == all, #N " or");                                        \
      CHECK(w[1] == (T)~all, #N " and");                                   \
      CHECK(w[2] == (T)(n % 2 ? 0x55 : 0), #N " xor");                     \
      CHECK(w[3] == all, #N " xor-then-or per bit");                       \
    }                                                                      \
    shmem_free(w);                                                         \
  }
HPSHMEM_BITWISE_AMO_TYPES(TEST_BIT)

#define TEST_FP(T, N)                                                                    \
  static void fp_##N(void) {                                                             \
    T* w = shmem_calloc(2, sizeof(T));                                                   \
    shmem_barrier_all();                                                                 \
    shmem_##N##_atomic_set(&w[0], (T)(0.25 * me), (me + 1) % n);                         \
    shmem_barrier_all();                                                                 \
    CHECK(w[0] == (T)(0.25 * ((me + n - 1) % n)), #N " set");                            \
    CHECK(shmem_##N##_atomic_fetch(&w[0], (me + 1) % n) == (T)(0.25 * me), #N " fetch"); \
    shmem_barrier_all();                                                                 \
    T old = shmem_##N##_atomic_swap(&w[0], (T) - 1.5, (me + 1) % n);                     \
    CHECK(old == (T)(0.25 * me), #N " swap");                                            \
    T f;                                                                                 \
    shmem_##N##_atomic_swap_nbi(&f, &w[0], (T)3.0, (me + 1) % n);                        \
    shmem_quiet();                                                                       \
    CHECK(f == (T) - 1.5, #N " swap_nbi");                                               \
    shmem_free(w);                                                                       \
  }
TEST_FP(float, float)
TEST_FP(double, double)

int main(void) {
  shmem_init();
  me = shmem_my_pe();
  n = shmem_n_pes();
  shmem_ctx_t ctx;
  CHECK(shmem_ctx_create(0, &ctx) == 0, "ctx");
  for (int round = 0; round < 2; round++) {
    shmem_ctx_t c = round ? ctx : SHMEM_CTX_DEFAULT;
#define RUN_AMO(T, N) amo_##N(c);
    HPSHMEM_AMO_TYPES(RUN_AMO)
#define RUN_BIT(T, N) bit_##N(c);
    HPSHMEM_BITWISE_AMO_TYPES(RUN_BIT)
  }
  shmem_ctx_destroy(ctx);
  fp_float();
  fp_double();

  /* Deprecated names and the C11 generic forms on globals. */
  static long counter;
  static int icounter;
  shmem_barrier_all();
  shmem_long_add(&counter, 5, 0);
  (void)shmem_long_fadd(&counter, 1, 0);
  shmem_long_inc(&counter, 0);
  (void)shmem_long_finc(&counter, 0);
  shmem_atomic_add(&icounter, 2, 0);
  (void)shmem_atomic_fetch_inc(&icounter, 0);
  shmem_barrier_all();
  if (me == 0) CHECK(counter == 8L * n && icounter == 3 * n, "deprecated/generic: %ld %d", counter, icounter);
  CHECK(shmem_long_fetch(&counter, 0) == 8L * n, "deprecated fetch");
  CHECK(shmem_atomic_fetch(&counter, 0) == 8L * n, "generic fetch");
  shmem_barrier_all();
  if (me == 0) CHECK(shmem_long_cswap(&counter, 8L * n, -1, 0) == 8L * n && counter == -1, "cswap");
  osh_done("amo");
  return 0;
}
