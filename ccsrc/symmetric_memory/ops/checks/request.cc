#include "ops/checks/request.h"

#include <cstdint>
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

namespace {

// The word at `offset` of a signal tensor, with the checks every signal and
// wait share; `value_name` names the value in its message.
Status BuildSignalWord(const TensorArg& signal, int64_t offset, int64_t value, const char* value_name,
                       SignalWord* out) {
  if (signal.int_width != 4 && signal.int_width != 8)
    return Status::TypeError(std::string("signal must be an int32 or int64 tensor, got ") +
                             (signal.dtype_name ? signal.dtype_name : "?"));
  HPSHMEM_RETURN_IF_ERROR(CheckSignalOffset(offset, signal.numel, "signal"));
  HPSHMEM_RETURN_IF_ERROR(CheckSignalValue(value, signal.int_width, value_name));
  out->type = static_cast<SignalType>(signal.int_width);
  out->addr = signal.addr + static_cast<uintptr_t>(offset) * static_cast<uintptr_t>(signal.int_width);
  out->offset = offset;
  return Status::OK();
}

}  // namespace

Status BuildSignalRequest(const TensorArg& signal, int64_t signal_offset, int64_t value, int64_t op, int64_t rank,
                          SignalRequest* out) {
  SignalWord word;
  HPSHMEM_RETURN_IF_ERROR(BuildSignalWord(signal, signal_offset, value, "signal_value", &word));
  HPSHMEM_RETURN_IF_ERROR(CheckSignalOpCode(op));
  HPSHMEM_RETURN_IF_ERROR(CheckRank(rank, NPes(), "target_rank"));
  out->word = word;
  out->value = value;
  out->op = static_cast<SignalOp>(op);
  out->pe = static_cast<int>(rank);
  return Status::OK();
}

Status BuildWaitRequest(const TensorArg& signal, int64_t signal_offset, int64_t value, int64_t cmp, WaitRequest* out) {
  SignalWord word;
  HPSHMEM_RETURN_IF_ERROR(BuildSignalWord(signal, signal_offset, value, "compare_value", &word));
  HPSHMEM_RETURN_IF_ERROR(CheckCompareOpCode(cmp));
  out->word = word;
  out->value = value;
  out->cmp = static_cast<Cmp>(cmp);
  return Status::OK();
}

Status BuildPartsRequest(const TensorArg& whole, const char* whole_name, const TensorArg& part, const char* part_name,
                         bool whole_is_output, int64_t world, PartsRequest* out) {
  if (whole.itemsize <= 0 || whole.dtype != part.dtype) {
    auto named = [](const char* name, const TensorArg& t) {
      return std::string(name) + " (" + (t.dtype_name ? t.dtype_name : "?") + ")";
    };
    std::string w = named(whole_name, whole), p = named(part_name, part);
    return Status::TypeError((whole_is_output ? w + " and " + p : p + " and " + w) + " must have the same dtype");
  }
  int64_t want = 0;
  const bool overflow = __builtin_mul_overflow(world, part.numel, &want);
  if (world <= 0 || overflow || whole.numel != want) {
    return Status::InvalidArgument(std::string(whole_name) + " must have world_size x numel(" + part_name +
                                   ") = " + std::to_string(world) + " x " + std::to_string(part.numel) + " = " +
                                   (overflow ? "more than " + std::to_string(INT64_MAX) : std::to_string(want)) +
                                   " elements, has " + std::to_string(whole.numel));
  }
  out->whole = whole.addr;
  out->part = part.addr;
  out->part_numel = part.numel;
  out->part_bytes = static_cast<size_t>(part.numel) * static_cast<size_t>(part.itemsize);
  return Status::OK();
}

Status BuildAlltoallRequest(const TensorArg& receive, const TensorArg* sends, const int64_t* counts, int world,
                            const void** send_addrs, int64_t* send_elems) {
  for (int p = 0; p < world; ++p) {
    if (receive.itemsize <= 0 || sends[p].dtype != receive.dtype) {
      auto name = [](const TensorArg& t) { return std::string(t.dtype_name ? t.dtype_name : "?"); };
      return Status::TypeError("send_tensor_list[" + std::to_string(p) + "] (" + name(sends[p]) +
                               ") and receive_tensor (" + name(receive) + ") must have the same dtype");
    }
  }
  int64_t total = 0;
  bool overflow = false;
  for (int q = 0; q < world; ++q) {
    if (counts[q] < 0) {
      const std::string name = "receive_list[" + std::to_string(q) + "]";
      return CheckIndex(counts[q], name.c_str());
    }
    overflow = overflow || __builtin_add_overflow(total, counts[q], &total);
  }
  if (overflow || total > receive.numel) {
    return Status::InvalidArgument("receive_list adds up to " +
                                   (overflow ? "more than " + std::to_string(INT64_MAX) : std::to_string(total)) +
                                   " elements; receive_tensor has " + std::to_string(receive.numel));
  }
  for (int p = 0; p < world; ++p) {
    send_addrs[p] = reinterpret_cast<const void*>(sends[p].addr);
    send_elems[p] = sends[p].numel;
  }
  return Status::OK();
}

}  // namespace hpshmem::ops
