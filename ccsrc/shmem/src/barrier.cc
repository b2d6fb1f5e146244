// The barrier. When every rank shares this host, a central counter in rank
// 0's header: each rank waits once, for the last to arrive. Otherwise a
// dissemination barrier over the Signal verb, so it works through every
// transport: in round k each rank sets the round-k word of rank + 2^k and
// waits for its own, set by rank - 2^k. ceil(log2 n) rounds. Either way every
// word only grows, so barriers run back to back without resets.
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
  std::string out =
      "rank(s) that have not entered it: " + (missing.empty() ? std::string("none of this host") : missing);
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
                            " cannot complete: " + rt->LossText());
  }
  // Everything this rank did before the barrier is complete at its targets
  // before any rank leaves it: each transport's BarrierQuiet (remote updates
  // by a quiet; shared-memory ones by the fence that every shared-memory
  // signal makes, so no second one there).
  if (rt->broken_flag.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lk(rt->broken_mu);
    if (!rt->broken.empty()) {
      return Status::CollectiveMismatch("rank " + std::to_string(rt->rank) + ": barrier #" +
                                        std::to_string(rt->barrier_epoch + 1) +
                                        " refused: an earlier barrier failed on this rank (" + rt->broken +
                                        "), so its arrival may count in the wrong barrier on the other ranks");
    }
  }
  for (auto& t : rt->transports) HPSHMEM_RETURN_IF_ERROR(t->BarrierQuiet());
  const int64_t epoch = static_cast<int64_t>(++rt->barrier_epoch);
  const int n = rt->nranks, me = rt->rank;
  std::atomic_ref<uint64_t>(rt->header()->barrier_entered).store(epoch, std::memory_order_release);
  auto fail = [&](Status s) {
    if (s.code() == Code::kTimeout) s = Status::Timeout(s.message() + "; " + Missing(rt, epoch));
    std::lock_guard<std::mutex> lk(rt->broken_mu);
    rt->broken = "barrier #" + std::to_string(epoch) + ": " + CodeName(s.code());
    rt->broken_flag.store(true, std::memory_order_release);
    return s;
  };
  if (rt->all_mapped && n > 1) {
    // Every rank maps rank 0's header: the central barrier. The seq_cst add
    // also orders this rank's earlier shared-memory writes before its arrival.
    auto* h0 = reinterpret_cast<PeHeader*>(rt->route[0]->Segment(0));
    std::atomic_ref<uint64_t> arrived(h0->central_arrived), released(h0->central_released);
    CrossProcessRelease();
    if (arrived.fetch_add(1, std::memory_order_seq_cst) + 1 == static_cast<uint64_t>(epoch) * n) {
      released.store(epoch, std::memory_order_seq_cst);
      Notify(&h0->control);
      return Status::OK();
    }
    auto ready = [&] {
      bool done = released.load(std::memory_order_acquire) >= static_cast<uint64_t>(epoch);
      if (done) CrossProcessAcquire();
      return done;
    };
    auto describe = [&] { return "barrier #" + std::to_string(epoch) + " (waiting for every rank to arrive)"; };
    Status s = WaitLoop(rt, &h0->control, ready, describe);
    return s.ok() ? s : fail(s);
  }
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
    if (!s.ok()) return fail(s);
  }
  return Status::OK();
}

}  // namespace hpshmem
