// Allreduce: every member reduces every member's values in team-rank order
// (ops.h), one-shot (each reduces the whole tensor) or two-shot (each reduces
// its block, then puts it into every member's block).
#include <cstring>
#include <string>
#include <vector>

#include "ops/collective/call.h"
#include "ops/reduce/reduce.h"

namespace hpshmem::ops {
namespace {

using namespace collective;

thread_local Scratch t_result;  // the one-shot result
thread_local std::vector<const void*> t_slots;

// Whether a member's memory is not mapped here (another host): the same
// answer on every member, since mapping follows the host.
bool SpansHosts(const CollectiveCall& call) {
  for (int p = 0; p < call.members; ++p)
    if (p != call.me && !hpshmem::Ptr(call.workspace, call.GlobalRank(p))) return true;
  return false;
}

// Allreduce of at most EagerSlotBytes across hosts: each rank puts its values
// into every peer's eager slot without waiting for anyone, then reduces the
// slots in team-rank order (one message per peer pair each way; the one-shot
// path pays an announcement, a get and a release across the wire). The
// arguments travel twice: in the slot's header, checked by the receiver, and
// in the place words, so that a peer whose arguments sent it down another
// path (BeginAgreed) finds the disagreement there and both sides fail alike.
Status AllreduceEager(const CollectiveCall& call, char* buffer, const char* in, size_t count, size_t item, DType dtype,
                      ReduceOp op, const char* what) {
  const int me = call.me, members = call.members;
  const size_t bytes = count * item;
  const int64_t epoch = ++call.counters->epoch;
  const int64_t packed = Pack(static_cast<int>(dtype), static_cast<int>(op), Place(call, buffer) << 24);
  const int64_t words[2] = {static_cast<int64_t>(count), packed};
  for (int k = 1; k < members; ++k) {
    int p = (me + k) % members;
    // The ready word is set to what it already holds (our previous call):
    // only the slot below announces this call, after the words have landed.
    HPSHMEM_RETURN_IF_ERROR(hpshmem::PutMemSignal(call.AtMember(p, call.layout.place + 2 * me), words, sizeof words,
                                                  call.AtMember(p, call.layout.ready + me), kWord, epoch - 1,
                                                  SignalOp::kSet, call.GlobalRank(p)));
    HPSHMEM_RETURN_IF_ERROR(PutSlot(call, p, {epoch, static_cast<int64_t>(count), packed, 0}, in, bytes));
  }
  HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + me, kWord, epoch, SignalOp::kSet, call.GlobalRank(me)));
  HPSHMEM_RETURN_IF_ERROR(ReleaseGated());
  bool agreed = true;
  if (t_slots.size() < static_cast<size_t>(members)) t_slots.resize(members);
  for (int k = 1; k < members; ++k) {
    int p = (me + k) % members;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    const EagerHeader& got = SlotHeader(call, p, epoch);
    agreed &= got.epoch == epoch && got.count == static_cast<int64_t>(count) && got.place == packed;
    t_slots[p] = SlotData(call, p, epoch);
  }
  if (!agreed) {
    // Every member that took this path sees it too (each reads every slot);
    // Agree names the difference and syncs with the members of either path.
    HPSHMEM_RETURN_IF_ERROR(Agree(call, epoch, static_cast<int64_t>(count), packed, what));
    HPSHMEM_RETURN_IF_ERROR(AllConsumed(call));
    return Status::CollectiveMismatch(std::string(what) + ": rank " + std::to_string(call.GlobalRank(me)) +
                                      " and a peer entered different collectives or chose different algorithms");
  }
  t_slots[me] = in;
  // The slots stay as they are until call e + 2, which no peer starts before
  // this rank entered e + 1.
  char* out = t_result.Get(bytes);
  HPSHMEM_RETURN_IF_ERROR(ReduceInto(out, t_slots.data(), members, count, dtype, op, members));
  if (bytes) std::memcpy(buffer, out, bytes);
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
  const bool eager = algorithm_was_auto && call.members > 1 && bytes <= call.eager_bytes && SpansHosts(call);
  if (eager)
    return AllreduceEager(call, buffer, src ? static_cast<const char*>(src) : buffer, count, item, dtype, op, what);
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
