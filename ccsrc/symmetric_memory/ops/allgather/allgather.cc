// Allgather over one-sided puts and gets; the protocol is described in ops.h.
// Push: the owner of the data writes it into every peer and bumps the peer's
// arrival counter (small pieces ride in the eager slots). Pull: the owner
// announces the call (its data is in place) and each consumer reads the
// pieces itself, in rank order, then tells the owner it is done reading.
#include <cstring>
#include <string>

#include "ops/collective/call.h"

namespace hpshmem::ops {
namespace {

using namespace collective;

constexpr size_t kGatedMax = 1 << 20;  // bytes per peer sent ahead of the target's announcement

Status SizeMismatch(const CollectiveCall& call, int p, int64_t theirs, size_t mine) {
  return Status::CollectiveMismatch(
      "shmem_allgather: ranks pass different sizes: rank " + std::to_string(call.GlobalRank(call.me)) + " " +
      std::to_string(mine) + " bytes, rank " + std::to_string(call.GlobalRank(p)) + " " +
      (theirs >= 0 ? std::to_string(theirs) : "more than " + std::to_string(call.eager_bytes)) + " bytes");
}

// Allgather of at most EagerSlotBytes per rank: each rank puts its piece
// into every peer's slot without waiting for anyone, then collects what the
// peers put into its own slots. One wait per peer, none of them for a peer's
// permission: when ranks outnumber cores, a rank that runs gets its whole
// share of the call done before it yields.
Status AllgatherEager(const CollectiveCall& call, char* output, const void* in, size_t bytes) {
  const int me = call.me, members = call.members;
  const int64_t epoch = ++call.counters->epoch;
  EagerHeader header{epoch, static_cast<int64_t>(bytes), 0, 0};
  for (int k = 1; k < members; ++k) HPSHMEM_RETURN_IF_ERROR(PutSlot(call, (me + k) % members, header, in, bytes));
  HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + me, kWord, epoch, SignalOp::kSet, call.GlobalRank(me)));
  HPSHMEM_RETURN_IF_ERROR(ReleaseGated());
  Status bad;
  int64_t traded = 0;
  for (int k = 1; k < members; ++k) {
    int p = (me + k) % members;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    const EagerHeader& got = SlotHeader(call, p, epoch);
    if (got.epoch == epoch && got.count == static_cast<int64_t>(bytes)) continue;
    if (bad.ok()) bad = SizeMismatch(call, p, got.epoch == epoch ? got.count : -1, bytes);
    if (got.epoch != epoch || static_cast<size_t>(got.count) > call.eager_bytes) {
      // p's piece was too large to go eager (or p is in pull mode): it puts
      // nothing into our output once it sees our size; an arrival each way
      // stands in for the data.
      HPSHMEM_RETURN_IF_ERROR(
          Signal(call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
      ++traded;
    }
  }
  if (traded) HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, traded));
  if (!bad.ok()) return bad;  // the output stays as it was
  // Every piece is here (and stays: a peer rewrites this parity's slot only
  // in call e + 2, after we have entered e + 1).
  std::memmove(output + me * bytes, in, bytes);
  for (int p = 0; p < members; ++p)
    if (p != me) std::memcpy(output + p * bytes, SlotData(call, p, epoch), bytes);
  return Status::OK();
}

}  // namespace

Status Allgather(void* out, const void* in, size_t bytes, bool pull, int block_dim, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  const int me = call.me, members = call.members;
  auto* output = static_cast<char*>(out);
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(call, 0));  // peers may still read our slot from a pull call
  if (!pull && bytes <= call.eager_bytes) return AllgatherEager(call, output, in, bytes);
  if (in != output + me * bytes)
    HPSHMEM_RETURN_IF_ERROR(ops::PutMem(output + me * bytes, in, bytes, call.GlobalRank(me), block_dim));
  int64_t epoch;
  if (pull) {
    HPSHMEM_RETURN_IF_ERROR(Begin(call, &epoch));
  } else {
    // Announced with our size in each peer's slot, to every peer (those sent
    // gated data too): a peer whose size differs fails instead of writing
    // past our output or hanging.
    epoch = ++call.counters->epoch;
    for (int k = 1; k < members; ++k)
      HPSHMEM_RETURN_IF_ERROR(
          PutSlot(call, (me + k) % members, {epoch, static_cast<int64_t>(bytes), 0, 0}, nullptr, 0));
    HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + me, kWord, epoch, SignalOp::kSet, call.GlobalRank(me)));
    HPSHMEM_RETURN_IF_ERROR(ReleaseGated());
  }
  // A peer whose header for this call is here with another size.
  auto differs = [&](int p) {
    const EagerHeader& header = SlotHeader(call, p, epoch);
    return header.epoch == epoch && header.count != static_cast<int64_t>(bytes);
  };
  if (!pull) {
    // Peers that can hold a message (other hosts) get it at once, gated on
    // their ready word: it lands when they enter this call, and we save
    // waiting a message's flight for their announcement. Past kGatedMax the
    // copy a held message costs outweighs that; those, and peers of this
    // host, go after the announcement.
    bool gated_any = false;
    for (int k = 1; k < members && bytes <= kGatedMax; ++k) {
      int p = (me + k) % members;
      if (!CanHoldGated(call.GlobalRank(p))) continue;
      gated_any = true;
      HPSHMEM_RETURN_IF_ERROR(PutMemSignalGated(output + me * bytes, in, bytes, call.AtMember(p, call.layout.arrivals),
                                                kWord, 1, SignalOp::kAdd, call.GlobalRank(p),
                                                call.AtMember(p, call.layout.ready + p), epoch));
    }
    Status bad;
    for (int k = 1; k < members; ++k) {  // rotated start spreads the traffic over the peers
      int p = (me + k) % members;
      if (gated_any && CanHoldGated(call.GlobalRank(p))) continue;
      HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
      if (differs(p)) {
        // Nothing goes into p's output; an arrival stands in for the data
        // (p sends us one too).
        if (bad.ok()) bad = SizeMismatch(call, p, SlotHeader(call, p, epoch).count, bytes);
        HPSHMEM_RETURN_IF_ERROR(
            Signal(call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
        continue;
      }
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(output + me * bytes, in, bytes, call.AtMember(p, call.layout.arrivals),
                                                kWord, 1, SignalOp::kAdd, call.GlobalRank(p), block_dim));
    }
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, members - 1));
    // Peers sent gated data are checked now: every header has landed (each
    // came before its sender's arrival, data or traded).
    for (int p = 0; p < members && bad.ok(); ++p)
      if (p != me && differs(p)) bad = SizeMismatch(call, p, SlotHeader(call, p, epoch).count, bytes);
    return bad;
  }
  for (int p = 0; p < members; ++p) {  // our own slot was filled before we announced the call
    if (p == me) continue;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    HPSHMEM_RETURN_IF_ERROR(ops::GetMem(output + p * bytes, output + p * bytes, bytes, call.GlobalRank(p), block_dim));
    HPSHMEM_RETURN_IF_ERROR(Consumed(call, p));
  }
  return WaitConsumed(call, members - 1);  // our buffers are the caller's again once every reader is done
}

}  // namespace hpshmem::ops
