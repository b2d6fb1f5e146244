// Shared memory between the ranks of one host: load/store on mapped segments.
//
// Segments are handed to peers as memfd descriptors over abstract Unix
// sockets (SCM_RIGHTS), after the peer proves it belongs to the job (same uid
// via SO_PEERCRED, MAC of the job secret). Those sockets then stay open: a
// peer's death closes them, which is how waits learn of it within
// milliseconds. This rank's own segment is always served here, so every
// rank has at least itself as a shared-memory peer.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "bootstrap.h"
#include "net.h"
#include "segment.h"
#include "transport.h"

namespace hpshmem {

class ShmTransport final : public Transport {
 public:
  // no_sharing: this rank shares memory with no other rank
  // (HYPER_PARALLEL_SHMEM_TRANSPORT=ucx).
  ShmTransport(Bootstrap* boot, LocalSegment* seg, bool no_sharing);
  ~ShmTransport() override;

  // Opens this rank's (unguessably named) heap socket and writes its name
  // into card->sock_name. Errors: kSystem.
  Status Prepare(PeerCard* card) override;
  // Ranks of one host (equal host keys), unless either refuses sharing; a
  // rank always reaches itself here.
  bool CanReach(const std::vector<PeerCard>& cards, int a, int b) const override;
  // Collective among the ranks with reach[r] (this rank included):
  // exchanges segments with each of them and maps them. Errors: kBootstrap,
  // kTimeout, kPeerDead, kSystem.
  Status Connect(const std::vector<PeerCard>& cards, const std::vector<bool>& reach, double timeout_sec) override;

  const char* name() const override { return "shm"; }
  uint8_t* Segment(int pe) const override { return segments_[pe]; }
  bool MapsPeers() const override { return true; }
  Status Put(int pe, size_t off, const void* src, size_t bytes) override;
  Status Get(int pe, void* dst, size_t off, size_t bytes) override;
  Status Signal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) override;
  Status PutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type, SignalOp op,
                   int64_t value) override;
  Status Amo(int pe, size_t off, SignalType type, AmoOp op, int64_t value, int64_t compare, int64_t* old) override;
  Status Quiet() override;
  // Every signal fences first (Amo), so a barrier has nothing to complete.
  Status BarrierQuiet() override { return Status::OK(); }
  void StartMonitor(LostFn on_peers_lost, LostPeerFn) override;
  void Shutdown() override;

 private:
  void MonitorLoop();

  Bootstrap* boot_ = nullptr;
  LocalSegment* seg_ = nullptr;
  int rank_ = -1, nranks_ = 0;
  bool no_sharing_ = false;
  std::vector<uint8_t*> segments_;  // mapped segment of each same-host rank, else nullptr
  Fd listener_;
  std::vector<Fd> links_;  // one connection per same-host peer (this rank dialled the lower ranks)
  Fd wake_;                // eventfd that stops the monitor
  std::thread monitor_;
  LostFn on_lost_;
  std::atomic<bool> stopping_{false};
  bool shut_ = false;
};

}  // namespace hpshmem
