// Element-wise reductions of the reducing collectives: out = op(src[0], src[1],
// ..., src[n-1]) element by element, always in that order, so every rank that
// reduces the same inputs gets the same bits. Half precision is accumulated in
// float32 and rounded once at the end; integers wrap as two's complement.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hpshmem/status.h"

namespace hpshmem::ops {

enum class DType : int {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt16,
  kInt32,
  kInt64,
  // OpenSHMEM's further reduction types.
  kUInt16,
  kUInt32,
  kUInt64,
  kLongDouble,
  kComplex64,
  kComplex128
};
enum class ReduceOp : int { kSum, kAvg, kMax, kMin, kProd, kAnd, kOr, kXor };

// Whether `op` applies to `dtype`: AND/OR/XOR to integers only, MAX/MIN not
// to complex numbers. Errors: kTypeError naming `what`, the dtype and the op.
Status CheckReducible(DType dtype, ReduceOp op, const char* what);

// Bytes per element of `dtype` (0 for an unknown code).
size_t DTypeSize(DType dtype);

// out[i] = op over srcs[0..n)[i] for i < count (elements), n >= 1; kAvg divides
// the sum by `divisor` (integers: toward zero). `out` may be one of srcs.
// Errors: kInvalidArgument for an unknown dtype or op.
Status ReduceInto(void* out, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op, int64_t divisor);

}  // namespace hpshmem::ops
