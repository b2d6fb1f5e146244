#include "ops/ops.h"

namespace hpshmem::ops {

Status SignalWaitUntil(const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed, const char* label,
                       int team) {
  return hpshmem::SignalWaitUntil(sig, type, cmp, value, observed, label, team);
}

}  // namespace hpshmem::ops
