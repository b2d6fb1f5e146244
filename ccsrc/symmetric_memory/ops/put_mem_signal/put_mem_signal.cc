#include "ops/ops.h"

namespace hpshmem::ops {

Status PutMemSignal(void* target, const void* src, size_t bytes, void* sig, SignalType type, int64_t value,
                    SignalOp op, int pe, int block_dim) {
  // Check the signal first: a bad signal must not leave a half-done put.
  HPSHMEM_RETURN_IF_ERROR(ValidateSignal(sig, type, value, op, pe));
  HPSHMEM_RETURN_IF_ERROR(PutMem(target, src, bytes, pe, block_dim));
  // All pieces have joined; Signal() fences before it publishes.
  return Signal(sig, type, value, op, pe);
}

}  // namespace hpshmem::ops
