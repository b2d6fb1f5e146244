/* Hello world in OpenSHMEM: every PE adds its number into a global counter on PE 0
 * and passes a greeting to its right neighbour.
 *   oshcc -o hello examples/oshmem/hello.c && oshrun -np 4 ./hello */
#include <shmem.h>
#include <stdio.h>

long total; /* global data is symmetric: every PE has one, reachable by all */
char greeting[64];

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  char text[64];
  snprintf(text, sizeof text, "hello from PE %d", me);
  shmem_putmem(greeting, text, sizeof text, (me + 1) % n);
  shmem_long_atomic_add(&total, me, 0);
  shmem_barrier_all();
  printf("PE %d of %d got \"%s\"\n", me, n, greeting);
  if (me == 0) printf("sum of PE numbers: %ld (expected %d)\n", total, n * (n - 1) / 2);
  shmem_finalize();
  return 0;
}
