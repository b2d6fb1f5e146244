// Alltoall over one-sided puts and gets; the protocol is described in ops.h.
// Push: each sender learns from the receiver's slot where its piece goes and
// puts it there (small pieces ride in the slot itself). Pull: each owner
// announces where it keeps every reader's piece, and each reader fetches its
// pieces, in rank order, then tells the owner it is done reading.
#include <cstring>
#include <string>
#include <vector>

#include "ops/collective/call.h"

namespace hpshmem::ops {
namespace {

using namespace collective;

Status Mismatch(int sender, int receiver, int64_t n, int64_t want) {
  return Status::CollectiveMismatch("shmem_alltoall: rank " + std::to_string(sender) + " sends " + std::to_string(n) +
                                    " elements to rank " + std::to_string(receiver) + ", whose receive_list expects " +
                                    std::to_string(want));
}

// Push alltoall. Every rank puts into each peer's slot a header saying what
// it sends that peer, what it expects from it and where that piece goes in
// its receive buffer, followed by the piece itself when it fits (eager).
// Then, per peer, once its header is here: as a sender, a piece too large for
// the slot goes straight into the peer's receive buffer (with an arrival); as
// a receiver, an eager piece is copied out of the slot. Both sides see both
// counts, so a size mismatch fails both ranks of the pair (the sender still
// arrives, without data: nobody hangs) and nothing is written out of place.
Status AlltoallPush(const CollectiveCall& call, const void* const* sends, const int64_t* send_elems, char* recv,
                    const int64_t* recv_elems, size_t itemsize, int block_dim) {
  const int me = call.me, members = call.members;
  std::vector<int64_t> before(members + 1, 0);  // byte offset of each source's piece in our receive buffer
  for (int q = 0; q < members; ++q) before[q + 1] = before[q] + recv_elems[q] * static_cast<int64_t>(itemsize);
  auto eager = [&](int64_t n) { return static_cast<size_t>(n) * itemsize <= call.eager_bytes; };
  const int64_t epoch = ++call.counters->epoch;
  for (int k = 1; k < members; ++k) {
    int p = (me + k) % members;
    int64_t n = send_elems[p];
    EagerHeader header{epoch, n, before[p], recv_elems[p]};
    HPSHMEM_RETURN_IF_ERROR(PutSlot(call, p, header, sends[p], eager(n) ? n * itemsize : 0));
  }
  HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + me, kWord, epoch, SignalOp::kSet, call.GlobalRank(me)));
  Status bad;
  if (send_elems[me] != recv_elems[me])
    bad = Mismatch(call.GlobalRank(me), call.GlobalRank(me), send_elems[me], recv_elems[me]);
  else if (send_elems[me])
    HPSHMEM_RETURN_IF_ERROR(
        ops::PutMem(recv + before[me], sends[me], send_elems[me] * itemsize, call.GlobalRank(me), block_dim));
  int64_t incoming = 0;
  for (int k = 1; k < members; ++k) {
    int p = (me + k) % members;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    const EagerHeader& header = SlotHeader(call, p, epoch);
    if (header.epoch != epoch) {
      return Status::CollectiveMismatch("shmem_alltoall: rank " + std::to_string(call.GlobalRank(p)) +
                                        " entered another collective (or pull mode) where rank " +
                                        std::to_string(call.GlobalRank(me)) + " called a push alltoall");
    }
    int64_t n = send_elems[p];  // ours to p
    if (n != header.want) {
      if (bad.ok()) bad = Mismatch(call.GlobalRank(me), call.GlobalRank(p), n, header.want);
      if (!eager(n))
        HPSHMEM_RETURN_IF_ERROR(
            Signal(call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
    } else if (!eager(n)) {
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(recv + header.place, sends[p], n * itemsize,
                                                call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd,
                                                call.GlobalRank(p), block_dim));
    }
    int64_t m = header.count;  // p's to us
    if (!eager(m)) ++incoming;
    if (m != recv_elems[p]) {
      if (bad.ok()) bad = Mismatch(call.GlobalRank(p), call.GlobalRank(me), m, recv_elems[p]);
    } else if (m && eager(m)) {
      std::memcpy(recv + before[p], SlotData(call, p, epoch), m * itemsize);
    }
  }
  if (incoming) HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, incoming));
  return bad;
}

}  // namespace

Status Alltoall(const void* const* sends, const int64_t* send_elems, void* recv, const int64_t* recv_elems,
                size_t itemsize, bool pull, int block_dim, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  const CollectiveLayout& layout = call.layout;
  const int me = call.me, members = call.members;
  auto* received = static_cast<char*>(recv);
  Status bad;
  int64_t epoch;
  if (!pull) return AlltoallPush(call, sends, send_elems, received, recv_elems, itemsize, block_dim);
  char* workspace = call.workspace;  // pieces are named by offset from the workspace base, the same on every rank
  HPSHMEM_RETURN_IF_ERROR(BeginPlaced(call, &epoch, [&](int p, int64_t* words) {
    words[0] = static_cast<const char*>(sends[p]) - workspace;
    words[1] = send_elems[p];
  }));
  size_t offset = 0;
  for (int p = 0; p < members; ++p) {
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    int64_t src_off = layout.place[2 * p], n = layout.place[2 * p + 1];
    if (n != recv_elems[p]) {
      if (bad.ok()) bad = Mismatch(p, me, n, recv_elems[p]);
      HPSHMEM_RETURN_IF_ERROR(Signal(call.AtMember(p, layout.mismatch), kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
    } else {
      HPSHMEM_RETURN_IF_ERROR(
          ops::GetMem(received + offset, workspace + src_off, n * itemsize, call.GlobalRank(p), block_dim));
    }
    offset += recv_elems[p] * itemsize;
    HPSHMEM_RETURN_IF_ERROR(Consumed(call, p));
  }
  // The caller may reuse its send tensors once we return: wait for every reader.
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(call, members));
  // Reports about this rank's sizes from its readers; taken in full either way, so
  // none is raised twice.
  int64_t seen = 0;
  HPSHMEM_RETURN_IF_ERROR(SignalFetch(layout.mismatch, kWord, &seen));
  bool reported = seen != call.counters->mismatch_seen;
  call.counters->mismatch_seen = seen;
  if (!bad.ok()) return bad;
  if (reported) {
    return Status::CollectiveMismatch("shmem_alltoall: rank " + std::to_string(me) +
                                      "'s receive sizes disagree with what its peers send");
  }
  return Status::OK();
}

}  // namespace hpshmem::ops
