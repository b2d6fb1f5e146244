#include "ops/common/split_copy.h"
#include "ops/ops.h"

namespace hpshmem::ops {

Status PutMemSignal(void* target, const void* src, size_t bytes, void* sig, SignalType type, int64_t value, SignalOp op,
                    int pe, int block_dim) {
  // Unsplit (and every peer that is not load/store reachable): the runtime's
  // one call, which a network transport sends as one message.
  if (PieceCount(bytes, block_dim) == 1 || !Ptr(target, pe))
    return hpshmem::PutMemSignal(target, src, bytes, sig, type, value, op, pe);
  // Check the signal first: a bad signal must not leave a half-done put.
  HPSHMEM_RETURN_IF_ERROR(ValidateSignal(sig, type, value, op, pe));
  HPSHMEM_RETURN_IF_ERROR(PutMem(target, src, bytes, pe, block_dim));
  // All pieces have joined; Signal() fences before it publishes.
  return Signal(sig, type, value, op, pe);
}

}  // namespace hpshmem::ops
