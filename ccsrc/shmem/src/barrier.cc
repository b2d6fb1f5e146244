// A dissemination barrier over the Signal verb, so it works through every
// transport: in round k each rank sets the round-k word of rank + 2^k and
// waits for its own, set by rank - 2^k. ceil(log2 n) rounds; every word has
// one writer and only grows, so barriers run back to back without resets.
#include "runtime.h"

namespace hpshmem {

Status Barrier() {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("Barrier");
  // A barrier can never complete once a rank is gone; failing at entry also
  // keeps a failed job's stray arrivals from completing a later barrier.
  if (rt->lost_count.load(std::memory_order_acquire) > 0) {
    return Status::PeerDead("rank " + std::to_string(rt->rank) + ": barrier #" + std::to_string(rt->barrier_epoch + 1) +
                            " cannot complete: rank(s) " + rt->LostRanks() + " exited or were killed");
  }
  // Everything this rank did before the barrier is complete at its targets
  // before any rank leaves it: remote updates by a quiet; shared-memory ones
  // by the fence every shared-memory signal makes (so no second one here).
  if (rt->ucx) HPSHMEM_RETURN_IF_ERROR(rt->ucx->Quiet());
  const int64_t epoch = static_cast<int64_t>(++rt->barrier_epoch);
  const int n = rt->nranks, me = rt->rank;
  for (int k = 0, dist = 1; dist < n; ++k, dist *= 2) {
    int to = (me + dist) % n, from = (me - dist + n) % n;
    HPSHMEM_RETURN_IF_ERROR(
        rt->route[to]->ProtocolSignal(to, BarrierRoundOffset(k), SignalType::kInt64, SignalOp::kSet, epoch));
    const uint64_t* word = &rt->header()->barrier_round[k];
    auto ready = [&] { return LoadSignal(word, SignalType::kInt64) >= epoch; };
    auto describe = [&] {
      return "barrier #" + std::to_string(epoch) + " (round " + std::to_string(k + 1) + ": waiting for rank " +
             std::to_string(from) + ", or a rank it waits for, to arrive)";
    };
    HPSHMEM_RETURN_IF_ERROR(WaitLoop(rt, &rt->header()->control, ready, describe));
  }
  return Status::OK();
}

}  // namespace hpshmem
