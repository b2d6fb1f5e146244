#include "ops/ops.h"

namespace hpshmem::ops {

Status SignalOpRemote(void* sig, SignalType type, int64_t value, SignalOp op, int pe) {
  return Signal(sig, type, value, op, pe);
}

}  // namespace hpshmem::ops
