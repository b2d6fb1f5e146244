// The list of transports: the one place that names them.
#include "shm_transport.h"
#include "transport.h"
#include "ucx_transport.h"

namespace hpshmem {

Status MakeTransports(const TransportEnv& env, std::vector<std::unique_ptr<Transport>>* out) {
  out->clear();
  // Shared memory first: a peer it reaches is reached by load and store.
  out->push_back(std::make_unique<ShmTransport>(env.boot, env.seg, env.force_ucx));
  // UCX reaches every other peer.
  out->push_back(NewUcxTransport(env.boot, env.seg, env.ucx_rma));
  return Status::OK();
}

}  // namespace hpshmem
