#include "ops/checks/checks.h"

#include <string>

namespace hpshmem::ops {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// offset + size printed exactly (both may be near INT64_MAX).
std::string Sum(int64_t a, int64_t b) {
  unsigned __int128 s = static_cast<unsigned __int128>(a) + static_cast<unsigned __int128>(b);
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(s % 10)));
    s /= 10;
  } while (s);
  return out;
}

}  // namespace

Status CheckIndex(int64_t value, const char* name) {
  if (value >= 0) return Status::OK();
  return Status::InvalidArgument(std::string(name) + " must be >= 0, got " + Str(value));
}

Status CheckSpan(int64_t numel, int64_t offset, int64_t size, const char* name, const char* offset_name) {
  if (offset <= numel && size <= numel - offset) return Status::OK();
  return Status::InvalidArgument(std::string(offset_name) + " + size = " + Str(offset) + " + " + Str(size) + " = " +
                                 Sum(offset, size) + " exceeds " + name + "'s " + Str(numel) + " elements");
}

Status CheckCopyRange(int64_t target_numel, int64_t target_offset, int64_t src_numel, int64_t src_offset,
                      int64_t size) {
  HPSHMEM_RETURN_IF_ERROR(CheckIndex(target_offset, "target_offset"));
  HPSHMEM_RETURN_IF_ERROR(CheckIndex(src_offset, "src_offset"));
  HPSHMEM_RETURN_IF_ERROR(CheckIndex(size, "size"));
  HPSHMEM_RETURN_IF_ERROR(CheckSpan(target_numel, target_offset, size, "target", "target_offset"));
  return CheckSpan(src_numel, src_offset, size, "src", "src_offset");
}

Status CheckRank(int64_t rank, int64_t world, const char* name) {
  if (rank >= 0 && rank < world) return Status::OK();
  return Status::InvalidArgument(std::string(name) + " " + Str(rank) + " is out of range [0, " + Str(world) + ")");
}

Status CheckBlockDim(int64_t block_dim) {
  if (block_dim >= 1 && block_dim <= 64) return Status::OK();
  return Status::InvalidArgument("block_dim must be in [1, 64], got " + Str(block_dim));
}

Status CheckSignalOffset(int64_t offset, int64_t numel, const char* name) {
  std::string off_name = std::string(name) + "_offset";
  HPSHMEM_RETURN_IF_ERROR(CheckIndex(offset, off_name.c_str()));
  if (offset < numel) return Status::OK();
  return Status::InvalidArgument(off_name + " " + Str(offset) + " is out of range for " + name + "'s " + Str(numel) +
                                 " elements");
}

Status CheckSignalValue(int64_t value, int width, const char* name) {
  if (width == 8 || (value >= INT32_MIN && value <= INT32_MAX)) return Status::OK();
  return Status::InvalidArgument(std::string(name) + " " + Str(value) + " does not fit the signal's int" +
                                 Str(8 * width));
}

Status CheckSignalOpCode(int64_t op) {
  if (op == 0 || op == 1) return Status::OK();
  return Status::InvalidArgument("signal_op " + Str(op) + " is not SET (0) or ADD (1)");
}

Status CheckCompareOpCode(int64_t op) {
  if (op >= 0 && op <= 5) return Status::OK();
  return Status::InvalidArgument("compare_op " + Str(op) + " is not one of 0=eq 1=gt 2=lt 3=ne 4=ge 5=le");
}

}  // namespace hpshmem::ops
