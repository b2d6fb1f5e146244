// Runs a test body in N real forked processes that form one hpshmem job.
// The parent distributes rank 0's unique id through pipes (as a framework's
// store would), waits with a deadline, and kills stragglers.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hpshmem/hpshmem.h"

namespace hptest {

struct JobOptions {
  size_t heap_bytes = 64 << 20;
  double timeout_sec = 20;      // runtime waits
  double job_timeout_sec = 90;  // the parent kills the job after this
  bool init = true;             // Init/Finalize around the body
  bool finalize = true;
  int spawn = -1;                                        // ranks actually started (default: all)
  std::vector<std::pair<std::string, std::string>> env;  // set in every child
  std::function<void(int, int)> before_init;             // (rank, nranks), in the child, before Init
  // Runs in the parent once rank 0 published its unique id, before the
  // other ranks start.
  std::function<void(const hpshmem::UniqueId&)> on_unique_id;
  // When set, receives Init's status (in the child); a failed Init then ends
  // the rank with exit 0 after the callback, so tests can check the error.
  std::function<void(int, const hpshmem::Status&)> on_init_status;
};

struct JobResult {
  std::vector<int> exit_code;  // -1 when killed by a signal
  std::vector<int> term_signal;
  bool timed_out = false;
  double seconds = 0;
  bool AllOk() const;
  std::string Describe() const;
};

// How the ranks of every job are spread, from $HPSHMEM_TEST_LAYOUT:
//   shm    one host, shared memory between all ranks (default)
//   hosts  two simulated hosts (HYPER_PARALLEL_SHMEM_HOST_ID host0 = the first
//          half of the ranks, host1 = the rest), UCX over TCP on loopback between them
//   ucx    one host, HYPER_PARALLEL_SHMEM_TRANSPORT=ucx: UCX between every pair
std::string Layout();
// The variables a rank gets under the layout (before JobOptions::env).
std::vector<std::pair<std::string, std::string>> LayoutEnv(int rank, int nranks);

// True in the AddressSanitizer and ThreadSanitizer builds. Their instrumented byte loops make the
// largest data sweeps (tens of MiB per rank, in every layout) take minutes; those tests keep every
// path and boundary there but take a smaller top size, which the plain build covers.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// body(rank, nranks) runs after Init. Use RCHECK inside it.
JobResult RunJob(int nranks, const std::function<void(int, int)>& body, JobOptions opts = {});

// CPU seconds (user + system) used so far by this whole process, every thread.
double ProcessCpuSeconds();

// Kills the calling rank's process with an error line if `cond` is false.
[[noreturn]] void FailRank(const char* file, int line, const std::string& msg);

// The names in /dev/shm and the abstract sockets of this library in
// /proc/net/unix: what must not survive a job.
std::vector<std::string> LeftoverNames();

}  // namespace hptest

#define RCHECK(cond, msg)                                                                                  \
  do {                                                                                                     \
    if (!(cond)) ::hptest::FailRank(__FILE__, __LINE__, std::string("check failed: " #cond ": ") + (msg)); \
  } while (0)
#define RCHECK_OK(expr)                                                                 \
  do {                                                                                  \
    ::hpshmem::Status _s = (expr);                                                      \
    if (!_s.ok()) ::hptest::FailRank(__FILE__, __LINE__, #expr " -> " + _s.ToString()); \
  } while (0)
