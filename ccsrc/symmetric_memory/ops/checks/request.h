// The one request builder of each call that every front end uses (the Python
// API's fast path and its checked path through the binding, MindSpore's graph
// kernels): each front end only reads its own arguments (Python objects,
// kernel parameters) into the plain values below, and the builder applies
// every rule and returns the request or the one message of the first rule
// broken (checks.h).
//
// Units: addresses in bytes; numels, offsets and sizes in ELEMENTS.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hpshmem/hpshmem.h"
#include "hpshmem/status.h"

namespace hpshmem::ops {

// A tensor as its front end read it. `dtype` is the front end's identity of
// its dtype (equal for equal dtypes); `dtype_name` is printed in messages (may
// be null where the front end never shows the message: the fast path).
// itemsize 0: a dtype the front end does not know. int_width: 4 or 8 for
// int32 / int64 (the dtypes a signal word may have), 0 for every other dtype.
struct TensorArg {
  uintptr_t addr = 0;
  int64_t numel = 0;
  int itemsize = 0;
  intptr_t dtype = 0;
  const char* dtype_name = nullptr;
  int int_width = 0;
};

// A put or get: dst/src addresses, bytes, the peer, threads (0: the default).
struct CopyRequest {
  uintptr_t dst = 0, src = 0;
  size_t bytes = 0;
  int pe = 0;
  int block_dim = 0;
};

// Checks a put/get's dtypes, offsets and size (checks.h's CheckCopyRange),
// `rank` against this job's ranks and `block_dim` (null: the default), in that
// order; which side must be symmetric is the front end's to check. Returns
// OK and fills *out, or a TypeError (dtypes) / InvalidArgument naming the argument.
Status BuildCopyRequest(const TensorArg& target, int64_t target_offset, const TensorArg& src, int64_t src_offset,
                        int64_t size, int64_t rank, const int64_t* block_dim, CopyRequest* out);

// One word of a signal tensor: its address, type, and offset in elements
// (what a wait's messages call "signal[offset]").
struct SignalWord {
  uintptr_t addr = 0;
  SignalType type = SignalType::kInt64;
  int64_t offset = 0;
};

// A signal (shmem_signal_op, and the signal half of shmem_put_with_signal).
struct SignalRequest {
  SignalWord word;
  int64_t value = 0;
  SignalOp op = SignalOp::kSet;
  int pe = 0;
};

// A wait on a local signal word (shmem_wait_for_signal).
struct WaitRequest {
  SignalWord word;
  int64_t value = 0;
  Cmp cmp = Cmp::kEq;
};

// Checks a signal's dtype (int32 or int64: TypeError), `signal_offset`, that
// `value` fits the word ("signal_value"), the SignalOp code `op` and `rank`,
// in that order; whether the tensor is symmetric is the front end's to check.
// Returns OK and fills *out, or the message of the first rule broken.
Status BuildSignalRequest(const TensorArg& signal, int64_t signal_offset, int64_t value, int64_t op, int64_t rank,
                          SignalRequest* out);

// As BuildSignalRequest for a wait: dtype, `signal_offset`, `value` fits the
// word ("compare_value") and the Cmp code `cmp`, in that order.
Status BuildWaitRequest(const TensorArg& signal, int64_t signal_offset, int64_t value, int64_t cmp, WaitRequest* out);

// A collective between one tensor per rank (`part`) and one of world_size
// times its size (`whole`): an allgather's input and output, a
// reduce-scatter's output and input. Sizes in elements and bytes.
struct PartsRequest {
  uintptr_t whole = 0, part = 0;
  int64_t part_numel = 0;
  size_t part_bytes = 0;
};

// Checks that `whole` and `part` have one dtype (TypeError; the output named
// first) and that whole holds `world` x numel(part) elements, naming them
// `whole_name` and `part_name` as the caller's API does; whether `whole` is
// symmetric is the front end's to check. Returns OK and fills *out, or the
// rule's message.
Status BuildPartsRequest(const TensorArg& whole, const char* whole_name, const TensorArg& part, const char* part_name,
                         bool whole_is_output, int64_t world, PartsRequest* out);

// An alltoall's tensors: `sends[p]` (send_tensor_list[p]) goes to rank p;
// `counts[q]` elements (receive_list[q]) arrive from rank q, packed in rank
// order into `receive`. Checks that every send tensor has receive's dtype
// (TypeError naming send_tensor_list[p]), that every count is >= 0 and that
// they add up to at most numel(receive), in that order; the lists' lengths
// (`world` entries each) and which tensors are symmetric are the front end's
// to check. Fills send_addrs[p] and send_elems[p] (`world` entries each) and
// returns OK, or the first rule's message.
Status BuildAlltoallRequest(const TensorArg& receive, const TensorArg* sends, const int64_t* counts, int world,
                            const void** send_addrs, int64_t* send_elems);

}  // namespace hpshmem::ops
