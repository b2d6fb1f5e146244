/* OpenSHMEM 1.5 over libhpshmem (HyperParallel Symmetric Memory).
 *
 * Build with `oshcc` / `oshc++` and start with `oshrun -np N prog`. Units
 * follow the specification: `nelems` counts elements of the routine's type
 * (bytes for the *mem routines; 4- or 8-byte words for the sized 32/64
 * routines). Errors the specification leaves undefined (a PE out of range, an
 * address outside the symmetric heap and data, a peer that died) print one
 * line naming the routine and the cause to stderr and end the job
 * (shmem_global_exit(1)); nothing waits longer than
 * $HYPER_PARALLEL_SHMEM_TIMEOUT_SEC.
 */
#ifndef HPSHMEM_SHMEM_H
#define HPSHMEM_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- constants */

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 256
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "HyperParallel Symmetric Memory (libhpshmem)"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

#define SHMEM_CTX_PRIVATE 1L
#define SHMEM_CTX_SERIALIZED 2L
#define SHMEM_CTX_NOSTORE 4L

#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

#define SHMEM_TEAM_NUM_CONTEXTS 1L

/* The deprecated active-set routines' work arrays. The implementation keeps
 * its own synchronization words, so pSync is only checked, never used; the
 * sizes are those programs expect to declare. */
#define SHMEM_SYNC_VALUE (-1L)
#define SHMEM_BCAST_SYNC_SIZE 8
#define SHMEM_BARRIER_SYNC_SIZE 8
#define SHMEM_REDUCE_SYNC_SIZE 8
#define SHMEM_COLLECT_SYNC_SIZE 8
#define SHMEM_ALLTOALL_SYNC_SIZE 8
#define SHMEM_ALLTOALLS_SYNC_SIZE 8
#define SHMEM_SYNC_SIZE 8
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE
#define _SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_ALLTOALLS_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

/* ---------------------------------------------------------------- handles */

typedef struct hpshmem_ctx_s* shmem_ctx_t;
typedef struct hpshmem_team_s* shmem_team_t;

typedef struct {
  int num_contexts;
} shmem_team_config_t;

extern struct hpshmem_ctx_s hpshmem_ctx_default;
extern struct hpshmem_team_s hpshmem_team_world;
extern shmem_team_t hpshmem_team_shared;
#define SHMEM_CTX_DEFAULT (&hpshmem_ctx_default)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
#define SHMEM_TEAM_WORLD (&hpshmem_team_world)
#define SHMEM_TEAM_SHARED (hpshmem_team_shared)
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)

/* ---------------------------------------------------------------- types
 * The specification's type tables: X(TYPE, TYPENAME). */

/* The type tables keep the specification's rows as they are. */
/* clang-format off */
#define HPSHMEM_RMA_TYPES(X)                                                                     \
  X(float, float) X(double, double) X(long double, longdouble) X(char, char) X(signed char, schar) \
  X(short, short) X(int, int) X(long, long) X(long long, longlong) X(unsigned char, uchar)         \
  X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)                          \
  X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32)             \
  X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64)  \
  X(size_t, size) X(ptrdiff_t, ptrdiff)

#define HPSHMEM_AMO_TYPES(X)                                                                    \
  X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) X(unsigned long, ulong) \
  X(unsigned long long, ulonglong) X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32)       \
  X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)

#define HPSHMEM_EXTENDED_AMO_TYPES(X) HPSHMEM_AMO_TYPES(X) X(float, float) X(double, double)

#define HPSHMEM_BITWISE_AMO_TYPES(X)                                                             \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
  X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)

#define HPSHMEM_SYNC_TYPES(X)                                                                      \
  X(short, short) X(int, int) X(long, long) X(long long, longlong) X(unsigned short, ushort)        \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
  X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)

#define HPSHMEM_BITWISE_REDUCE_TYPES(X)                                                            \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)  \
  X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32)            \
  X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) \
  X(size_t, size)

#define HPSHMEM_MINMAX_REDUCE_TYPES(X)                                                         \
  X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long)                \
  X(long long, longlong) X(ptrdiff_t, ptrdiff) X(unsigned char, uchar) X(unsigned short, ushort) \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) \
  X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16)    \
  X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(float, float) X(double, double)      \
  X(long double, longdouble)

/* C's complex types; C++ has them as a GNU extension (g++, clang++). */
#if !defined(__cplusplus) || defined(__GNUC__)
#define HPSHMEM_COMPLEX_TYPES(X) X(float _Complex, complexf) X(double _Complex, complexd)
#else
#define HPSHMEM_COMPLEX_TYPES(X)
#endif
#define HPSHMEM_ARITH_REDUCE_TYPES(X) HPSHMEM_MINMAX_REDUCE_TYPES(X) HPSHMEM_COMPLEX_TYPES(X)

/* The deprecated active-set reductions' types. */
#define HPSHMEM_TOALL_BITWISE_TYPES(X) X(short, short) X(int, int) X(long, long) X(long long, longlong)
#define HPSHMEM_TOALL_MINMAX_TYPES(X) \
  HPSHMEM_TOALL_BITWISE_TYPES(X) X(float, float) X(double, double) X(long double, longdouble)
#define HPSHMEM_TOALL_ARITH_TYPES(X) HPSHMEM_TOALL_MINMAX_TYPES(X) HPSHMEM_COMPLEX_TYPES(X)

#define HPSHMEM_SIZES(X) X(8) X(16) X(32) X(64) X(128)

/* clang-format on */

/* ---------------------------------------------------------------- library setup, exit, query */

void shmem_init(void);
int shmem_init_thread(int requested, int* provided);
void shmem_query_thread(int* provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void* addr, int pe);
void* shmem_ptr(const void* dest, int pe);
void* shmem_team_ptr(shmem_team_t team, const void* dest, int pe);
/* Profiling control: accepted and ignored (no profiling interface here). */
void shmem_pcontrol(const int level, ...);
void shmem_info_get_version(int* major, int* minor);
void shmem_info_get_name(char* name);

/* Deprecated. */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
int shmem_initialized(void);

/* ---------------------------------------------------------------- memory management */

void* shmem_malloc(size_t size);
void* shmem_calloc(size_t count, size_t size);
void* shmem_align(size_t alignment, size_t size);
void* shmem_realloc(void* ptr, size_t size);
void shmem_free(void* ptr);
void* shmem_malloc_with_hints(size_t size, long hints);
/* Deprecated. */
void* shmalloc(size_t size);
void* shmemalign(size_t alignment, size_t size);
void* shrealloc(void* ptr, size_t size);
void shfree(void* ptr);

/* ---------------------------------------------------------------- teams */

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t* config, long config_mask, shmem_team_t* new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange, const shmem_team_config_t* xaxis_config, long xaxis_mask,
                        shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config, long yaxis_mask,
                        shmem_team_t* yaxis_team);
int shmem_team_sync(shmem_team_t team);
int shmem_sync(shmem_team_t team);
/* The deprecated active-set form; in C, shmem_sync(PE_start, logPE_stride, PE_size, pSync) reaches it. */
void hpshmem_sync_active_set(int PE_start, int logPE_stride, int PE_size, long* pSync);
#if !defined(__cplusplus)
#define HPSHMEM_SYNC_PICK(a, b, c, d, which, ...) which
#define shmem_sync(...) HPSHMEM_SYNC_PICK(__VA_ARGS__, hpshmem_sync_active_set, _3, _2, shmem_sync, _0)(__VA_ARGS__)
#endif
void shmem_team_destroy(shmem_team_t team);

/* ---------------------------------------------------------------- contexts */

int shmem_ctx_create(long options, shmem_ctx_t* ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team);

/* ---------------------------------------------------------------- RMA */

#define HPSHMEM_DECL_RMA(T, N)                                                                                      \
  void shmem_##N##_put(T* dest, const T* source, size_t nelems, int pe);                                            \
  void shmem_ctx_##N##_put(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe);                       \
  void shmem_##N##_get(T* dest, const T* source, size_t nelems, int pe);                                            \
  void shmem_ctx_##N##_get(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe);                       \
  void shmem_##N##_put_nbi(T* dest, const T* source, size_t nelems, int pe);                                        \
  void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe);                   \
  void shmem_##N##_get_nbi(T* dest, const T* source, size_t nelems, int pe);                                        \
  void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe);                   \
  void shmem_##N##_p(T* dest, T value, int pe);                                                                     \
  void shmem_ctx_##N##_p(shmem_ctx_t ctx, T* dest, T value, int pe);                                                \
  T shmem_##N##_g(const T* source, int pe);                                                                         \
  T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T* source, int pe);                                                    \
  void shmem_##N##_iput(T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);             \
  void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, \
                            int pe);                                                                                \
  void shmem_##N##_iget(T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);             \
  void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, \
                            int pe);                                                                                \
  void shmem_##N##_put_signal(T* dest, const T* source, size_t nelems, uint64_t* sig_addr, uint64_t signal,         \
                              int sig_op, int pe);                                                                  \
  void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, uint64_t* sig_addr,     \
                                  uint64_t signal, int sig_op, int pe);                                             \
  void shmem_##N##_put_signal_nbi(T* dest, const T* source, size_t nelems, uint64_t* sig_addr, uint64_t signal,     \
                                  int sig_op, int pe);                                                              \
  void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, uint64_t* sig_addr, \
                                      uint64_t signal, int sig_op, int pe);
HPSHMEM_RMA_TYPES(HPSHMEM_DECL_RMA)

#define HPSHMEM_DECL_SIZED(S)                                                                                          \
  void shmem_put##S(void* dest, const void* source, size_t nelems, int pe);                                            \
  void shmem_ctx_put##S(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);                       \
  void shmem_get##S(void* dest, const void* source, size_t nelems, int pe);                                            \
  void shmem_ctx_get##S(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);                       \
  void shmem_put##S##_nbi(void* dest, const void* source, size_t nelems, int pe);                                      \
  void shmem_ctx_put##S##_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);                 \
  void shmem_get##S##_nbi(void* dest, const void* source, size_t nelems, int pe);                                      \
  void shmem_ctx_get##S##_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);                 \
  void shmem_iput##S(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);             \
  void shmem_ctx_iput##S(shmem_ctx_t ctx, void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, \
                         int pe);                                                                                      \
  void shmem_iget##S(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);             \
  void shmem_ctx_iget##S(shmem_ctx_t ctx, void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, \
                         int pe);                                                                                      \
  void shmem_put##S##_signal(void* dest, const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal,       \
                             int sig_op, int pe);                                                                      \
  void shmem_ctx_put##S##_signal(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, uint64_t* sig_addr,   \
                                 uint64_t signal, int sig_op, int pe);                                                 \
  void shmem_put##S##_signal_nbi(void* dest, const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal,   \
                                 int sig_op, int pe);                                                                  \
  void shmem_ctx_put##S##_signal_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,                   \
                                     uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
HPSHMEM_SIZES(HPSHMEM_DECL_SIZED)

void shmem_putmem(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_putmem(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_getmem(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_getmem(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_putmem_nbi(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_getmem_nbi(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_putmem_signal(void* dest, const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, int sig_op,
                         int pe);
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                             uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void* dest, const void* source, size_t nelems, uint64_t* sig_addr, uint64_t signal,
                             int sig_op, int pe);
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                                 uint64_t signal, int sig_op, int pe);

/* ---------------------------------------------------------------- signals */

uint64_t shmem_signal_fetch(const uint64_t* sig_addr);
uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value);

/* ---------------------------------------------------------------- atomics */

#define HPSHMEM_DECL_AMO_EXT(T, N)                                                           \
  T shmem_##N##_atomic_fetch(const T* source, int pe);                                       \
  T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T* source, int pe);                  \
  void shmem_##N##_atomic_set(T* dest, T value, int pe);                                     \
  void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T* dest, T value, int pe);                \
  T shmem_##N##_atomic_swap(T* dest, T value, int pe);                                       \
  T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T* dest, T value, int pe);                  \
  void shmem_##N##_atomic_fetch_nbi(T* fetch, const T* source, int pe);                      \
  void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T* fetch, const T* source, int pe); \
  void shmem_##N##_atomic_swap_nbi(T* fetch, T* dest, T value, int pe);                      \
  void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value, int pe);
HPSHMEM_EXTENDED_AMO_TYPES(HPSHMEM_DECL_AMO_EXT)

#define HPSHMEM_DECL_AMO_STD(T, N)                                                                           \
  T shmem_##N##_atomic_compare_swap(T* dest, T cond, T value, int pe);                                       \
  T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T* dest, T cond, T value, int pe);                  \
  T shmem_##N##_atomic_fetch_inc(T* dest, int pe);                                                           \
  T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T* dest, int pe);                                      \
  void shmem_##N##_atomic_inc(T* dest, int pe);                                                              \
  void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T* dest, int pe);                                         \
  T shmem_##N##_atomic_fetch_add(T* dest, T value, int pe);                                                  \
  T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T* dest, T value, int pe);                             \
  void shmem_##N##_atomic_add(T* dest, T value, int pe);                                                     \
  void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T* dest, T value, int pe);                                \
  void shmem_##N##_atomic_compare_swap_nbi(T* fetch, T* dest, T cond, T value, int pe);                      \
  void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T cond, T value, int pe); \
  void shmem_##N##_atomic_fetch_inc_nbi(T* fetch, T* dest, int pe);                                          \
  void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T* fetch, T* dest, int pe);                     \
  void shmem_##N##_atomic_fetch_add_nbi(T* fetch, T* dest, T value, int pe);                                 \
  void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value, int pe);
HPSHMEM_AMO_TYPES(HPSHMEM_DECL_AMO_STD)

#define HPSHMEM_DECL_AMO_BIT1(T, N, OP)                                           \
  T shmem_##N##_atomic_fetch_##OP(T* dest, T value, int pe);                      \
  T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t ctx, T* dest, T value, int pe); \
  void shmem_##N##_atomic_##OP(T* dest, T value, int pe);                         \
  void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t ctx, T* dest, T value, int pe);    \
  void shmem_##N##_atomic_fetch_##OP##_nbi(T* fetch, T* dest, T value, int pe);   \
  void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value, int pe);
#define HPSHMEM_DECL_AMO_BIT(T, N) \
  HPSHMEM_DECL_AMO_BIT1(T, N, and) HPSHMEM_DECL_AMO_BIT1(T, N, or) HPSHMEM_DECL_AMO_BIT1(T, N, xor)
HPSHMEM_BITWISE_AMO_TYPES(HPSHMEM_DECL_AMO_BIT)

/* Deprecated atomic names (OpenSHMEM 1.3). */
#define HPSHMEM_DECL_AMO_OLD(T, N)                       \
  T shmem_##N##_fetch(const T* source, int pe);          \
  void shmem_##N##_set(T* dest, T value, int pe);        \
  T shmem_##N##_swap(T* dest, T value, int pe);          \
  T shmem_##N##_cswap(T* dest, T cond, T value, int pe); \
  T shmem_##N##_finc(T* dest, int pe);                   \
  void shmem_##N##_inc(T* dest, int pe);                 \
  T shmem_##N##_fadd(T* dest, T value, int pe);          \
  void shmem_##N##_add(T* dest, T value, int pe);
HPSHMEM_DECL_AMO_OLD(int, int)
HPSHMEM_DECL_AMO_OLD(long, long)
HPSHMEM_DECL_AMO_OLD(long long, longlong)
float shmem_float_fetch(const float* source, int pe);
void shmem_float_set(float* dest, float value, int pe);
float shmem_float_swap(float* dest, float value, int pe);
double shmem_double_fetch(const double* source, int pe);
void shmem_double_set(double* dest, double value, int pe);
double shmem_double_swap(double* dest, double value, int pe);
long shmem_swap(long* dest, long value, int pe);

/* ---------------------------------------------------------------- point-to-point synchronization */

#define HPSHMEM_DECL_SYNC(T, N)                                                                                    \
  void shmem_##N##_wait_until(T* ivar, int cmp, T cmp_value);                                                      \
  void shmem_##N##_wait_until_all(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value);               \
  size_t shmem_##N##_wait_until_any(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value);             \
  size_t shmem_##N##_wait_until_some(T* ivars, size_t nelems, size_t* indices, const int* status, int cmp,         \
                                     T cmp_value);                                                                 \
  void shmem_##N##_wait_until_all_vector(T* ivars, size_t nelems, const int* status, int cmp, T* cmp_values);      \
  size_t shmem_##N##_wait_until_any_vector(T* ivars, size_t nelems, const int* status, int cmp, T* cmp_values);    \
  size_t shmem_##N##_wait_until_some_vector(T* ivars, size_t nelems, size_t* indices, const int* status, int cmp,  \
                                            T* cmp_values);                                                        \
  int shmem_##N##_test(T* ivar, int cmp, T cmp_value);                                                             \
  int shmem_##N##_test_all(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value);                      \
  size_t shmem_##N##_test_any(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value);                   \
  size_t shmem_##N##_test_some(T* ivars, size_t nelems, size_t* indices, const int* status, int cmp, T cmp_value); \
  int shmem_##N##_test_all_vector(T* ivars, size_t nelems, const int* status, int cmp, T* cmp_values);             \
  size_t shmem_##N##_test_any_vector(T* ivars, size_t nelems, const int* status, int cmp, T* cmp_values);          \
  size_t shmem_##N##_test_some_vector(T* ivars, size_t nelems, size_t* indices, const int* status, int cmp,        \
                                      T* cmp_values);                                                              \
  void shmem_##N##_wait(T* ivar, T cmp_value);
HPSHMEM_SYNC_TYPES(HPSHMEM_DECL_SYNC)
/* Deprecated. */
void shmem_wait(long* ivar, long cmp_value);
void shmem_wait_until(long* ivar, int cmp, long cmp_value);

/* ---------------------------------------------------------------- memory ordering */

void shmem_fence(void);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_quiet(void);
void shmem_ctx_quiet(shmem_ctx_t ctx);

/* ---------------------------------------------------------------- collectives
 * Team forms return 0 on success and non-zero for SHMEM_TEAM_INVALID. */

void shmem_barrier_all(void);
void shmem_sync_all(void);
int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems, int PE_root);
int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems);

#define HPSHMEM_DECL_COLL(T, N)                                                                       \
  int shmem_##N##_broadcast(shmem_team_t team, T* dest, const T* source, size_t nelems, int PE_root); \
  int shmem_##N##_collect(shmem_team_t team, T* dest, const T* source, size_t nelems);                \
  int shmem_##N##_fcollect(shmem_team_t team, T* dest, const T* source, size_t nelems);               \
  int shmem_##N##_alltoall(shmem_team_t team, T* dest, const T* source, size_t nelems);               \
  int shmem_##N##_alltoalls(shmem_team_t team, T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems);
HPSHMEM_RMA_TYPES(HPSHMEM_DECL_COLL)

#define HPSHMEM_DECL_REDUCE(T, N, OP) \
  int shmem_##N##_##OP##_reduce(shmem_team_t team, T* dest, const T* source, size_t nreduce);
#define HPSHMEM_DECL_REDUCE_BIT(T, N) \
  HPSHMEM_DECL_REDUCE(T, N, and) HPSHMEM_DECL_REDUCE(T, N, or) HPSHMEM_DECL_REDUCE(T, N, xor)
#define HPSHMEM_DECL_REDUCE_MINMAX(T, N) HPSHMEM_DECL_REDUCE(T, N, max) HPSHMEM_DECL_REDUCE(T, N, min)
#define HPSHMEM_DECL_REDUCE_ARITH(T, N) HPSHMEM_DECL_REDUCE(T, N, sum) HPSHMEM_DECL_REDUCE(T, N, prod)
HPSHMEM_BITWISE_REDUCE_TYPES(HPSHMEM_DECL_REDUCE_BIT)
HPSHMEM_MINMAX_REDUCE_TYPES(HPSHMEM_DECL_REDUCE_MINMAX)
HPSHMEM_ARITH_REDUCE_TYPES(HPSHMEM_DECL_REDUCE_ARITH)

/* Deprecated active-set forms: the set is PE_start, PE_start + 2^logPE_stride, ... (PE_size PEs). */
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync);
#define HPSHMEM_DECL_ASET(S)                                                                                          \
  void shmem_broadcast##S(void* dest, const void* source, size_t nelems, int PE_root, int PE_start, int logPE_stride, \
                          int PE_size, long* pSync);                                                                  \
  void shmem_collect##S(void* dest, const void* source, size_t nelems, int PE_start, int logPE_stride, int PE_size,   \
                        long* pSync);                                                                                 \
  void shmem_fcollect##S(void* dest, const void* source, size_t nelems, int PE_start, int logPE_stride, int PE_size,  \
                         long* pSync);                                                                                \
  void shmem_alltoall##S(void* dest, const void* source, size_t nelems, int PE_start, int logPE_stride, int PE_size,  \
                         long* pSync);                                                                                \
  void shmem_alltoalls##S(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start,  \
                          int logPE_stride, int PE_size, long* pSync);
HPSHMEM_DECL_ASET(32)
HPSHMEM_DECL_ASET(64)

#define HPSHMEM_DECL_TOALL(T, N, OP)                                                                                 \
  void shmem_##N##_##OP##_to_all(T* dest, const T* source, int nreduce, int PE_start, int logPE_stride, int PE_size, \
                                 T* pWrk, long* pSync);
#define HPSHMEM_DECL_TOALL_BIT(T, N) \
  HPSHMEM_DECL_TOALL(T, N, and) HPSHMEM_DECL_TOALL(T, N, or) HPSHMEM_DECL_TOALL(T, N, xor)
#define HPSHMEM_DECL_TOALL_MINMAX(T, N) HPSHMEM_DECL_TOALL(T, N, max) HPSHMEM_DECL_TOALL(T, N, min)
#define HPSHMEM_DECL_TOALL_ARITH(T, N) HPSHMEM_DECL_TOALL(T, N, sum) HPSHMEM_DECL_TOALL(T, N, prod)
HPSHMEM_TOALL_BITWISE_TYPES(HPSHMEM_DECL_TOALL_BIT)
HPSHMEM_TOALL_MINMAX_TYPES(HPSHMEM_DECL_TOALL_MINMAX)
HPSHMEM_TOALL_ARITH_TYPES(HPSHMEM_DECL_TOALL_ARITH)

/* ---------------------------------------------------------------- distributed locks */

void shmem_set_lock(long* lock);
void shmem_clear_lock(long* lock);
int shmem_test_lock(long* lock);

#ifdef __cplusplus
}
#endif

/* ---------------------------------------------------------------- C11 generic selections */

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#include "shmem_generic.h"
#endif

#endif /* HPSHMEM_SHMEM_H */
