// Allreduce: every member reduces every member's values in team-rank order
// (ops.h), one-shot (each reduces the whole tensor) or two-shot (each reduces
// its block, then puts it into every member's block); across hosts, up to an
// eager slot, every member sends its values to every peer (ReduceEager), and
// up to kAllreduceStepsMaxBytes two-shot's halves go as eager steps (AllreduceInSteps).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/collective/call.h"
#include "ops/reduce/reduce.h"

namespace hpshmem::ops {
namespace {

using namespace collective;

thread_local Scratch t_result;  // the one-shot result
thread_local std::vector<const void*> t_blocks;

// Across hosts, past one slot and up to kAllreduceStepsMaxBytes: two-shot's
// halves as eager steps, a chunk of up to a slot per member at a time. In each
// chunk member p's block (two-shot's split) goes into member p's slot, and p
// reduces it in team-rank order into its own block of `data`; then every
// member's reduced block goes into every member's slot and is copied out.
// Two messages per peer pair and chunk each way, each with a W-th of the
// chunk, where the announced path pays an announcement, a get of the whole
// tensor from every peer and a release. Every header carries the whole
// call's (count, packed): the first step compares them.
Status AllreduceInSteps(const CollectiveCall& call, char* data, const char* in, size_t count, DType dtype, ReduceOp op,
                        int64_t packed, const char* what) {
  const int me = call.me, members = call.members;
  const size_t item = DTypeSize(dtype);
  const size_t chunk = members * (call.eager_bytes / item);  // elements
  t_blocks.resize(members);
  for (size_t first = 0; first < count; first += chunk) {
    const size_t n = std::min(chunk, count - first);
    char* out = data + first * item;
    const char* src = in + first * item;
    auto lo = [&](int p) { return n * p / members; };
    auto block = [&](const char* base, int p) { return Piece{base + lo(p) * item, (lo(p + 1) - lo(p)) * item}; };
    int64_t epoch;
    HPSHMEM_RETURN_IF_ERROR(
        ExchangeEager(call, static_cast<int64_t>(count), packed, [&](int p) { return block(src, p); }, &epoch, what));
    for (int p = 0; p < members; ++p) t_blocks[p] = p == me ? block(src, me).data : SlotData(call, p, epoch);
    // Our block may be our own source (in == data): each element is read before it is written.
    HPSHMEM_RETURN_IF_ERROR(
        ReduceInto(out + lo(me) * item, t_blocks.data(), members, lo(me + 1) - lo(me), dtype, op, members));
    HPSHMEM_RETURN_IF_ERROR(
        ExchangeEager(call, static_cast<int64_t>(count), packed, [&](int) { return block(out, me); }, &epoch, what));
    for (int p = 0; p < members; ++p)
      if (p != me && lo(p + 1) > lo(p))
        std::memcpy(out + lo(p) * item, SlotData(call, p, epoch), (lo(p + 1) - lo(p)) * item);
  }
  return Status::OK();
}

}  // namespace

Status Allreduce(void* data, size_t count, DType dtype, ReduceOp op, AllreduceAlgorithm algorithm, int team,
                 const void* src) {
  const char* what = "shmem_allreduce";
  size_t item = DTypeSize(dtype);
  if (!item) return Status::TypeError(std::string(what) + ": dtype code " + std::to_string(static_cast<int>(dtype)));
  HPSHMEM_RETURN_IF_ERROR(CheckReducible(dtype, op, what));
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  auto* buffer = static_cast<char*>(data);
  size_t bytes = count * item;
  const bool algorithm_was_auto = algorithm == AllreduceAlgorithm::kAuto;
  if (algorithm == AllreduceAlgorithm::kAuto)
    algorithm = bytes <= kOneShotMaxBytes ? AllreduceAlgorithm::kOneShot : AllreduceAlgorithm::kTwoShot;
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(call, 0));  // peers may still read this buffer from an earlier call
  if (algorithm_was_auto && call.members > 1 && bytes <= call.eager_bytes && SpansHosts(call)) {
    // Across hosts, small: one message per peer pair (ReduceEager); the
    // result goes through scratch, as `src` may be `data`.
    char* out = t_result.Get(bytes);
    const char* in = src ? static_cast<const char*>(src) : buffer;
    HPSHMEM_RETURN_IF_ERROR(ReduceEager(call, in, 0, count, dtype, op, static_cast<int64_t>(count),
                                        Pack(static_cast<int>(dtype), static_cast<int>(op), Place(call, buffer) << 24),
                                        out, what));
    if (bytes) std::memcpy(buffer, out, bytes);
    return Status::OK();
  }
  if (algorithm_was_auto && call.members > 1 && bytes <= kAllreduceStepsMaxBytes && SpansHosts(call)) {
    return AllreduceInSteps(call, buffer, src ? static_cast<const char*>(src) : buffer, count, dtype, op,
                            Pack(static_cast<int>(dtype), static_cast<int>(op), Place(call, buffer) << 24), what);
  }
  // Nobody reads `data` before this rank announces the call below.
  if (src && src != data && bytes) std::memmove(buffer, src, bytes);
  int64_t epoch;
  HPSHMEM_RETURN_IF_ERROR(BeginAgreed(call, &epoch, static_cast<int64_t>(count),
                                      Pack(static_cast<int>(dtype), static_cast<int>(op), Place(call, buffer) << 24),
                                      what));
  if (call.members == 1) return ReduceRange(call, buffer, 0, count, item, dtype, op, buffer);  // avg over one rank
  if (algorithm == AllreduceAlgorithm::kOneShot) {
    // Every rank reduces the whole tensor from every rank's copy; it may
    // overwrite its own copy once every peer has finished reading it.
    char* out = t_result.Get(bytes);
    HPSHMEM_RETURN_IF_ERROR(ReduceRange(call, buffer, 0, count, item, dtype, op, out));
    HPSHMEM_RETURN_IF_ERROR(AllConsumed(call));
    if (bytes) std::memcpy(buffer, out, bytes);
    return Status::OK();
  }
  // Two-shot: rank r reduces element block r from every rank, in place into
  // its own block r, then puts it into block r of every rank. Block r is read
  // and written by rank r alone, so nothing waits between the two halves.
  size_t lo = count * call.me / call.members, hi = count * (call.me + 1) / call.members;
  char* mine = buffer + lo * item;
  HPSHMEM_RETURN_IF_ERROR(ReduceRange(call, buffer, lo, hi, item, dtype, op, mine));
  for (int k = 1; k < call.members; ++k) {
    int p = (call.me + k) % call.members;
    HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(mine, mine, (hi - lo) * item, call.AtMember(p, call.layout.arrivals),
                                              kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
  }
  return WaitArrivals(call, call.members - 1);
}

}  // namespace hpshmem::ops
