// The connection half of the UCX transport: one context and worker per rank,
// the whole segment registered once (ucp_mem_map), worker addresses and
// remote keys exchanged through the bootstrap, one endpoint per remote peer,
// and which peers' endpoints have failed.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap.h"
#include "hpshmem/status.h"
#include "transport.h"

namespace hpshmem {

// A failed UCX call, with UCX's reason: kSystem.
Status UcxError(const std::string& what, ucs_status_t st);

class UcxConnection {
 public:
  struct AmHandler {
    unsigned id;
    ucp_am_recv_callback_t cb;
  };

  UcxConnection() = default;
  ~UcxConnection() { Close(); }
  UcxConnection(const UcxConnection&) = delete;
  UcxConnection& operator=(const UcxConnection&) = delete;

  // Creates the context and a worker that the application's threads and the
  // progress thread share, installs `handlers` (each called with `arg`) and
  // registers [base, base + bytes). Errors: kSystem, kUnsupported (a UCX
  // without multi-threaded workers).
  Status Open(int nranks, uint8_t* base, size_t bytes, const std::vector<AmHandler>& handlers, void* arg);
  // Collective over every rank: each rank's segment address, worker address
  // and remote key, into *all (one blob per rank). Errors: kSystem,
  // kBootstrap, kTimeout.
  Status Exchange(Bootstrap* boot, std::vector<std::string>* all);
  // Creates an endpoint to each of `peers` from their blobs (Exchange).
  // `owed(pe, seq)` runs once pe's endpoint exists when an echo up to `seq`
  // was owed to pe before (OweUntilConnected). Errors: kSystem, kBootstrap.
  Status Connect(const std::vector<std::string>& all, const std::vector<int>& peers,
                 const std::function<void(int, uint64_t)>& owed);
  // During set-up a peer's marker can arrive before this rank has its
  // endpoint back to that peer: then remembers the echo `seq` owed to pe
  // (Connect hands it over) and returns true; false when the endpoint exists.
  bool OweUntilConnected(int pe, uint64_t seq);
  // Closes the endpoints (forced: nothing is owed to anyone by then),
  // releases remote keys, the registration, the worker and the context.
  // Idempotent. The progress thread must have stopped.
  void Close();

  ucp_worker_h worker() const { return worker_; }
  ucp_ep_h ep(int pe) const { return eps_[pe]; }
  ucp_rkey_h rkey(int pe) const { return rkeys_[pe]; }
  uint64_t remote_base(int pe) const { return rbase_[pe]; }  // pe's segment in pe's address space
  bool failed(int pe) const { return failed_[pe].load() != 0; }

  // Queues an eager active message on pe's endpoint (the one send path).
  ucs_status_ptr_t AmSend(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len);
  // Sends without waiting, from a message handler; nothing when pe's
  // endpoint does not exist or failed. Header and data must stay valid.
  void Post(int pe, unsigned id, const void* hdr, size_t hlen, const void* data = nullptr, size_t len = 0);
  // The status of a failed operation toward pe: PeerDead once its endpoint failed.
  Status Fail(int pe, const char* what, ucs_status_t st) const;

  // Marks pe lost (its endpoint failed, it fell silent, or a peer said so)
  // and reports it once, with `cause` (see Transport::LostFn), to the
  // monitor, or to the monitor to come.
  void Lost(int pe, const std::string& cause);
  // From here on losses go to `on_peers_lost`, beginning with those seen so
  // far, and Fail names a lost peer as `lost_peer` does (Transport::StartMonitor).
  void StartMonitor(Transport::LostFn on_peers_lost, Transport::LostPeerFn lost_peer);

 private:
  struct EpArg {
    UcxConnection* self;
    int pe;
  };
  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t st);

  int nranks_ = 0;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_mem_h memh_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<ucp_rkey_h> rkeys_;
  std::vector<uint64_t> rbase_;  // each peer's segment address in its own process
  std::vector<EpArg> ep_args_;
  std::unique_ptr<std::atomic<uint8_t>[]> failed_;
  std::mutex ep_mu_;                    // set-up: endpoint creation vs. echoes that arrive early
  std::vector<uint64_t> early_echo_;    // markers answered once the endpoint exists
  std::atomic<bool> eps_ready_{false};  // every endpoint exists
  mutable std::mutex lost_mu_;
  Transport::LostFn on_lost_;
  Transport::LostPeerFn lost_peer_;
  std::vector<std::pair<int, std::string>> lost_early_;  // failures seen before StartMonitor
};

}  // namespace hpshmem
