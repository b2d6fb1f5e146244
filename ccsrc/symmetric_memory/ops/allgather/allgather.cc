// Allgather over one-sided puts and gets; the protocol is described in ops.h.
// Push: the owner of the data writes it into every peer and bumps the peer's
// arrival counter (small pieces ride in the eager slots). Pull: the owner
// announces the call (its data is in place) and each consumer reads the
// pieces itself, in rank order, then tells the owner it is done reading.
// When some host holds several members, a pushed piece crosses to each other
// host once (AllgatherByHost).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/collective/call.h"

namespace hpshmem::ops {
namespace {

using namespace collective;

// Across hosts a pushed piece past one slot goes through the slots in steps
// up to this many bytes, past which it is announced. Measured on two real
// hosts against the announced path, which sent pieces up to 1 MiB ahead of
// the target's announcement for it to hold: 2 ranks 64 KiB 45-50 against
// 207-221 us, 1 MiB 0.88-0.90 against 1.53-1.58 ms, 16 MiB 12.9-13.8 against
// 18-32 ms; 4 ranks 64 KiB 195-252 against 859-1205 us, 16 MiB 61-64 against
// 73 ms.
constexpr size_t kStepsMax = size_t{16} << 20;

// From these sizes a pushed allgather across hosts goes by host
// (AllgatherByHost): when some host holds several members, and between two
// members on two hosts, where its chunked puts beat the eager steps (two real
// hosts, 256 KiB to 16 MiB: 1.4-2.6x faster).
constexpr size_t kByHostFromBytes = size_t{64} << 10;
constexpr size_t kPairByHostFromBytes = size_t{256} << 10;

thread_local Scratch t_piece;                        // our piece, when `in` overlaps the output where others' go
thread_local std::vector<int> t_targets, t_senders;  // AllgatherByHost's, per call
thread_local HostPlan t_plan;

Status SizeMismatch(const CollectiveCall& call, int p, int64_t theirs, size_t mine) {
  return Status::CollectiveMismatch(
      "shmem_allgather: ranks pass different sizes: rank " + std::to_string(call.GlobalRank(call.me)) + " " +
      std::to_string(mine) + " bytes, rank " + std::to_string(call.GlobalRank(p)) + " " +
      (theirs >= 0 ? std::to_string(theirs) : "more than " + std::to_string(call.eager_bytes)) + " bytes");
}

// The first step of AllgatherEager and AllgatherByHost: our header, with `n`
// bytes of our piece (or none), into every peer's slot; then each peer's
// header of this epoch, read. A peer whose size differs fails the call (*bad
// keeps the first); where it will write nothing into our output
// (`writes_nothing(its header)`), an arrival each way stands in for the data.
// Returns once those arrivals are in.
template <typename WritesNothing>
Status ExchangeSizes(const CollectiveCall& call, int64_t epoch, size_t bytes, const char* piece, size_t n, Status* bad,
                     WritesNothing writes_nothing) {
  const int me = call.me, members = call.members;
  const EagerHeader header{epoch, static_cast<int64_t>(bytes), 0, 0};
  for (int k = 1; k < members; ++k) HPSHMEM_RETURN_IF_ERROR(PutSlot(call, (me + k) % members, header, piece, n));
  HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + me, kWord, epoch, SignalOp::kSet, call.GlobalRank(me)));
  int64_t traded = 0;
  for (int k = 1; k < members; ++k) {
    const int p = (me + k) % members;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
    const EagerHeader& got = SlotHeader(call, p, epoch);
    if (got.epoch == epoch && got.count == static_cast<int64_t>(bytes)) continue;
    if (bad->ok()) *bad = SizeMismatch(call, p, got.epoch == epoch ? got.count : -1, bytes);
    if (writes_nothing(got)) {
      HPSHMEM_RETURN_IF_ERROR(
          Signal(call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
      ++traded;
    }
  }
  return traded ? WaitArrivals(call, traded) : Status::OK();
}

// Allgather through the eager slots: each rank puts its piece into every
// peer's slot without waiting for anyone, then collects what the peers put
// into its own slots; a piece larger than a slot goes a slot at a time, one
// call epoch per step. One wait per peer and step, none of them for a peer's
// permission: when ranks outnumber cores, a rank that runs gets its whole
// share of a step done before it yields. Every header carries the whole
// call's size, so the first step compares the calls.
Status AllgatherEager(const CollectiveCall& call, char* output, const void* in, size_t bytes) {
  const int me = call.me, members = call.members;
  const char* src = static_cast<const char*>(in);
  char* const mine = output + me * bytes;
  const bool steps = bytes > call.eager_bytes;
  for (size_t first = 0; first == 0 || first < bytes; first += call.eager_bytes) {
    const size_t n = std::min(call.eager_bytes, bytes - first);
    const int64_t epoch = ++call.counters->epoch;
    Status bad;
    // p's piece did not fit one slot, or ours did not (or p is in pull mode):
    // p puts nothing into our output once it sees our size. (Two ranks whose
    // pieces both fit one slot see each other's and need nothing more.)
    HPSHMEM_RETURN_IF_ERROR(ExchangeSizes(call, epoch, bytes, src + first, n, &bad, [&](const EagerHeader& got) {
      return got.epoch != epoch || static_cast<size_t>(got.count) > call.eager_bytes || steps;
    }));
    if (!bad.ok()) return bad;  // the output stays as it was (only the first step can disagree)
    if (first == 0 && src != mine) {
      // Our piece now, and later steps read it there: `in` may overlap
      // the output elsewhere, where the peers' pieces go.
      std::memmove(mine, src, bytes);
      src = mine;
    }
    // Every piece of this step is here (and stays: a peer rewrites this
    // parity's slot only two epochs on, after we have entered the next).
    for (int p = 0; p < members; ++p)
      if (p != me) std::memcpy(output + p * bytes + first, SlotData(call, p, epoch), n);
  }
  return Status::OK();
}

// Allgather when some host holds several members (or between two members on
// two hosts): each piece crosses to every other host once, where the other
// paths send it to every member there. The member with index i among its
// host's k members puts its piece, chunk by chunk, into the member with index
// i mod k' of each other host (of k' members), and copies it into its
// host-mates' outputs; it copies on into them the pieces put into it. With one such sender (two hosts of equal size)
// each chunk goes on as it arrives (one arrival per chunk, in order on one
// route); with several, once all have arrived, as arrivals only count. Only
// puts over the network count as arrivals, host-mates' copies apart
// (relayed). All agree first, one header per peer pair as the eager path's
// first step (a disagreement fails alike, whichever path each took), before
// anything is written.
Status AllgatherByHost(const CollectiveCall& call, char* output, const char* in, size_t bytes, const HostPlan& plan) {
  const int me = call.me, members = call.members;
  char* const own = output + me * bytes;
  // Peers write into the output from their first header on: our piece must not be there.
  if (in != own && in < output + members * bytes && output < in + bytes) {
    char* copy = t_piece.Get(bytes);
    std::memcpy(copy, in, bytes);
    in = copy;
  }
  Status bad;
  // As AllgatherEager with a piece past a slot: a peer that disagrees writes nothing into our output.
  HPSHMEM_RETURN_IF_ERROR(
      ExchangeSizes(call, ++call.counters->epoch, bytes, nullptr, 0, &bad, [](const EagerHeader&) { return true; }));
  if (!bad.ok()) return bad;

  const int mine = plan.host_of[me], index = plan.index_of[me];
  const std::vector<int>& host = plan.hosts[mine];
  // Where member p keeps `at`, a place in our output, on this host.
  auto at_member = [&](const char* at, int p) { return static_cast<char*>(hpshmem::Ptr(at, call.GlobalRank(p))); };
  for (int p : host)
    if (p != me && !at_member(own, p))
      return Status::Internal("shmem_allgather: a host-mate's output is not mapped here");
  t_targets.clear();
  t_senders.clear();
  for (size_t h = 0; h < plan.hosts.size(); ++h) {
    if (static_cast<int>(h) == mine) continue;
    const std::vector<int>& other = plan.hosts[h];
    t_targets.push_back(other[index % other.size()]);
    for (size_t j = index; j < other.size(); j += host.size()) t_senders.push_back(other[j]);
  }
  // Chunks as BroadcastByHost's: our copying overlaps the wire, the signals cost little.
  const size_t chunk = std::clamp<size_t>(bytes / 8, size_t{256} << 10, size_t{2} << 20);
  const bool as_it_arrives = t_senders.size() == 1;
  auto forward = [&](int from, size_t off, size_t n) {
    char* at = output + from * bytes + off;
    for (int p : host)
      if (p != me) std::memcpy(at_member(at, p), at, n);
  };
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    for (int p : t_targets)
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(own + off, in + off, n, call.AtMember(p, call.layout.arrivals), kWord,
                                                1, SignalOp::kAdd, call.GlobalRank(p)));
    for (int p : host)
      if (p != me) std::memcpy(at_member(own + off, p), in + off, n);
    if (in != own) std::memcpy(own + off, in + off, n);
    if (as_it_arrives) {
      HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, 1));  // our sender's chunk at the same offset
      forward(t_senders[0], off, n);
    }
  }
  if (!as_it_arrives && !t_senders.empty()) {
    const int64_t chunks = static_cast<int64_t>((bytes + chunk - 1) / chunk);
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, chunks * static_cast<int64_t>(t_senders.size())));
    for (int from : t_senders) forward(from, 0, bytes);
  }
  for (int p : host)
    if (p != me) HPSHMEM_RETURN_IF_ERROR(Relayed(call, p));
  return WaitRelayed(call, static_cast<int64_t>(host.size()) - 1);
}

}  // namespace

Status Allgather(void* out, const void* in, size_t bytes, bool pull, int block_dim, int team) {
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  const int me = call.me, members = call.members;
  auto* output = static_cast<char*>(out);
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(call, 0));  // peers may still read our slot from a pull call
  if (!pull && bytes >= kByHostFromBytes && bytes > call.eager_bytes && SpansHosts(call) && PlanHosts(call, &t_plan) &&
      (t_plan.AnyShared() || (members == 2 && bytes >= kPairByHostFromBytes)))
    return AllgatherByHost(call, output, static_cast<const char*>(in), bytes, t_plan);
  if (!pull && (bytes <= call.eager_bytes || (bytes <= kStepsMax && SpansHosts(call))))
    return AllgatherEager(call, output, in, bytes);
  if (in != output + me * bytes)
    HPSHMEM_RETURN_IF_ERROR(ops::PutMem(output + me * bytes, in, bytes, call.GlobalRank(me), block_dim));
  int64_t epoch;
  if (pull) {
    HPSHMEM_RETURN_IF_ERROR(Begin(call, &epoch));
  } else {
    // Announced with our size in each peer's slot: a peer whose size
    // differs fails instead of writing past our output or hanging.
    epoch = ++call.counters->epoch;
    for (int k = 1; k < members; ++k)
      HPSHMEM_RETURN_IF_ERROR(
          PutSlot(call, (me + k) % members, {epoch, static_cast<int64_t>(bytes), 0, 0}, nullptr, 0));
    HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + me, kWord, epoch, SignalOp::kSet, call.GlobalRank(me)));
  }
  // A peer whose header for this call is here with another size.
  auto differs = [&](int p) {
    const EagerHeader& header = SlotHeader(call, p, epoch);
    return header.epoch == epoch && header.count != static_cast<int64_t>(bytes);
  };
  if (!pull) {
    Status bad;
    for (int k = 1; k < members; ++k) {  // rotated start spreads the traffic over the peers
      int p = (me + k) % members;
      HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch));
      if (differs(p)) {
        // Nothing goes into p's output; an arrival stands in for the data
        // (p sends us one too).
        if (bad.ok()) bad = SizeMismatch(call, p, SlotHeader(call, p, epoch).count, bytes);
        HPSHMEM_RETURN_IF_ERROR(
            Signal(call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
        continue;
      }
      // From our place in the output, not from `in`: `in` may lie where a peer's piece is landing.
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(output + me * bytes, output + me * bytes, bytes,
                                                call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd,
                                                call.GlobalRank(p), block_dim));
    }
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, members - 1));
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
