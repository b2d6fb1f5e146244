// The barrier. When every rank shares this host, a central counter in rank
// 0's header: each rank waits once, for the last to arrive. Otherwise a
// dissemination barrier over the Signal verb, so it works through every
// transport: in round k each rank sets the round-k word of rank + 2^k and
// waits for its own, set by rank - 2^k. ceil(log2 n) rounds; across hosts
// that hold several ranks each, only one rank per host takes part and the
// others meet it through a central counter in its header (Runtime::barrier_ranks).
// Either way every word only grows, so barriers run back to back without resets.
#include "runtime.h"

namespace hpshmem {
namespace {

// A wait's condition on a central counter: `word` has reached `value`; then
// the writes of the ranks counted in it are visible here.
auto Reached(uint64_t* word, uint64_t value) {
  return [word, value] {
    bool done = std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire) >= value;
    if (done) CrossProcessAcquire();
    return done;
  };
}

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
    CrossProcessRelease();
    if (std::atomic_ref<uint64_t>(h0->central_arrived).fetch_add(1, std::memory_order_seq_cst) + 1 ==
        static_cast<uint64_t>(epoch) * n) {
      std::atomic_ref<uint64_t>(h0->central_released).store(epoch, std::memory_order_seq_cst);
      Notify(&h0->control);
      return Status::OK();
    }
    auto describe = [&] { return "barrier #" + std::to_string(epoch) + " (waiting for every rank to arrive)"; };
    Status s = WaitLoop(rt, &h0->control, Reached(&h0->central_released, epoch), describe);
    return s.ok() ? s : fail(s);
  }
  // Across hosts with several ranks on a host: the host's ranks arrive at
  // its leader's central counter (shared memory), the leaders alone run the
  // dissemination, and each releases its host's ranks. One message per
  // leader and round crosses the network instead of one per rank: with 2
  // ranks on each of 2 hosts, 2 messages in one round instead of 6 in two.
  // The waits for the host's ranks do not poll the network: nothing they
  // wait for comes from it, and with more ranks than cores a poller only
  // takes the time of the leader that does (4 ranks across simulated hosts:
  // 12-14 us a barrier instead of 17-20).
  const bool grouped = rt->host_ranks > 1;
  PeHeader* lead = nullptr;
  if (grouped) {
    const int l = rt->leader;
    lead = l == me ? rt->header() : reinterpret_cast<PeHeader*>(rt->route[l]->Segment(l));
    const uint64_t all = static_cast<uint64_t>(epoch) * rt->host_ranks;
    CrossProcessRelease();
    const uint64_t now = std::atomic_ref<uint64_t>(lead->central_arrived).fetch_add(1, std::memory_order_seq_cst) + 1;
    if (me != l) {
      if (now == all) Notify(&lead->control);  // the leader waits for the last of its host's ranks
      auto describe = [&] {
        return "barrier #" + std::to_string(epoch) + " (waiting for rank " + std::to_string(l) +
               ", which gathers this host's ranks, to hear from the other hosts)";
      };
      Status s = WaitLoop(rt, &lead->control, Reached(&lead->central_released, epoch), describe, nullptr, nullptr,
                          /*poll=*/false);
      return s.ok() ? s : fail(s);
    }
    auto describe = [&] {
      return "barrier #" + std::to_string(epoch) + " (waiting for this host's " + std::to_string(rt->host_ranks) +
             " ranks to arrive)";
    };
    Status s =
        WaitLoop(rt, &lead->control, Reached(&lead->central_arrived, all), describe, nullptr, nullptr, /*poll=*/false);
    if (!s.ok()) return fail(s);
  }
  // The dissemination, over every rank or over the leaders.
  const std::vector<int>& among = rt->barrier_ranks;
  const int m = static_cast<int>(among.size()), pos = rt->barrier_pos;
  for (int k = 0, dist = 1; dist < m; ++k, dist *= 2) {
    int to = among[(pos + dist) % m], from = among[(pos - dist + m) % m];
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
  if (grouped) {
    std::atomic_ref<uint64_t>(lead->central_released).store(epoch, std::memory_order_seq_cst);
    Notify(&lead->control);
  }
  return Status::OK();
}

}  // namespace hpshmem
