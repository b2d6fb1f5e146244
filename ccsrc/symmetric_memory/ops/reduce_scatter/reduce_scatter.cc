// Reduce-scatter: member r reduces block r of every member's input, in
// team-rank order (ops.h), reading peers' blocks in place where it can;
// across hosts, up to an eager slot, each member sends block r to member r
// (ReduceEager), and up to kReduceScatterStepsMaxBytes of input it does so a
// slot of each block at a time.
#include <algorithm>
#include <string>

#include "ops/collective/call.h"

namespace hpshmem::ops {

using namespace collective;

Status ReduceScatter(void* out, const void* in, size_t count, DType dtype, ReduceOp op, int team) {
  const char* what = "shmem_reduce_scatter";
  size_t item = DTypeSize(dtype);
  if (!item) return Status::TypeError(std::string(what) + ": dtype code " + std::to_string(static_cast<int>(dtype)));
  HPSHMEM_RETURN_IF_ERROR(CheckReducible(dtype, op, what));
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(call, 0));
  const int64_t packed = Pack(static_cast<int>(dtype), static_cast<int>(op), Place(call, in) << 24 | 1);
  const char* src = static_cast<const char*>(in);
  if (call.members > 1 && count * item <= call.eager_bytes && SpansHosts(call))  // block p to member p
    return ReduceEager(call, src, count * item, count, dtype, op, static_cast<int64_t>(count), packed, out, what);
  if (call.members > 1 && count * item * call.members <= kReduceScatterStepsMaxBytes && SpansHosts(call)) {
    // A slot's worth of every block per step: one message per peer pair and
    // step each way, where the announced path pays an announcement, a get
    // from every peer and a release. Every header carries the whole call's
    // count, so the first step compares the calls.
    const size_t chunk = call.eager_bytes / item;  // elements
    for (size_t first = 0; first < count; first += chunk)
      HPSHMEM_RETURN_IF_ERROR(ReduceEager(call, src + first * item, count * item, std::min(chunk, count - first), dtype,
                                          op, static_cast<int64_t>(count), packed,
                                          static_cast<char*>(out) + first * item, what));
    return Status::OK();
  }
  int64_t epoch;
  HPSHMEM_RETURN_IF_ERROR(BeginAgreed(call, &epoch, static_cast<int64_t>(count), packed, what));
  HPSHMEM_RETURN_IF_ERROR(ReduceRange(call, src, count * call.me, count * (call.me + 1), item, dtype, op, out));
  // The caller may reuse `in` once we return: wait for every reader.
  return AllConsumed(call);
}

}  // namespace hpshmem::ops
