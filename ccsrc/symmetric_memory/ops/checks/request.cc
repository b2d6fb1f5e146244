#include "ops/checks/request.h"

#include <string>

#include "hpshmem/hpshmem.h"
#include "ops/checks/checks.h"

namespace hpshmem::ops {

Status BuildCopyRequest(const TensorArg& target, int64_t target_offset, const TensorArg& src, int64_t src_offset,
                        int64_t size, int64_t rank, const int64_t* block_dim, CopyRequest* out) {
  if (target.itemsize <= 0 || target.dtype != src.dtype) {
    auto name = [](const TensorArg& t) { return std::string(t.dtype_name ? t.dtype_name : "?"); };
    return Status::TypeError("target (" + name(target) + ") and src (" + name(src) + ") must have the same dtype");
  }
  HPSHMEM_RETURN_IF_ERROR(CheckCopyRange(target.numel, target_offset, src.numel, src_offset, size));
  HPSHMEM_RETURN_IF_ERROR(CheckRank(rank, NPes(), "target_rank"));
  if (block_dim) HPSHMEM_RETURN_IF_ERROR(CheckBlockDim(*block_dim));
  const auto item = static_cast<uintptr_t>(target.itemsize);
  out->dst = target.addr + static_cast<uintptr_t>(target_offset) * item;
  out->src = src.addr + static_cast<uintptr_t>(src_offset) * item;
  out->bytes = static_cast<size_t>(size) * item;
  out->pe = static_cast<int>(rank);
  out->block_dim = block_dim ? static_cast<int>(*block_dim) : 0;
  return Status::OK();
}

}  // namespace hpshmem::ops
