/* Errors the specification leaves undefined end the job with a message naming the
 * routine (exit 1), and shmem_global_exit(status) ends every PE with that status.
 * The argument picks the case; the test driver checks the status and the output. */
#include "check.h"

int x;

int main(int argc, char** argv) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  const char* what = argc > 1 ? argv[1] : "";
  int stack_var = 0;
  if (!strcmp(what, "bad_pe")) {
    if (me == n - 1) shmem_int_p(&x, 1, n + 3); /* PE out of range */
    shmem_barrier_all();
  } else if (!strcmp(what, "not_symmetric")) {
    if (me == 0) shmem_int_put(&stack_var, &stack_var, 1, 0);
    shmem_barrier_all();
  } else if (!strcmp(what, "global_exit")) {
    if (me == n - 1) shmem_global_exit(7);
    for (;;) shmem_barrier_all(); /* the others wait; the launcher ends them */
  } else if (!strcmp(what, "global_exit_zero")) {
    if (me == 0) shmem_global_exit(0); /* the job ends with 0 although the others never finish */
    for (;;) shmem_barrier_all();
  } else if (!strcmp(what, "bad_cmp")) {
    shmem_int_wait_until(&x, 42, 0);
  } else if (!strcmp(what, "bad_free")) {
    shmem_free(&stack_var);
  } else if (!strcmp(what, "exit_without_finalize")) {
    shmem_barrier_all();
    return 0; /* the implicit finalize at exit leaves the job in order */
  }
  shmem_finalize();
  return 0;
}
