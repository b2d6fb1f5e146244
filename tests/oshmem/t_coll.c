/* Collectives: team broadcast / collect / fcollect / alltoall / alltoalls for several
 * types, every reduction op on every type it applies to (checked against a local
 * computation), teams (split_strided, split_2d, translate_pe, get_config, sync,
 * destroy; SHMEM_TEAM_SHARED), and the deprecated active-set forms with pSync. */
#include <complex.h>

#include "check.h"

static int me, n;
static long pSync[SHMEM_REDUCE_SYNC_SIZE];

#define NMAX 67
#define MAXPES 16
/* Symmetric scratch as global data: team-only code may not call shmem_malloc,
 * which is collective over every PE. */
static long double dst_store[NMAX * MAXPES * 2 + 4], src_store[NMAX * MAXPES * 2];

/* Element i of PE p's contribution: small values so sums and products stay exact. */
#define VAL(T, p, i) ((T)(((p) * 7 + (i) * 3) % 5 + 1))

#define TEST_COLL(T, N)                                                                                       \
  static void coll_##N(shmem_team_t team) {                                                                   \
    int tn = shmem_team_n_pes(team), tme = shmem_team_my_pe(team);                                            \
    T* dst = (T*)dst_store;                                                                                   \
    T* src = (T*)src_store;                                                                                   \
    for (int cnt = 0; cnt <= NMAX; cnt += 67 / 3 + (cnt == 0)) {                                              \
      for (int i = 0; i < NMAX * tn * 2; i++) src[i] = VAL(T, tme, i);                                        \
      memset(dst, 0x5A, (size_t)(NMAX * tn * 2 + 4) * sizeof(T));                                             \
      T poison;                                                                                               \
      memset(&poison, 0x5A, sizeof poison);                                                                   \
      int root = cnt % tn;                                                                                    \
      CHECK(shmem_##N##_broadcast(team, dst, src, (size_t)cnt, root) == 0, "broadcast");                      \
      for (int i = 0; i < cnt; i++) CHECK(dst[i] == VAL(T, root, i), #N " broadcast [%d]", i);                \
      CHECK(!memcmp(&dst[cnt], &poison, sizeof poison), #N " broadcast past the end");                        \
      shmem_team_sync(team);                                                                                  \
      CHECK(shmem_##N##_fcollect(team, dst, src, (size_t)cnt) == 0, "fcollect");                              \
      for (int p = 0; p < tn; p++)                                                                            \
        for (int i = 0; i < cnt; i++) CHECK(dst[p * cnt + i] == VAL(T, p, i), #N " fcollect [%d][%d]", p, i); \
      shmem_team_sync(team);                                                                                  \
      /* collect: PE p contributes cnt + p elements */                                                        \
      CHECK(shmem_##N##_collect(team, dst, src, (size_t)(cnt + tme)) == 0, "collect");                        \
      int off = 0;                                                                                            \
      for (int p = 0; p < tn; p++) {                                                                          \
        for (int i = 0; i < cnt + p; i++) CHECK(dst[off + i] == VAL(T, p, i), #N " collect [%d][%d]", p, i);  \
        off += cnt + p;                                                                                       \
      }                                                                                                       \
      CHECK(!memcmp(&dst[off], &poison, sizeof poison), #N " collect past the end");                          \
      shmem_team_sync(team);                                                                                  \
      CHECK(shmem_##N##_alltoall(team, dst, src, (size_t)cnt) == 0, "alltoall");                              \
      for (int p = 0; p < tn; p++)                                                                            \
        for (int i = 0; i < cnt; i++)                                                                         \
          CHECK(dst[p * cnt + i] == VAL(T, p, tme * cnt + i), #N " alltoall [%d][%d]", p, i);                 \
      shmem_team_sync(team);                                                                                  \
      memset(dst, 0x5A, (size_t)(NMAX * tn * 2 + 4) * sizeof(T));                                             \
      int c2 = cnt / 2;                                                                                       \
      CHECK(shmem_##N##_alltoalls(team, dst, src, 2, 1, (size_t)c2) == 0, "alltoalls");                       \
      for (int p = 0; p < tn; p++)                                                                            \
        for (int i = 0; i < c2; i++) {                                                                        \
          CHECK(dst[2 * (p * c2 + i)] == VAL(T, p, tme * c2 + i), #N " alltoalls [%d][%d]", p, i);            \
          CHECK(!memcmp(&dst[2 * (p * c2 + i) + 1], &poison, sizeof poison), #N " alltoalls gap");            \
        }                                                                                                     \
      shmem_team_sync(team);                                                                                  \
    }                                                                                                         \
  }
TEST_COLL(int, int)
TEST_COLL(double, double)
TEST_COLL(char, char)
TEST_COLL(int16_t, int16)
TEST_COLL(long double, longdouble)

/* Reductions: dest and source distinct, then in place. */
#define TEST_RED(T, N, OP, EXPR)                                                                        \
  static void red_##N##_##OP(shmem_team_t team) {                                                       \
    int tn = shmem_team_n_pes(team), tme = shmem_team_my_pe(team);                                      \
    T* src = (T*)src_store;                                                                             \
    T* dst = (T*)dst_store;                                                                             \
    for (int cnt = 0; cnt <= NMAX; cnt += 33) {                                                         \
      for (int i = 0; i < NMAX; i++) src[i] = VAL(T, tme, i), dst[i] = (T)99;                           \
      CHECK(shmem_##N##_##OP##_reduce(team, dst, src, (size_t)cnt) == 0, #N " " #OP);                   \
      for (int i = 0; i < cnt; i++) {                                                                   \
        T acc = VAL(T, 0, i);                                                                           \
        for (int p = 1; p < tn; p++) {                                                                  \
          T b = VAL(T, p, i);                                                                           \
          acc = (T)(EXPR);                                                                              \
        }                                                                                               \
        CHECK(dst[i] == acc, #N " " #OP " [%d] (cnt %d)", i, cnt);                                      \
      }                                                                                                 \
      for (int i = cnt; i < NMAX; i++) CHECK(dst[i] == (T)99, #N " " #OP " wrote past the end");        \
      for (int i = 0; i < NMAX; i++) CHECK(src[i] == VAL(T, tme, i), #N " " #OP " changed the source"); \
      shmem_team_sync(team);                                                                            \
    }                                                                                                   \
    CHECK(shmem_##N##_##OP##_reduce(team, src, src, 3) == 0, #N " " #OP " in place");                   \
  }
#define RED_BIT(T, N) TEST_RED(T, N, and, acc& b) TEST_RED(T, N, or, acc | b) TEST_RED(T, N, xor, acc ^ b)
#define RED_MINMAX(T, N) TEST_RED(T, N, max, acc > b ? acc : b) TEST_RED(T, N, min, acc < b ? acc : b)
#define RED_ARITH(T, N) TEST_RED(T, N, sum, acc + b) TEST_RED(T, N, prod, acc* b)
HPSHMEM_BITWISE_REDUCE_TYPES(RED_BIT)
HPSHMEM_MINMAX_REDUCE_TYPES(RED_MINMAX)
HPSHMEM_ARITH_REDUCE_TYPES(RED_ARITH)

static void all_reductions(shmem_team_t team) {
#define CALL_BIT(T, N) \
  red_##N##_and(team); \
  red_##N##_or(team);  \
  red_##N##_xor(team);
#define CALL_MINMAX(T, N) \
  red_##N##_max(team);    \
  red_##N##_min(team);
#define CALL_ARITH(T, N) \
  red_##N##_sum(team);   \
  red_##N##_prod(team);
  HPSHMEM_BITWISE_REDUCE_TYPES(CALL_BIT)
  HPSHMEM_MINMAX_REDUCE_TYPES(CALL_MINMAX)
  HPSHMEM_ARITH_REDUCE_TYPES(CALL_ARITH)
}

static void all_collectives(shmem_team_t team) {
  coll_int(team);
  coll_double(team);
  coll_char(team);
  coll_int16(team);
  coll_longdouble(team);
}

int main(void) {
  shmem_init();
  me = shmem_my_pe();
  n = shmem_n_pes();
  CHECK(n <= MAXPES, "at most %d PEs", MAXPES);
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) pSync[i] = SHMEM_SYNC_VALUE;

  all_collectives(SHMEM_TEAM_WORLD);
  all_reductions(SHMEM_TEAM_WORLD);
  /* SHMEM_TEAM_SHARED: exactly the PEs whose memory this one maps (shmem_ptr). */
  int shared = 0;
  for (int p = 0; p < n; p++) {
    int in = shmem_team_translate_pe(SHMEM_TEAM_WORLD, p, SHMEM_TEAM_SHARED) >= 0;
    CHECK(in == (shmem_ptr(pSync, p) != NULL), "PE %d: shared team membership", p);
    shared += in;
  }
  CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) == shared && shared >= 1, "shared team size");
  coll_int(SHMEM_TEAM_SHARED);

  /* Teams: the even PEs; a 2-D split; translations; config. */
  shmem_team_t even;
  shmem_team_config_t cfg = {.num_contexts = 2};
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &cfg, SHMEM_TEAM_NUM_CONTEXTS, &even) == 0,
        "split");
  if (me % 2 == 0) {
    CHECK(even != SHMEM_TEAM_INVALID && shmem_team_my_pe(even) == me / 2, "even team rank");
    shmem_team_config_t got = {0};
    CHECK(shmem_team_get_config(even, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0 && got.num_contexts == 2, "config");
    CHECK(
        shmem_team_translate_pe(even, 1 % shmem_team_n_pes(even), SHMEM_TEAM_WORLD) == 2 % (2 * shmem_team_n_pes(even)),
        "translate");
    all_collectives(even);
    red_int_sum(even);
    red_double_max(even);
    shmem_team_destroy(even);
  } else {
    CHECK(even == SHMEM_TEAM_INVALID, "odd PE got a team");
    CHECK(shmem_team_my_pe(even) == -1 && shmem_team_n_pes(even) == -1, "invalid team queries");
    CHECK(shmem_int_sum_reduce(even, NULL, NULL, 0) != 0, "collective on an invalid team succeeded");
  }
  CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, SHMEM_TEAM_INVALID) == -1, "translate to invalid");
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n + 1, NULL, 0, &even) != 0, "oversized split accepted");
  shmem_team_t xt, yt;
  int xr = n > 2 ? 2 : 1;
  CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, xr, NULL, 0, &xt, NULL, 0, &yt) == 0, "split_2d");
  CHECK(shmem_team_my_pe(xt) == me % xr && shmem_team_my_pe(yt) == me / xr, "2d ranks %d %d", shmem_team_my_pe(xt),
        shmem_team_my_pe(yt));
  CHECK(shmem_team_translate_pe(xt, 0, yt) == (me % xr == 0 ? me / xr : -1), "translate across 2d teams");
  shmem_team_sync(xt);
  shmem_team_sync(yt);
  coll_int(yt);
  red_long_sum(xt);
  shmem_team_destroy(xt);
  shmem_team_destroy(yt);

  /* Small broadcasts, reductions and fcollects back to back with no synchronization between
   * them (a broadcast's root waits for nobody: the next eager call must not overrun a slot). */
  {
    static long bsrc[4], bdst[4], rsrc[4], rdst[4], fdst[4 * MAXPES];
    for (int it = 0; it < 300; it++) {
      int root = it % n;
      for (int i = 0; i < 4; i++) bsrc[i] = it * 100 + me * 10 + i, rsrc[i] = it + me + i;
      /* twice from the same root: the root may then be two calls ahead of a member */
      for (int twice = 0; twice < 2; twice++) {
        CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, bdst, bsrc, 1 + it % 4, root) == 0, "b2b broadcast");
        for (int i = 0; i < 1 + it % 4; i++) CHECK(bdst[i] == it * 100 + root * 10 + i, "b2b broadcast %d [%d]", it, i);
      }
      if (it % 3 == 0) {
        CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, rdst, rsrc, 4) == 0, "b2b reduce");
        for (int i = 0; i < 4; i++) CHECK(rdst[i] == (long)n * (it + i) + (long)n * (n - 1) / 2, "b2b reduce %d", it);
      } else if (it % 3 == 1) {
        CHECK(shmem_long_fcollect(SHMEM_TEAM_WORLD, fdst, rsrc, 2) == 0, "b2b fcollect");
        for (int p = 0; p < n; p++)
          CHECK(fdst[2 * p] == it + p && fdst[2 * p + 1] == it + p + 1, "b2b fcollect %d", it);
      }
    }
  }

  /* Teams until the workspace is full: the split that fails, fails on every PE of the parent
   * (members and not), the ones before it stay usable, and destroying them makes room again. */
  static shmem_team_t many[400];
  static int failed_at;
  int made = 0;
  for (; made < 400; made++) {
    if (shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, 1 + made % n, NULL, 0, &many[made]) != 0) break;
  }
  CHECK(made < 400, "the workspace never filled");
  failed_at = made;
  static int all_failed_at[MAXPES];
  shmem_int_fcollect(SHMEM_TEAM_WORLD, all_failed_at, &failed_at, 1);
  for (int p = 0; p < n; p++)
    CHECK(all_failed_at[p] == made, "PE %d failed at split %d, this PE at %d", p, all_failed_at[p], made);
  CHECK(many[made] == SHMEM_TEAM_INVALID, "a failed split left a team");
  if (many[made - 1] != SHMEM_TEAM_INVALID) shmem_team_sync(many[made - 1]);
  for (int i = made - 1; i >= 0; i--) shmem_team_destroy(many[i]);
  shmem_team_t again;
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &again) == 0, "no room after destroying");
  shmem_team_sync(again);
  shmem_team_destroy(again);

  /* Deprecated active-set forms: every PE, then the even ones (stride 2). */
  static int64_t a64[4 * 64], b64[4 * 64];
  static int32_t a32[4 * 64];
  for (int i = 0; i < 64; i++) b64[i] = me * 100 + i;
  shmem_barrier(0, 0, n, pSync);
  shmem_broadcast64(a64, b64, 5, 0, 0, 0, n, pSync);
  if (me != 0)
    for (int i = 0; i < 5; i++) CHECK(a64[i] == i, "broadcast64");
  shmem_barrier_all();
  shmem_fcollect64(a64, b64, 3, 0, 0, n, pSync);
  for (int p = 0; p < n; p++)
    for (int i = 0; i < 3; i++) CHECK(a64[p * 3 + i] == p * 100 + i, "fcollect64");
  shmem_barrier_all();
  shmem_collect32(a32, (int32_t[]){me, me, me, me}, (size_t)(me % 2 + 1), 0, 0, n, pSync);
  for (int p = 0, off = 0; p < n; off += p % 2 + 1, p++)
    for (int i = 0; i < p % 2 + 1; i++) CHECK(a32[off + i] == p, "collect32");
  shmem_barrier_all();
  shmem_alltoall64(a64, b64, 2, 0, 0, n, pSync);
  for (int p = 0; p < n; p++)
    for (int i = 0; i < 2; i++) CHECK(a64[p * 2 + i] == p * 100 + me * 2 + i, "alltoall64");
  shmem_barrier_all();
  static long lsrc[8], ldst[8], pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 8];
  for (int i = 0; i < 8; i++) lsrc[i] = me + i;
  shmem_long_sum_to_all(ldst, lsrc, 8, 0, 0, n, pWrk, pSync);
  for (int i = 0; i < 8; i++) CHECK(ldst[i] == (long)n * (n - 1) / 2 + (long)n * i, "sum_to_all");
  shmem_barrier_all();
  if (me % 2 == 0) {
    int size = (n + 1) / 2;
    shmem_barrier(0, 1, size, pSync);
    shmem_long_max_to_all(ldst, lsrc, 8, 0, 1, size, pWrk, pSync);
    for (int i = 0; i < 8; i++) CHECK(ldst[i] == 2 * (size - 1) + i, "max_to_all on the even PEs");
    shmem_long_max_to_all(ldst, lsrc, 8, 0, 1, size, pWrk, pSync); /* the set's team is reused */
  }
  shmem_barrier_all();
  /* generic collectives */
  static int gi[64], go[64 * 8];
  gi[0] = me;
  shmem_fcollect(SHMEM_TEAM_WORLD, go, gi, 1);
  for (int p = 0; p < n; p++) CHECK(go[p] == p, "generic fcollect");
  shmem_sum_reduce(SHMEM_TEAM_WORLD, go, gi, 1);
  CHECK(go[0] == n * (n - 1) / 2, "generic sum_reduce");
  /* A reduction larger than the eager slot: the runtime's allreduce. */
  long* big_src = (long*)src_store;
  long* big_dst = (long*)dst_store;
  for (int i = 0; i < 3001; i++) big_src[i] = (long)osh_rand(9, me, i) % 1000;
  shmem_barrier_all();
  CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, big_dst, big_src, 3001) == 0, "big sum");
  for (int i = 0; i < 3001; i++) {
    long acc = 0;
    for (int p = 0; p < n; p++) acc += (long)osh_rand(9, p, i) % 1000;
    CHECK(big_dst[i] == acc, "big sum [%d]", i);
  }
  osh_done("collectives");
  return 0;
}
