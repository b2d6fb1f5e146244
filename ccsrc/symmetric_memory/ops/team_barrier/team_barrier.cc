#include "ops/collective/call.h"

namespace hpshmem::ops {

// A barrier among the team's members only: each announces the call and
// waits until every other member has announced it.
Status TeamBarrier(int team) {
  collective::CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(collective::Open(&call, team));
  // As Barrier: what this rank did before is complete at its targets first.
  HPSHMEM_RETURN_IF_ERROR(Quiet());
  int64_t epoch;
  HPSHMEM_RETURN_IF_ERROR(collective::Begin(call, &epoch));
  for (int k = 1; k < call.members; ++k)
    HPSHMEM_RETURN_IF_ERROR(collective::WaitReady(call, (call.me + k) % call.members, epoch));
  return Status::OK();
}

}  // namespace hpshmem::ops
