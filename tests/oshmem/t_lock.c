/* Distributed locks under contention: every PE increments a counter on PE 0 with a
 * plain get and put (not atomic) while holding the lock; with mutual exclusion no
 * increment is lost. test_lock succeeds exactly when the lock is free. */
#include "check.h"

long lock1; /* symmetric, zero: unlocked */
long lock2;
long counter;
int holder_count; /* how many PEs believe they hold lock2 at once (on PE 0) */

#define ROUNDS 200

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  for (int i = 0; i < ROUNDS; i++) {
    shmem_set_lock(&lock1);
    long v = shmem_long_g(&counter, 0);
    shmem_long_p(&counter, v + 1, 0);
    shmem_clear_lock(&lock1);
  }
  shmem_barrier_all();
  if (me == 0) CHECK(counter == (long)ROUNDS * n, "lost increments: %ld of %ld", counter, (long)ROUNDS * n);

  /* test_lock: spin on it, and check that nobody else is inside at the same time. */
  int acquired = 0;
  for (int i = 0; i < ROUNDS; i++) {
    while (shmem_test_lock(&lock2) != 0) {
    }
    int inside = shmem_int_atomic_fetch_inc(&holder_count, 0);
    CHECK(inside == 0, "%d other holder(s) inside the lock", inside);
    shmem_int_atomic_add(&holder_count, -1, 0);
    shmem_clear_lock(&lock2);
    acquired++;
  }
  shmem_barrier_all();
  /* Free now: test_lock takes it at once, and a second test fails while held. */
  if (me == 0) {
    CHECK(shmem_test_lock(&lock2) == 0, "free lock not taken");
    CHECK(shmem_test_lock(&lock2) != 0, "held lock taken twice");
    shmem_clear_lock(&lock2);
  }
  CHECK(acquired == ROUNDS, "acquired %d", acquired);
  osh_done("locks");
  return 0;
}
