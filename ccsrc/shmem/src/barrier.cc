// A dissemination barrier over the Signal verb, so it works through every
// transport: in round k each rank sets the round-k word of rank + 2^k and
// waits for its own, set by rank - 2^k. ceil(log2 n) rounds; every word has
// one writer and only grows, so barriers run back to back without resets.
#include "runtime.h"

namespace hpshmem {
namespace {

// Which ranks have not entered barrier `epoch`, as far as this rank can see:
// same-host ranks' headers are read directly (a stopped rank cannot answer a
// message); ranks on other hosts are named as unknown.
std::string Missing(Runtime* rt, int64_t epoch) {
  std::string missing, unknown;
  for (int p = 0; p < rt->nranks; ++p) {
    uint8_t* seg = rt->route[p]->Segment(p);
    if (!seg) {
      unknown += (unknown.empty() ? "" : ", ") + std::to_string(p);
      continue;
    }
    auto* h = reinterpret_cast<PeHeader*>(seg);
    if (std::atomic_ref<uint64_t>(h->barrier_entered).load(std::memory_order_acquire) < static_cast<uint64_t>(epoch))
      missing += (missing.empty() ? "" : ", ") + std::to_string(p);
  }
  std::string out = "rank(s) that have not entered it: " + (missing.empty() ? std::string("none of this host") : missing);
  if (!unknown.empty()) out += "; on other hosts, not known: " + unknown;
  return out;
}

}  // namespace

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
  if (rt->broken_flag.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lk(rt->broken_mu);
    if (!rt->broken.empty()) {
      return Status::CollectiveMismatch("rank " + std::to_string(rt->rank) + ": barrier #" +
                                        std::to_string(rt->barrier_epoch + 1) +
                                        " refused: an earlier barrier failed on this rank (" + rt->broken +
                                        "), so its arrival may count in the wrong barrier on the other ranks");
    }
  }
  if (rt->ucx) HPSHMEM_RETURN_IF_ERROR(rt->ucx->Quiet());
  const int64_t epoch = static_cast<int64_t>(++rt->barrier_epoch);
  const int n = rt->nranks, me = rt->rank;
  std::atomic_ref<uint64_t>(rt->header()->barrier_entered).store(epoch, std::memory_order_release);
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
    Status s = WaitLoop(rt, &rt->header()->control, ready, describe);
    if (!s.ok()) {
      if (s.code() == Code::kTimeout) s = Status::Timeout(s.message() + "; " + Missing(rt, epoch));
      std::lock_guard<std::mutex> lk(rt->broken_mu);
      rt->broken = "barrier #" + std::to_string(epoch) + ": " + CodeName(s.code());
      rt->broken_flag.store(true, std::memory_order_release);
      return s;
    }
  }
  return Status::OK();
}

}  // namespace hpshmem
