/* Point-to-point synchronization: wait_until and test with every comparison, the
 * _all/_any/_some forms and their _vector forms with status masks, waits woken by
 * plain puts and atomics on global data, and signals (put_signal, signal_fetch,
 * signal_wait_until). */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "check.h"

long flags[8]; /* symmetric (global) */
uint64_t sigword;
int ints[16];

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  int to = (me + 1) % n, from = (me + n - 1) % n;

  /* test with every comparison, local values */
  flags[0] = 5;
  CHECK(shmem_long_test(&flags[0], SHMEM_CMP_EQ, 5) && !shmem_long_test(&flags[0], SHMEM_CMP_NE, 5), "EQ/NE");
  CHECK(shmem_long_test(&flags[0], SHMEM_CMP_GT, 4) && !shmem_long_test(&flags[0], SHMEM_CMP_GT, 5), "GT");
  CHECK(shmem_long_test(&flags[0], SHMEM_CMP_GE, 5) && !shmem_long_test(&flags[0], SHMEM_CMP_GE, 6), "GE");
  CHECK(shmem_long_test(&flags[0], SHMEM_CMP_LT, 6) && !shmem_long_test(&flags[0], SHMEM_CMP_LT, 5), "LT");
  CHECK(shmem_long_test(&flags[0], SHMEM_CMP_LE, 5) && !shmem_long_test(&flags[0], SHMEM_CMP_LE, 4), "LE");
  unsigned long long big = ~0ull;
  CHECK(shmem_ulonglong_test(&big, SHMEM_CMP_GT, 1ull), "unsigned comparison");
  flags[0] = 0;
  shmem_barrier_all();

  /* wait_until woken by a put from the previous PE, many rounds, the waiter
   * often asleep (the sender sleeps first on odd rounds) */
  for (long round = 1; round <= 50; round++) {
    if (round % 2) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
    /* a token around the ring: each PE checks the value before passing it on */
    if (me == 0) shmem_long_p(&flags[0], round, to);
    shmem_long_wait_until(&flags[0], SHMEM_CMP_GE, round);
    CHECK(flags[0] == round, "round %ld saw %ld", round, flags[0]);
    if (me != 0) shmem_long_p(&flags[0], round, to);
  }
  shmem_barrier_all();

  /* _all / _any / _some with a status mask: element 2 is excluded and never set */
  for (int i = 0; i < 8; i++) flags[i] = 0;
  int status[8] = {0, 0, 1, 0, 0, 0, 0, 0};
  shmem_barrier_all();
  for (int i = 0; i < 8; i++)
    if (i != 2) shmem_long_atomic_set(&flags[i], 10 + i, to);
  shmem_long_wait_until_all(flags, 8, status, SHMEM_CMP_GE, 10);
  CHECK(flags[2] == 0, "excluded element was set");
  CHECK(shmem_long_test_all(flags, 8, status, SHMEM_CMP_GE, 10), "test_all");
  CHECK(!shmem_long_test_all(flags, 8, NULL, SHMEM_CMP_GE, 10), "test_all without mask");
  size_t idx = shmem_long_test_any(flags, 8, NULL, SHMEM_CMP_EQ, 13);
  CHECK(idx == 3, "test_any %zu", idx);
  CHECK(shmem_long_test_any(flags, 8, NULL, SHMEM_CMP_EQ, 99) == SIZE_MAX, "test_any none");
  /* Fairness: with several true, repeated calls do not keep returning the same one. */
  int seen_any[8] = {0}, distinct = 0;
  for (int k = 0; k < 64; k++) {
    size_t i = shmem_long_test_any(flags, 8, status, SHMEM_CMP_GE, 10);
    CHECK(i < 8 && i != 2, "test_any returned %zu", i);
    distinct += !seen_any[i];
    seen_any[i] = 1;
  }
  CHECK(distinct == 7, "test_any returned only %d of the 7 true variables", distinct);
  size_t ind[8];
  size_t cnt = shmem_long_test_some(flags, 8, ind, status, SHMEM_CMP_GT, 14);
  CHECK(cnt == 3 && ind[0] == 5 && ind[1] == 6 && ind[2] == 7, "test_some %zu", cnt);
  long want[8] = {10, 11, 99, 13, 14, 15, 16, 17};
  CHECK(shmem_long_test_all_vector(flags, 8, status, SHMEM_CMP_EQ, want), "test_all_vector");
  want[4] = 0;
  CHECK(!shmem_long_test_all_vector(flags, 8, status, SHMEM_CMP_EQ, want), "test_all_vector mismatch");
  CHECK(shmem_long_test_any_vector(flags, 8, status, SHMEM_CMP_NE, want) == 4, "test_any_vector");
  cnt = shmem_long_test_some_vector(flags, 8, ind, status, SHMEM_CMP_EQ, want);
  CHECK(cnt == 6, "test_some_vector %zu", cnt);
  int all_masked[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(shmem_long_wait_until_any(flags, 8, all_masked, SHMEM_CMP_EQ, 0) == SIZE_MAX, "any with all masked");
  shmem_barrier_all();

  /* wait_until_any / some / vectors woken by atomics one at a time */
  for (int i = 0; i < 16; i++) ints[i] = -1;
  shmem_barrier_all();
  shmem_int_atomic_set(&ints[11], 7, to);
  size_t a = shmem_int_wait_until_any(ints, 16, NULL, SHMEM_CMP_NE, -1);
  CHECK(a == 11 && ints[11] == 7, "wait_until_any %zu", a);
  size_t got = shmem_int_wait_until_some(ints, 16, ind, NULL, SHMEM_CMP_EQ, 7);
  CHECK(got == 1 && ind[0] == 11, "wait_until_some");
  int targets[16];
  for (int i = 0; i < 16; i++) targets[i] = i == 11 ? 7 : -1;
  shmem_int_wait_until_all_vector(ints, 16, NULL, SHMEM_CMP_EQ, targets);
  targets[3] = 3;
  shmem_barrier_all();
  shmem_int_p(&ints[3], 3, to);
  CHECK(shmem_int_wait_until_any_vector(ints, 16, NULL, SHMEM_CMP_EQ, targets) != SIZE_MAX, "any_vector");
  shmem_int_wait_until_all_vector(ints, 16, NULL, SHMEM_CMP_EQ, targets);
  CHECK(shmem_int_wait_until_some_vector(ints, 16, ind, NULL, SHMEM_CMP_EQ, targets) == 16, "some_vector");
  shmem_barrier_all();

  /* signals: put_signal carries a block; the waiter sees every byte */
  static char block[65536];
  static char mine[65536];
  for (int round = 1; round <= 20; round++) {
    for (size_t i = 0; i < sizeof mine; i++) mine[i] = (char)(osh_rand(round, me, i));
    size_t bytes = round % 2 ? sizeof mine : 1 + (size_t)round * 37;
    shmem_putmem_signal(block, mine, bytes, &sigword, (uint64_t)round, SHMEM_SIGNAL_SET, to);
    uint64_t v = shmem_signal_wait_until(&sigword, SHMEM_CMP_EQ, (uint64_t)round);
    CHECK(v == (uint64_t)round && shmem_signal_fetch(&sigword) == (uint64_t)round, "signal value");
    for (size_t i = 0; i < bytes; i++) CHECK(block[i] == (char)osh_rand(round, from, i), "byte %zu round %d", i, round);
    shmem_barrier_all();
  }
  /* ADD from every PE to PE 0 */
  shmem_barrier_all();
  if (me == 0) sigword = 0;
  shmem_barrier_all();
  shmem_putmem_signal_nbi(block, mine, 8, &sigword, 1000, SHMEM_SIGNAL_ADD, 0);
  if (me == 0) CHECK(shmem_signal_wait_until(&sigword, SHMEM_CMP_EQ, 1000ull * n) == 1000ull * n, "signal add");
  /* generic forms */
  shmem_barrier_all();
  shmem_wait_until(&flags[0], SHMEM_CMP_GE, 0);
  CHECK(shmem_test(&ints[11], SHMEM_CMP_EQ, 7), "generic test");
  osh_done("sync");
  return 0;
}
