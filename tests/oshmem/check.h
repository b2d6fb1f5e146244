/* Shared by the OpenSHMEM C tests: a failed check prints where and why, then
 * ends the whole job with status 2 (oshrun returns it). */
#ifndef OSH_TEST_CHECK_H
#define OSH_TEST_CHECK_H
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                             \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      fprintf(stderr, "PE %d: %s:%d: check failed: %s: ", shmem_my_pe(), __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                                  \
      fprintf(stderr, "\n");                                                                         \
      shmem_global_exit(2);                                                                          \
    }                                                                                                \
  } while (0)

/* A reproducible pseudo-random stream per (seed, PE, index). */
static inline uint64_t osh_rand(uint64_t seed, int pe, uint64_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)pe << 40) ^ (i * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return x;
}

static inline void osh_done(const char* name) {
  shmem_barrier_all();
  if (shmem_my_pe() == 0) printf("%s: OK on %d PEs\n", name, shmem_n_pes());
  shmem_finalize();
}
#endif
