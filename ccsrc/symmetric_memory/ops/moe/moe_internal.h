// What dispatch and combine share inside ops/moe: the buffer's layout and its
// signal protocol (moe.h explains the epochs and acknowledgements).
//
// Layout of a buffer, in bytes from its base, the same on every member:
//   [0, 64)                      the config's hash (agreed at creation)
//   four arrays of W words,      dispatch count, dispatch ack, combine count,
//   one per 64-byte line         combine ack; word s of an array is written by
//                                member s only
//   dispatch region              W x max_tokens rows of dispatch_stride: the
//                                tokens from source s at rows [s*T, (s+1)*T)
//   combine region               W x max_tokens rows of combine_stride: the
//                                partial sums from rank d at [d*T, (d+1)*T)
//   staging                      max_tokens rows of the larger stride: what
//                                goes to a rank of another host, packed
#pragma once

#include <cstdint>
#include <string>

#include "ops/moe/moe.h"

namespace hpshmem::ops {

// A count word's value for a source that refused its arguments.
constexpr int64_t kMoePoison = 0xffffffff;

enum class MoeWord : int { kDispatchCount = 0, kDispatchAck = 1, kCombineCount = 2, kCombineAck = 3 };

struct MoeAccess {
  static const MoeConfig& Config(const MoeBuffer& b) { return b.config_; }
  static int World(const MoeBuffer& b) { return b.world_; }
  static int Me(const MoeBuffer& b) { return b.me_; }
  static int Pe(const MoeBuffer& b, int member) { return b.pes_[member]; }
  static int64_t Local(const MoeBuffer& b) { return b.local_experts_; }
  // This rank's word `member` of array `w` (the same address names it on every rank).
  static int64_t* Word(const MoeBuffer& b, MoeWord w, int member) {
    return reinterpret_cast<int64_t*>(b.base_ + 64 + (static_cast<size_t>(w) * b.world_ + member) * 64);
  }
  static size_t DispatchStride(const MoeBuffer& b) { return b.dispatch_stride_; }
  static size_t CombineStride(const MoeBuffer& b) { return b.combine_stride_; }
  // Row `row` of source `source`'s part of the dispatch region (this rank's address).
  static char* DispatchRow(const MoeBuffer& b, int source, int64_t row) {
    return b.base_ + b.dispatch_region_ +
           (static_cast<size_t>(source) * b.config_.max_tokens + row) * b.dispatch_stride_;
  }
  static char* CombineRow(const MoeBuffer& b, int from, int64_t row) {
    return b.base_ + b.combine_region_ + (static_cast<size_t>(from) * b.config_.max_tokens + row) * b.combine_stride_;
  }
  static char* Staging(const MoeBuffer& b) { return b.base_ + b.staging_; }
  static int64_t NextDispatch(MoeBuffer* b) { return ++b->dispatch_epoch_; }
  static int64_t NextCombine(MoeBuffer* b) { return ++b->combine_epoch_; }
};

// Bytes of a token's data in a dispatch row; its k int32 expert ids follow
// at this offset, then its k float32 weights.
inline size_t MoeDataBytes(const MoeConfig& c) {
  return (static_cast<size_t>(c.hidden) * DTypeSize(c.dtype) + 7) & ~size_t{7};
}

// Bytes per element of a partial sum: float32 for half precision, else the dtype's own.
inline size_t MoeAccBytes(DType dtype) { return dtype == DType::kFloat64 ? 8 : 4; }

const char* MoeDTypeName(DType dtype);

// Sets word `word` (index: this rank's team rank) on member `member` to `value`.
Status MoeSignal(const MoeBuffer& b, MoeWord word, int member, int64_t value);
// Waits until this rank's word `member` of `word` is >= value; *seen: the value.
Status MoeWait(const MoeBuffer& b, MoeWord word, int member, int64_t value, const char* what, int64_t* seen);
// Before writing call `epoch` into every member's space: waits for each to
// have acknowledged call epoch - 1 (word `ack`).
Status MoeWaitAcks(const MoeBuffer& b, MoeWord ack, int64_t epoch, const char* what);
// Sets every member's count word `count` to the refusal of call `epoch`.
Status MoeSignalRefusal(const MoeBuffer& b, MoeWord count, int64_t epoch);
// Delivers `bytes` from `src` (a local staging copy) to `dst_local` on member
// `member` and then its count word `count`: a store through the mapping or one
// put-with-signal to another host.
Status MoeDeliver(const MoeBuffer& b, int member, void* dst_local, const void* src, size_t bytes, MoeWord count,
                  int64_t value);

}  // namespace hpshmem::ops
