// The value rules of the API's arguments, each with the one message every
// front end raises: the Python API (hyper_parallel/core/symmetric_memory/
// _checks.py calls these through the binding, so torch's custom operators,
// which call the Python API, raise them too) and MindSpore's graph kernels
// (platform/mindspore/aot_ops.cc). What concerns the objects a front end
// receives (is it an int, a tensor, contiguous, on the CPU) stays with it.
//
// Units: offsets, sizes and numels in ELEMENTS; widths in bytes. Each returns
// OK or an InvalidArgument (a ShmemValueError in Python) naming the argument.
#pragma once

#include <cstdint>

#include "hpshmem/status.h"

namespace hpshmem::ops {

// `name` >= 0.
Status CheckIndex(int64_t value, const char* name);
// offset + size <= numel for `name` (offset named `offset_name`); both already >= 0.
Status CheckSpan(int64_t numel, int64_t offset, int64_t size, const char* name, const char* offset_name);
// A put/get's offsets and size: each >= 0, then both windows inside their tensors.
Status CheckCopyRange(int64_t target_numel, int64_t target_offset, int64_t src_numel, int64_t src_offset, int64_t size);
// 0 <= rank < world.
Status CheckRank(int64_t rank, int64_t world, const char* name);
// 1 <= block_dim <= 64.
Status CheckBlockDim(int64_t block_dim);
// 0 <= offset < numel of signal tensor `name` (the offset is named "<name>_offset").
Status CheckSignalOffset(int64_t offset, int64_t numel, const char* name);
// `value` fits a signal word of `width` bytes (4 or 8).
Status CheckSignalValue(int64_t value, int width, const char* name);
// SET (0) or ADD (1).
Status CheckSignalOpCode(int64_t op);
// 0=eq 1=gt 2=lt 3=ne 4=ge 5=le.
Status CheckCompareOpCode(int64_t op);

}  // namespace hpshmem::ops
