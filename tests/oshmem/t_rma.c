/* RMA for every standard type: put, get, p, g, iput, iget, the nbi forms, put_signal,
 * the sized and mem forms, on the default context, a created context and a team's
 * context (PE numbers relative to the team). Random data, odd sizes, poison checked. */
#include "check.h"

#define MAXN 131
static unsigned char poison_byte = 0xA5;

static int me, n;
static uint64_t* sig;

/* Fills `buf` (elements of `size` bytes) with random bytes that depend on (seed, pe). */
static void fill(void* buf, size_t bytes, uint64_t seed, int pe) {
  unsigned char* b = buf;
  for (size_t i = 0; i < bytes; i++) b[i] = (unsigned char)(osh_rand(seed, pe, i) >> 17);
}
static int same(const void* buf, size_t bytes, uint64_t seed, int pe) {
  const unsigned char* b = buf;
  for (size_t i = 0; i < bytes; i++)
    if (b[i] != (unsigned char)(osh_rand(seed, pe, i) >> 17)) return 0;
  return 1;
}
static int poisoned(const void* buf, size_t bytes) {
  const unsigned char* b = buf;
  for (size_t i = 0; i < bytes; i++)
    if (b[i] != poison_byte) return 0;
  return 1;
}

static const size_t sizes[] = {0, 1, 7, 101};

#define TEST_TYPE(T, N)                                                                                        \
  static void test_##N(shmem_ctx_t ctx, int to, int from, uint64_t seed) {                                     \
    T* dst = shmem_malloc((MAXN + 8) * sizeof(T));                                                             \
    T src[MAXN + 8], got[MAXN + 8];                                                                            \
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {                                              \
      size_t cnt = sizes[k];                                                                                   \
      uint64_t s = seed * 31 + k;                                                                              \
      memset(dst, poison_byte, (MAXN + 8) * sizeof(T));                                                        \
      fill(src, cnt * sizeof(T), s, me);                                                                       \
      shmem_barrier_all();                                                                                     \
      if (k % 2)                                                                                               \
        shmem_ctx_##N##_put(ctx, dst + 1, src, cnt, to);                                                       \
      else {                                                                                                   \
        shmem_ctx_##N##_put_nbi(ctx, dst + 1, src, cnt, to);                                                   \
        shmem_ctx_quiet(ctx);                                                                                  \
      }                                                                                                        \
      shmem_barrier_all();                                                                                     \
      CHECK(poisoned(dst, sizeof(T)) && poisoned(dst + 1 + cnt, 7 * sizeof(T)), #N " put wrote out of range"); \
      CHECK(same(dst + 1, cnt * sizeof(T), s, from), #N " put of %zu", cnt);                                   \
      memset(got, poison_byte, sizeof got);                                                                    \
      if (k % 2)                                                                                               \
        shmem_ctx_##N##_get(ctx, got, dst + 1, cnt, to);                                                       \
      else {                                                                                                   \
        shmem_ctx_##N##_get_nbi(ctx, got, dst + 1, cnt, to);                                                   \
        shmem_ctx_quiet(ctx);                                                                                  \
      }                                                                                                        \
      CHECK(same(got, cnt * sizeof(T), s, me) && poisoned(got + cnt, sizeof(T)), #N " get of %zu", cnt);       \
      shmem_barrier_all(); /* nobody re-poisons a buffer a peer still reads */                                 \
    }                                                                                                          \
    /* p and g: values pass through registers, so they are real values of T, not random bits */                \
    T v = (T)(osh_rand(seed + 7, me, 0) % 100), vfrom = (T)(osh_rand(seed + 7, from, 0) % 100);                \
    shmem_barrier_all();                                                                                       \
    shmem_ctx_##N##_p(ctx, dst + 3, v, to);                                                                    \
    shmem_barrier_all();                                                                                       \
    CHECK(dst[3] == vfrom, #N " p");                                                                           \
    T w = shmem_ctx_##N##_g(ctx, dst + 3, to);                                                                 \
    CHECK(w == v, #N " g");                                                                                    \
    shmem_barrier_all();                                                                                       \
    /* strided: every 3rd source element to every 2nd destination element, 11 of them */                       \
    memset(dst, poison_byte, (MAXN + 8) * sizeof(T));                                                          \
    fill(src, sizeof src, seed + 9, me);                                                                       \
    shmem_barrier_all();                                                                                       \
    shmem_ctx_##N##_iput(ctx, dst, src, 2, 3, 11, to);                                                         \
    shmem_barrier_all();                                                                                       \
    for (int i = 0; i < 22; i++) {                                                                             \
      T expect;                                                                                                \
      unsigned char all[sizeof src];                                                                           \
      fill(all, sizeof all, seed + 9, from);                                                                   \
      memcpy(&expect, all + (size_t)(i / 2) * 3 * sizeof(T), sizeof(T));                                       \
      if (i % 2 == 0)                                                                                          \
        CHECK(memcmp(dst + i, &expect, sizeof(T)) == 0, #N " iput element %d", i);                             \
      else                                                                                                     \
        CHECK(poisoned(dst + i, sizeof(T)), #N " iput wrote a gap at %d", i);                                  \
    }                                                                                                          \
    memset(got, poison_byte, sizeof got);                                                                      \
    shmem_ctx_##N##_iget(ctx, got, dst, 3, 2, 11, to);                                                         \
    for (int i = 0; i < 11; i++) {                                                                             \
      T expect;                                                                                                \
      shmem_ctx_##N##_get(ctx, &expect, dst + 2 * i, 1, to);                                                   \
      CHECK(memcmp(got + 3 * i, &expect, sizeof(T)) == 0, #N " iget element %d", i);                           \
      if (i < 10) CHECK(poisoned(got + 3 * i + 1, 2 * sizeof(T)), #N " iget wrote a gap");                     \
    }                                                                                                          \
    shmem_barrier_all();                                                                                       \
    /* put_signal: the data is complete when the signal is seen */                                             \
    shmem_barrier_all();                                                                                       \
    fill(src, 101 * sizeof(T), seed + 11, me);                                                                 \
    shmem_ctx_##N##_put_signal(ctx, dst, src, 101, sig, (uint64_t)(seed * 1000 + 1), SHMEM_SIGNAL_SET, to);    \
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, (uint64_t)(seed * 1000 + 1));                                   \
    CHECK(same(dst, 101 * sizeof(T), seed + 11, from), #N " put_signal data");                                 \
    shmem_barrier_all();                                                                                       \
    shmem_ctx_##N##_put_signal_nbi(ctx, dst, src, 5, sig, 1, SHMEM_SIGNAL_ADD, to);                            \
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, (uint64_t)(seed * 1000 + 2));                                   \
    shmem_barrier_all();                                                                                       \
    shmem_free(dst);                                                                                           \
  }
HPSHMEM_RMA_TYPES(TEST_TYPE)

static void test_all(shmem_ctx_t ctx, int to, int from, uint64_t seed) {
#define CALL(T, N) test_##N(ctx, to, from, seed++);
  HPSHMEM_RMA_TYPES(CALL)
}

int main(void) {
  shmem_init();
  me = shmem_my_pe();
  n = shmem_n_pes();
  sig = shmem_calloc(1, sizeof(uint64_t));
  int to = (me + 1) % n, from = (me + n - 1) % n;
  test_all(SHMEM_CTX_DEFAULT, to, from, 100);
  shmem_ctx_t ctx;
  CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0, "ctx_create");
  test_all(ctx, to, from, 1000);
  shmem_team_t t;
  CHECK(shmem_ctx_get_team(ctx, &t) == 0 && t == SHMEM_TEAM_WORLD, "ctx_get_team");
  shmem_ctx_destroy(ctx);
  CHECK(shmem_ctx_create(-1, &ctx) != 0 && ctx == SHMEM_CTX_INVALID, "bad options accepted");

  /* A team of every PE in reverse order: team PE k is world PE n-1-k. */
  shmem_team_t rev;
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n, NULL, 0, &rev) == 0, "split reverse");
  CHECK(shmem_team_create_ctx(rev, 0, &ctx) == 0, "team_create_ctx");
  CHECK(shmem_ctx_get_team(ctx, &t) == 0 && t == rev, "team of a team context");
  int tme = shmem_team_my_pe(rev);
  CHECK(tme == n - 1 - me, "team rank %d", tme);
  /* Sending to team PE (tme+1)%n reaches world PE n-1-((n-1-me+1)%n). */
  int wto = n - 1 - (tme + 1) % n, wfrom = -1;
  for (int p = 0; p < n; p++)
    if (n - 1 - ((n - 1 - p + 1) % n) == me) wfrom = p;
  (void)wto;
  test_all(ctx, (tme + 1) % n, wfrom, 5000);
  shmem_ctx_destroy(ctx);
  shmem_team_destroy(rev);

  /* Sized and mem forms through the generic interface too. */
  static int64_t s64[64];
  static char big[1 << 20];
  int64_t v64[64];
  for (int i = 0; i < 64; i++) v64[i] = (int64_t)osh_rand(3, me, i);
  shmem_barrier_all();
  shmem_put64(s64, v64, 64, to);
  shmem_barrier_all();
  for (int i = 0; i < 64; i++) CHECK(s64[i] == (int64_t)osh_rand(3, from, i), "put64");
  shmem_put(s64, v64, 3, to); /* C11 generic on int64_t* */
  shmem_barrier_all();
  CHECK(shmem_g(&s64[2], to) == v64[2], "generic g");
  static char local[1 << 20];
  fill(local, sizeof local, 4, me);
  shmem_putmem(big, local, sizeof big, to);
  shmem_barrier_all();
  CHECK(same(big, sizeof big, 4, from), "putmem 1 MiB into a static array");
  memset(local, 0, sizeof local);
  shmem_getmem(local, big, sizeof big, from);
  CHECK(same(local, sizeof local, 4, (from + n - 1) % n), "getmem 1 MiB");

  /* Message passing: put, fence, flag. A PE that sees the flag sees the data, though the source
     was rewritten right after each put returned (on another host a put returns before it lands). */
  static long ring[257], flag;
  long v[257];
  shmem_barrier_all();
  for (long round = 1; round <= 20; round++) {
    for (int i = 0; i < 257; i++) v[i] = round * 1000 + i + me;
    if (round % 2)
      shmem_long_put(ring, v, 257, to);
    else
      for (int i = 0; i < 257; i++) shmem_long_p(&ring[i], v[i], to);
    for (int i = 0; i < 257; i++) v[i] = -1;
    shmem_fence();
    shmem_long_p(&flag, round, to);
    shmem_long_wait_until(&flag, SHMEM_CMP_GE, round);
    for (int i = 0; i < 257; i++) CHECK(ring[i] == round * 1000 + i + from, "round %ld element %d", round, i);
    shmem_barrier_all(); /* the next round overwrites ring */
  }
  /* quiet completes a stream of puts without any flag */
  for (int i = 0; i < 257; i++) shmem_long_p(&ring[i], -(i + me), to);
  shmem_quiet();
  shmem_barrier_all();
  for (int i = 0; i < 257; i++) CHECK(ring[i] == -(i + from), "p stream element %d", i);

  shmem_free(sig);
  osh_done("rma");
  return 0;
}
