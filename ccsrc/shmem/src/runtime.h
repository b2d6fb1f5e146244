// The process-wide runtime state behind the functions of hpshmem.h.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allocator.h"
#include "bootstrap.h"
#include "config.h"
#include "shm_transport.h"
#include "worker_pool.h"

namespace hpshmem {

enum class PeerState : uint8_t { kAlive = 0, kLost = 1 };

struct Runtime {
  Config config;
  int rank = -1, nranks = 0;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<OffsetAllocator> alloc;
  std::mutex alloc_mu;
  uint64_t alloc_seq = 0;        // collective allocator calls so far
  uint64_t barrier_epoch = 0;
  uint8_t* sym_base = nullptr;   // this rank's symmetric range: workspace, then heap
  size_t sym_bytes = 0;
  uint8_t* heap = nullptr;       // this rank's user heap (sym_base + kWorkspaceBytes)
  size_t heap_bytes = 0;
  std::vector<uint8_t*> peer_sym;  // symmetric range of each rank, mapped here
  std::unique_ptr<std::atomic<uint8_t>[]> peer_state;
  std::atomic<int> lost_count{0};
  std::atomic<bool> finalizing{false};
  std::unique_ptr<WorkerPool> pool;
  std::mutex pool_mu;
  CollectiveCounters coll;

  // Ranks lost so far, e.g. "2" or "1, 3"; empty when none.
  std::string LostRanks() const;
};

// The live runtime, or nullptr.
Runtime* CurrentRuntime();

}  // namespace hpshmem
