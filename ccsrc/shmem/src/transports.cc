// The list of transports: the one place that names them.
#include "shm_transport.h"
#include "transport.h"
#include "ucx_transport.h"

namespace hpshmem {

Status MakeTransports(Bootstrap* boot, LocalSegment* seg, const Config& config,
                      std::vector<std::unique_ptr<Transport>>* out) {
  out->clear();
  // Shared memory first: a peer it reaches is reached by load and store.
  out->push_back(std::make_unique<ShmTransport>(boot, seg, config.force_ucx));
  // UCX reaches every other peer.
  out->push_back(NewUcxTransport(boot, seg, config.ucx_rma, config.peer_timeout_sec));
  return Status::OK();
}

}  // namespace hpshmem
