/* The peer figure of bench_hosts.py: Open MPI OSHMEM's 8-byte put + fence + signal, one way (half a
 * ping-pong between 2 PEs), on whatever wire UCX_TLS selects. Prints the microseconds.
 * OpenSHMEM 1.4 (Open MPI 4.1 has no shmem_put_signal): putmem, fence, atomic_set, wait_until.
 * Debian's Open MPI 4.1.4 crashes inside shmem_finalize, so the program leaves after its last
 * barrier without it. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long sig[2];
static char buf[8];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char** argv) {
  long iters = argc > 1 ? atol(argv[1]) : 20000;
  shmem_init();
  int me = shmem_my_pe(), peer = 1 - me;
  char src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  double t0 = 0;
  for (long i = 1; i <= iters + 1000; ++i) { /* the first 1000 warm up */
    if (i == 1001) {
      shmem_barrier_all();
      t0 = now();
    }
    if (me == 0) {
      shmem_putmem(buf, src, 8, peer);
      shmem_fence();
      shmem_long_atomic_set(&sig[0], i, peer);
      shmem_long_wait_until(&sig[1], SHMEM_CMP_EQ, i);
    } else {
      shmem_long_wait_until(&sig[0], SHMEM_CMP_EQ, i);
      shmem_putmem(buf, src, 8, peer);
      shmem_fence();
      shmem_long_atomic_set(&sig[1], i, peer);
    }
  }
  double us = (now() - t0) / iters / 2 * 1e6;
  if (me == 0) printf("%.3f\n", us);
  fflush(stdout);
  shmem_barrier_all();
  _exit(0);
}
