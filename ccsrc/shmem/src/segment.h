// This rank's segment (header + symmetric range) and what the ranks tell each
// other about themselves at Init, before any transport is connected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hpshmem/status.h"
#include "net.h"
#include "pe_header.h"

namespace hpshmem {

// A memfd of kHeaderBytes + heap_bytes, mapped at a kSegmentAlign-aligned
// address. It has no name in /dev/shm or anywhere else, so nothing can leak
// even after kill -9; the kernel frees it when the last mapping goes. The size
// is sealed so that no peer can shrink it under another's mapping (SIGBUS).
class LocalSegment {
 public:
  // Errors: kSystem.
  static Status Create(size_t heap_bytes, int rank, int nranks, uint64_t job_id, std::unique_ptr<LocalSegment>* out);
  ~LocalSegment();
  LocalSegment(const LocalSegment&) = delete;
  LocalSegment& operator=(const LocalSegment&) = delete;

  uint8_t* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  PeHeader* header() const { return reinterpret_cast<PeHeader*>(base_); }
  int fd() const { return fd_.get(); }
  // The descriptor is only needed until shared-memory peers have theirs.
  void CloseFd() { fd_.Reset(); }

 private:
  LocalSegment() = default;
  Fd fd_;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

// Maps `fd` (`bytes` long) read-write at an address a such that a + skew is
// `align`-aligned (a power of two), or returns MAP_FAILED.
void* MapAligned(int fd, size_t bytes, size_t align = kSegmentAlign, size_t skew = 0);
// Releases a segment mapping by putting private zero pages in its place
// instead of unmapping it: framework tensors that outlive Finalize (views
// kept by the user) then read zeros and write into memory that belongs to
// nothing, rather than faulting or reaching whatever is mapped there later.
// Costs address space only (no reservation; pages appear only if touched).
void RetireMapping(void* addr, size_t bytes);

// What a rank publishes about itself at Init (fixed size, exchanged through
// the bootstrap).
#pragma pack(push, 1)
struct PeerCard {
  char host_key[64];   // equal <=> same host: shared memory may connect the two
  char sock_name[64];  // abstract Unix socket of the shared-memory transport
  uint64_t heap_bytes;
  int32_t pid;
  uint32_t uid;
  uint8_t force_ucx;  // HYPER_PARALLEL_SHMEM_TRANSPORT=ucx on this rank: no shared memory with it
  // Which CPUs this rank may run on, and on which machine (boot id: the same
  // for simulated hosts of one machine, which share its CPUs too), so that
  // each rank can count who competes for its cores (WaitPolicy).
  char machine[40];
  uint64_t cpu_mask[16];  // CPUs 0..1023
  uint8_t asym_wake;      // registered for membarrier's global expedited barrier (wait.h, AsymWake)
  char hostname[64];      // for errors that name a peer's host
};
#pragma pack(pop)

// The identity of this host: "id:<HYPER_PARALLEL_SHMEM_HOST_ID>" when set,
// else boot id + network namespace (processes that can share memory and
// reach each other's abstract sockets). Errors: kInvalidArgument (too long).
Status HostKey(const std::string& host_id, std::string* out);

}  // namespace hpshmem
