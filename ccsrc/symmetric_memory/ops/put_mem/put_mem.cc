#include "ops/common/split_copy.h"
#include "ops/ops.h"

namespace hpshmem::ops {

Status PutMem(void* target, const void* src, size_t bytes, int pe, int block_dim) {
  int pieces = PieceCount(bytes, block_dim);
  // The runtime's single-threaded put validates everything before it writes;
  // a parallel put first checks the whole range so no piece writes when
  // another would fail.
  if (pieces == 1 || !IsSymmetric(target, bytes) || !Ptr(target, pe)) return hpshmem::PutMem(target, src, bytes, pe);
  auto* t = static_cast<char*>(target);
  auto* s = static_cast<const char*>(src);
  return SplitCopy(bytes, pieces, [&](size_t off, size_t len) { return hpshmem::PutMem(t + off, s + off, len, pe); });
}

}  // namespace hpshmem::ops
