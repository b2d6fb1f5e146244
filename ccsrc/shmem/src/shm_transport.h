// Shared memory between the ranks of one host.
//
// Each rank's segment (header + heap) is a memfd: it has no name in /dev/shm
// or anywhere else, so nothing can leak even after kill -9; the kernel frees
// it when the last mapping goes. Segments are handed to peers as file
// descriptors over abstract Unix sockets (SCM_RIGHTS), after the peer proves
// it belongs to the job (same uid via SO_PEERCRED, MAC of the job secret).
// Those sockets then stay open: a peer's death closes them, which is how
// waits learn of it within milliseconds.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "bootstrap.h"
#include "net.h"
#include "transport.h"

namespace hpshmem {

class ShmTransport final : public Transport {
 public:
  // Collective. Creates this rank's segment of kHeaderBytes + heap_bytes,
  // exchanges segments with every other rank, maps them all. Errors:
  // kUnsupported (a rank on another host), kCollectiveMismatch (heap sizes
  // differ), kSystem, kTimeout, kPeerDead.
  static Status Create(Bootstrap* boot, size_t heap_bytes, double timeout_sec,
                       std::unique_ptr<ShmTransport>* out);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  uint8_t* Segment(int pe) const override { return segments_[pe]; }
  void StartMonitor(std::function<void(int)> on_peer_lost) override;
  void Shutdown() override;

 private:
  ShmTransport() = default;
  Status Exchange(Bootstrap* boot, double timeout_sec);
  void MonitorLoop();

  int rank_ = -1, nranks_ = 0;
  size_t segment_bytes_ = 0;
  std::vector<uint8_t*> segments_;
  std::vector<Fd> links_;      // one connection per peer (this rank dialled the lower ranks)
  Fd wake_;                    // eventfd that stops the monitor
  std::thread monitor_;
  std::function<void(int)> on_lost_;
  std::atomic<bool> stopping_{false};
  bool shut_ = false;
};

}  // namespace hpshmem
