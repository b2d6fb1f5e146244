/* Setup, query, thread levels, memory management, shmem_ptr and global data. */
#include "check.h"

int global_int = 7;           /* .data */
static long static_arr[1000]; /* .bss, more than a page */
double global_double;

int main(void) {
  int provided = -1;
  CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "init_thread");
  CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided %d", provided);
  int q = -1;
  shmem_query_thread(&q);
  CHECK(q == SHMEM_THREAD_MULTIPLE, "query_thread %d", q);
  shmem_init(); /* a second call changes nothing */
  int me = shmem_my_pe(), n = shmem_n_pes();
  CHECK(me >= 0 && me < n && _my_pe() == me && _num_pes() == n, "my_pe %d n_pes %d", me, n);
  int major = 0, minor = 0;
  shmem_info_get_version(&major, &minor);
  CHECK(major == 1 && minor == 5, "version %d.%d", major, minor);
  char name[SHMEM_MAX_NAME_LEN];
  shmem_info_get_name(name);
  CHECK(strlen(name) > 0 && strlen(name) < SHMEM_MAX_NAME_LEN, "name");
  for (int pe = 0; pe < n; pe++) CHECK(shmem_pe_accessible(pe), "pe %d not accessible", pe);
  CHECK(!shmem_pe_accessible(n) && !shmem_pe_accessible(-1), "out-of-range PE accessible");

  /* Global and static data are symmetric: written by a peer, read here. */
  CHECK(global_int == 7, "initial value lost: %d", global_int);
  int stack_var = 0;
  CHECK(shmem_addr_accessible(&global_int, (me + 1) % n), "global not accessible");
  CHECK(shmem_addr_accessible(&static_arr[999], 0), "static not accessible");
  CHECK(!shmem_addr_accessible(&stack_var, 0), "stack accessible");
  shmem_barrier_all();
  shmem_int_p(&global_int, 100 + me, (me + 1) % n);
  for (int i = 0; i < 1000; i++) static_arr[i] = -1;
  shmem_barrier_all();
  long row[1000];
  for (int i = 0; i < 1000; i++) row[i] = (long)osh_rand(1, me, i);
  shmem_long_put(static_arr, row, 1000, (me + 1) % n);
  shmem_double_p(&global_double, 0.5 * me, (me + n - 1) % n);
  shmem_barrier_all();
  int from = (me + n - 1) % n;
  CHECK(global_int == 100 + from, "global_int %d, expected %d", global_int, 100 + from);
  for (int i = 0; i < 1000; i++) CHECK(static_arr[i] == (long)osh_rand(1, from, i), "static_arr[%d]", i);
  CHECK(global_double == 0.5 * ((me + 1) % n), "global_double %g", global_double);
  CHECK(shmem_int_g(&global_int, (me + 1) % n) == 100 + me, "g of a global");

  /* shmem_ptr: direct loads and stores on peers of this host. */
  for (int pe = 0; pe < n; pe++) {
    long* p = shmem_ptr(&static_arr[3], pe);
    CHECK(p != NULL, "shmem_ptr(%d) null on one host", pe);
    if (pe == me) CHECK(p == &static_arr[3], "shmem_ptr to self is not the object");
  }
  CHECK(shmem_ptr(&stack_var, 0) == NULL, "shmem_ptr of a stack variable");
  long* peer = shmem_ptr(&static_arr[10], (me + 1) % n);
  shmem_barrier_all();
  *peer = 4242 + me;
  shmem_barrier_all();
  CHECK(static_arr[10] == 4242 + from, "store through shmem_ptr: %ld", static_arr[10]);

  /* Memory management: values, alignment, zero sizes, realloc keeps the prefix. */
  CHECK(shmem_malloc(0) == NULL, "malloc(0)");
  int* a = shmem_malloc(101 * sizeof(int));
  CHECK(a && ((uintptr_t)a % 8) == 0, "malloc");
  long* z = shmem_calloc(37, sizeof(long));
  for (int i = 0; i < 37; i++) CHECK(z[i] == 0, "calloc not zero at %d", i);
  void* al = shmem_align(4096, 13);
  CHECK(al && ((uintptr_t)al % 4096) == 0, "align");
  void* big_al = shmem_align(4 << 20, 100); /* above the segment's 2 MiB: still aligned on every PE */
  CHECK(big_al && ((uintptr_t)big_al % (4 << 20)) == 0, "align 4 MiB");
  shmem_free(big_al);
  /* Zero-length transfers move nothing and take any pointer, null included. */
  shmem_putmem(NULL, NULL, 0, (me + 1) % n);
  shmem_getmem(NULL, NULL, 0, (me + 1) % n);
  shmem_int_iput(NULL, NULL, 1, 1, 0, (me + 1) % n);
  shmem_int_iget(NULL, NULL, 1, 1, 0, (me + 1) % n);
  static uint64_t zsig;
  shmem_barrier_all();
  shmem_putmem_signal(NULL, NULL, 0, &zsig, 5, SHMEM_SIGNAL_ADD, (me + 1) % n);
  shmem_signal_wait_until(&zsig, SHMEM_CMP_EQ, 5); /* the signal of an empty put still arrives */
  void* h = shmem_malloc_with_hints(64, SHMEM_MALLOC_ATOMICS_REMOTE);
  CHECK(h, "malloc_with_hints");
  for (int i = 0; i < 101; i++) a[i] = me * 1000 + i;
  a = shmem_realloc(a, 997 * sizeof(int));
  CHECK(a, "realloc");
  for (int i = 0; i < 101; i++) CHECK(a[i] == me * 1000 + i, "realloc lost a[%d]=%d", i, a[i]);
  shmem_barrier_all();
  shmem_int_put(a + 500, a, 101, (me + 1) % n);
  shmem_barrier_all();
  for (int i = 0; i < 101; i++) CHECK(a[500 + i] == from * 1000 + i, "put into realloc'd block");
  CHECK(shmem_realloc(a, 0) == NULL, "realloc to 0");
  shmem_free(z);
  shmem_free(al);
  shmem_free(h);
  shmem_free(NULL);
  osh_done("setup");
  /* After finalize the globals are private memory again, still readable and writable. */
  global_int += 1;
  CHECK(global_int == 101 + from, "global after finalize");
  return 0;
}
