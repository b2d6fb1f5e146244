// Reduce-scatter: member r reduces block r of every member's input, in
// team-rank order (ops.h), reading peers' blocks in place where it can;
// across hosts, up to an eager slot, each member sends block r to member r
// (ReduceEager).
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
  if (call.members > 1 && count * item <= call.eager_bytes && SpansHosts(call))
    return ReduceEager(call, src, count * item, count, dtype, op, packed, out, what);  // block p to member p
  int64_t epoch;
  HPSHMEM_RETURN_IF_ERROR(BeginAgreed(call, &epoch, static_cast<int64_t>(count), packed, what));
  HPSHMEM_RETURN_IF_ERROR(ReduceRange(call, src, count * call.me, count * (call.me + 1), item, dtype, op, out));
  // The caller may reuse `in` once we return: wait for every reader.
  return AllConsumed(call);
}

}  // namespace hpshmem::ops
