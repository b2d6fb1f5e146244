#include "ops/common/split_copy.h"
#include "ops/ops.h"

namespace hpshmem::ops {

Status GetMem(void* dst, const void* src, size_t bytes, int pe, int block_dim) {
  int pieces = PieceCount(bytes, block_dim);
  if (pieces == 1 || !IsSymmetric(src, bytes) || !Ptr(src, pe)) return hpshmem::GetMem(dst, src, bytes, pe);
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  return SplitCopy(bytes, pieces, [&](size_t off, size_t len) { return hpshmem::GetMem(d + off, s + off, len, pe); });
}

}  // namespace hpshmem::ops
