/* One OpenSHMEM program, built by both libraries' oshcc, timed in the same run by
 * bench_oshmem.py: put/get bandwidth, small put+signal latency, atomics rate,
 * collectives (the active-set forms, which Open MPI 4.1's OpenSHMEM 1.4 also has).
 * PE 0 prints "RESULT <op> <bytes> <microseconds per op>" lines.
 * Debian's Open MPI 4.1.4 crashes inside shmem_finalize, so the program leaves
 * after its last barrier without it (both libraries alike). */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXB (16L << 20)
static long psync[SHMEM_BCAST_SYNC_SIZE > SHMEM_REDUCE_SYNC_SIZE ? SHMEM_BCAST_SYNC_SIZE : SHMEM_REDUCE_SYNC_SIZE];
static long
    psync2[SHMEM_COLLECT_SYNC_SIZE > SHMEM_ALLTOALL_SYNC_SIZE ? SHMEM_COLLECT_SYNC_SIZE : SHMEM_ALLTOALL_SYNC_SIZE];
static long pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + (1 << 17)];
static long sig[2];
static long word;
static int me, n;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void report(const char* op, long bytes, double us) {
  if (me == 0) printf("RESULT %s %ld %.4f\n", op, bytes, us);
  fflush(stdout);
}

static long iters_for(long bytes, long budget) {
  long it = budget / (bytes > 64 ? bytes : 64);
  return it < 20 ? 20 : it > 20000 ? 20000 : it;
}

/* Median of `reps` timed batches of `it` calls of `body`; barrier before each batch. */
#define TIME(out, reps, it, body)              \
  do {                                         \
    double _t[16];                             \
    for (int _r = 0; _r < (reps); _r++) {      \
      shmem_barrier_all();                     \
      double _t0 = now();                      \
      for (long _i = 0; _i < (it); _i++) {     \
        body;                                  \
      }                                        \
      _t[_r] = (now() - _t0) / (it) * 1e6;     \
    }                                          \
    for (int _a = 0; _a < (reps); _a++)        \
      for (int _b = _a + 1; _b < (reps); _b++) \
        if (_t[_b] < _t[_a]) {                 \
          double _x = _t[_a];                  \
          _t[_a] = _t[_b];                     \
          _t[_b] = _x;                         \
        }                                      \
    (out) = _t[(reps) / 2];                    \
  } while (0)

int main(void) {
  shmem_init();
  me = shmem_my_pe();
  n = shmem_n_pes();
  for (size_t i = 0; i < sizeof psync / sizeof psync[0]; i++) psync[i] = SHMEM_SYNC_VALUE;
  for (size_t i = 0; i < sizeof psync2 / sizeof psync2[0]; i++) psync2[i] = SHMEM_SYNC_VALUE;
  char* dst = shmem_malloc(MAXB * (n > 4 ? n : 4));
  char* src = shmem_malloc(MAXB * (n > 4 ? n : 4));
  memset(src, 1, MAXB * (n > 4 ? n : 4));
  memset(dst, 0, MAXB * (n > 4 ? n : 4));
  static const long sizes[] = {8, 64, 512, 4096, 32768, 262144, 1L << 20, 4L << 20, 16L << 20};
  const int ns = sizeof sizes / sizeof sizes[0];
  double us;
  shmem_barrier_all();

  if (n == 2) {
    int peer = 1 - me;
    /* Bandwidth: blocking puts (and gets) from PE 0 while PE 1 waits. */
    for (int k = 0; k < ns; k++) {
      long b = sizes[k], it = iters_for(b, 256L << 20);
      TIME(us, 5, it, if (me == 0) shmem_putmem(dst, src, b, peer); if (_i == it - 1) shmem_quiet());
      report("put", b, us);
      TIME(us, 5, it, if (me == 0) shmem_getmem(dst, src, b, peer));
      report("get", b, us);
    }
    /* Latency: a ping-pong of 8-byte puts each followed by a signal, one way. */
    long it = 20000;
    shmem_barrier_all();
    double t0 = now();
    for (long i = 1; i <= it; i++) {
      if (me == 0) {
        shmem_putmem(dst, src, 8, peer);
        shmem_fence();
        shmem_long_atomic_set(&sig[0], i, peer);
        shmem_long_wait_until(&sig[1], SHMEM_CMP_EQ, i);
      } else {
        shmem_long_wait_until(&sig[0], SHMEM_CMP_EQ, i);
        shmem_putmem(dst, src, 8, peer);
        shmem_fence();
        shmem_long_atomic_set(&sig[1], i, peer);
      }
    }
    report("put_fence_set_latency", 8, (now() - t0) / it / 2 * 1e6);
#ifdef SHMEM_SIGNAL_SET
    /* OpenSHMEM 1.5's put-with-signal: one call instead of three. */
    static uint64_t s64[2];
    shmem_barrier_all();
    t0 = now();
    for (long i = 1; i <= it; i++) {
      if (me == 0) {
        shmem_putmem_signal(dst, src, 8, &s64[0], (uint64_t)i, SHMEM_SIGNAL_SET, peer);
        shmem_signal_wait_until(&s64[1], SHMEM_CMP_EQ, (uint64_t)i);
      } else {
        shmem_signal_wait_until(&s64[0], SHMEM_CMP_EQ, (uint64_t)i);
        shmem_putmem_signal(dst, src, 8, &s64[1], (uint64_t)i, SHMEM_SIGNAL_SET, peer);
      }
    }
    report("put_signal_latency", 8, (now() - t0) / it / 2 * 1e6);
#endif
    /* p and g of one long. */
    TIME(
        us, 5, 20000, if (me == 0) {
          shmem_long_p(&word, _i, peer);
          if (_i == 19999) shmem_quiet();
        });
    report("p", 8, us);
    TIME(us, 5, 20000, if (me == 0) word += shmem_long_g(&word, peer));
    report("g", 8, us);
    /* Atomics on PE 1's word, from PE 0 and from both at once. */
    TIME(us, 5, 20000, if (me == 0) shmem_long_atomic_fetch_add(&word, 1, peer));
    report("atomic_fetch_add", 8, us);
    TIME(
        us, 5, 20000, if (me == 0) {
          shmem_long_atomic_add(&word, 1, peer);
          if (_i == 19999) shmem_quiet();
        });
    report("atomic_add", 8, us);
    TIME(us, 5, 20000, if (me == 0) shmem_long_atomic_compare_swap(&word, 5, 6, peer));
    report("atomic_compare_swap", 8, us);
    /* Every PE adds to PE 0's word at once: time per add over all of them, until all are done. */
    TIME(us, 5, 1, for (long k = 0; k < 20000; k++) shmem_long_atomic_fetch_add(&word, 1, 0); shmem_barrier_all());
    report("atomic_fetch_add_all_pes", 8, us / (20000.0 * n));
  }
  /* Collectives over every PE (bytes per PE). */
  TIME(us, 7, 2000, shmem_barrier_all());
  report("barrier_all", 0, us);
  static const long csizes[] = {8, 4096, 262144, 1L << 20};
  for (int k = 0; k < 4; k++) {
    long b = csizes[k], it = iters_for(b * n, 64L << 20) / 4 + 10;
    TIME(us, 5, it, shmem_broadcast64(dst, src, b / 8, 0, 0, 0, n, psync); shmem_barrier_all());
    report("broadcast", b, us);
    TIME(us, 5, it, shmem_fcollect64(dst, src, b / 8, 0, 0, n, psync2); shmem_barrier_all());
    report("fcollect", b, us);
    TIME(us, 5, it, shmem_alltoall64(dst, src, b / 8 / n > 0 ? b / 8 / n : 1, 0, 0, n, psync2); shmem_barrier_all());
    report("alltoall", b, us);
    if (b <= (1L << 17) * 8) {
      TIME(us, 5, it, shmem_long_sum_to_all((long*)dst, (long*)src, (int)(b / 8), 0, 0, n, pwrk, psync);
           shmem_barrier_all());
      report("sum_to_all", b, us);
    }
  }
  shmem_barrier_all();
  _exit(0);
}
