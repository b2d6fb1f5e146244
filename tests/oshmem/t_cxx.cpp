// The header compiles as C++ and the typed routines link from a C++ program.
#include <shmem.h>

#include <cstdio>
#include <vector>

long total;

int main() {
  shmem_init();
  std::vector<long> mine(3, shmem_my_pe() + 1);
  long* heap = static_cast<long*>(shmem_malloc(3 * sizeof(long)));
  shmem_long_put(heap, mine.data(), 3, (shmem_my_pe() + 1) % shmem_n_pes());
  shmem_barrier_all();
  shmem_long_atomic_add(&total, heap[0] + heap[1] + heap[2], 0);
  shmem_barrier_all();
  long n = shmem_n_pes();
  if (shmem_my_pe() == 0) {
    if (total != 3 * n * (n + 1) / 2) {
      std::fprintf(stderr, "total %ld\n", total);
      shmem_global_exit(2);
    }
    std::printf("c++: OK on %ld PEs\n", n);
  }
  // Complex reductions from C++ (C's _Complex, a GNU extension there).
  static double _Complex zin, zout;
  __real__ zin = shmem_my_pe() + 1;
  __imag__ zin = 2.0 * (shmem_my_pe() + 1);
  shmem_complexd_sum_reduce(SHMEM_TEAM_WORLD, &zout, &zin, 1);
  double re = __real__ zout, im = __imag__ zout;
  if (re != n * (n + 1) / 2 || im != n * (n + 1)) {
    std::fprintf(stderr, "complex sum %g%+gi\n", re, im);
    shmem_global_exit(2);
  }
  shmem_free(heap);
  shmem_finalize();
}
