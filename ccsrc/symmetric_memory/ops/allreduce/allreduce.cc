// Allreduce: every member reduces every member's values in team-rank order
// (ops.h), one-shot (each reduces the whole tensor) or two-shot (each reduces
// its block, then puts it into every member's block); across hosts, up to an
// eager slot, every member sends its values to every peer (ReduceEager), and
// up to kAllreduceStepsMaxBytes two-shot's halves go as eager steps (AllreduceInSteps);
// when the hosts hold ranges of consecutive team ranks, one several, from
// kByHostFromBytes, each host's partial goes on to the next and the result
// comes back, crossing between neighbouring hosts once each way (AllreduceByHost).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/collective/call.h"
#include "ops/reduce/reduce.h"

namespace hpshmem::ops {
namespace {

using namespace collective;

thread_local Scratch t_result;  // the one-shot result; AllreduceByHost: a later host leader's own values
thread_local std::vector<const void*> t_blocks;

// From this size an allreduce across hosts whose members form ranges of
// consecutive team ranks, one host holding several, goes by host
// (AllreduceByHost); below, AllreduceInSteps' messages in both directions at
// once beat the chain's crossings one after the other.
constexpr size_t kByHostFromBytes = size_t{256} << 10;

thread_local HostPlan t_plan;

// Where an allreduce can go by host: every host's members are a range of
// consecutive team ranks (hosts in the order of their ranges, as PlanHosts
// lists them), so that carrying each host's partial on to the next keeps the
// sum in team-rank order, and some host holds several members — or there
// are two hosts of one member each, where the chain's chunked puts beat the
// eager steps too (two real hosts, 256 KiB to 4 MiB: 1.1-1.8x faster).
bool PlanChain(const CollectiveCall& call, HostPlan* plan) {
  if (call.members < 2 || !PlanHosts(call, plan) || plan->hosts.size() < 2) return false;
  if (!plan->AnyShared() && plan->hosts.size() != 2) return false;
  int next = 0;
  for (const auto& host : plan->hosts)
    for (int p : host)
      if (p != next++) return false;
  return true;
}

// Allreduce along the chain of hosts (PlanChain): the first member of each
// host (its leader) reads its host-mates' values in place. Chunk by chunk,
// the first host's leader reduces its host's values into its buffer and puts
// that partial into the next leader's buffer; each leader adds its own host's
// values to what it receives, in team-rank order, and puts it on, so that the
// last one holds the result, with the bits of a sum over all members in order
// (accumulators are the element type: half precision, accumulated in float32,
// does not come here). The result goes back leader by leader, and each
// leader tells its host-mates of each result chunk; they copy it from its
// buffer. The tensor crosses between neighbouring hosts once each way, where
// AllreduceInSteps sends every member's share to every member of every other
// host. Partials count as arrivals, results coming back as relayed. All agree
// first, through one header per peer pair (the eager calls' first step),
// before anything is written. Host-mates bring their values into `data` and
// tell their leader (its consumed count), and tell it again once they have
// copied the result.
Status AllreduceByHost(const CollectiveCall& call, char* data, const char* in, size_t count, DType dtype, ReduceOp op,
                       int64_t packed, const HostPlan& plan, const char* what) {
  const int me = call.me, members = call.members;
  const size_t item = DTypeSize(dtype), bytes = count * item;
  const int h = plan.host_of[me], last = static_cast<int>(plan.hosts.size()) - 1;
  const std::vector<int>& host = plan.hosts[h];
  const int leader = host.front(), mates = static_cast<int>(host.size()) - 1;
  // A leader past the first receives the partial into `data`: its own values must be elsewhere first.
  if (me == leader && h > 0 && in == data) {
    char* own = t_result.Get(bytes);
    if (bytes) std::memcpy(own, data, bytes);
    in = own;
  }
  int64_t epoch;
  HPSHMEM_RETURN_IF_ERROR(
      ExchangeEager(call, static_cast<int64_t>(count), packed, [](int) { return Piece{nullptr, 0}; }, &epoch, what));
  // Chunks small enough that the next host's work overlaps this one's and the
  // wire, large enough that the signals between them cost little (as
  // BroadcastByHost's; 64 KiB chunks measured slower from 256 KiB to 1 MiB).
  const size_t chunk = std::clamp<size_t>(bytes / 8, size_t{256} << 10, size_t{2} << 20) / item * item;
  if (me != leader) {
    if (in != data && bytes) std::memmove(data, in, bytes);
    HPSHMEM_RETURN_IF_ERROR(Consumed(call, leader));                  // our values are in `data`
    return CopyChunksAsTheyArrive(call, data, bytes, chunk, leader);  // the result, chunk by chunk
  }
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(call, mates));  // every host-mate's values are in its `data`
  t_blocks.resize(mates + 2);
  auto mates_from = [&](size_t off, int at) {
    for (int k = 1; k <= mates; ++k) {
      const void* direct = hpshmem::Ptr(data + off, call.GlobalRank(host[k]));
      if (!direct) return Status::Internal(std::string(what) + ": a host-mate's buffer is not mapped here");
      t_blocks[at++] = direct;
    }
    return Status::OK();
  };
  auto tell_mates = [&]() {
    for (int k = 1; k <= mates; ++k)
      HPSHMEM_RETURN_IF_ERROR(
          Signal(call.AtMember(host[k], call.layout.arrivals), kWord, 1, SignalOp::kAdd, call.GlobalRank(host[k])));
    return Status::OK();
  };
  // Partials of a sum-then-divide stay sums; the last leader divides.
  const ReduceOp step_op = h < last ? (op == ReduceOp::kAvg ? ReduceOp::kSum : op) : op;
  const int up = h < last ? plan.hosts[h + 1].front() : -1, down = h > 0 ? plan.hosts[h - 1].front() : -1;
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    int at = 0;
    if (h > 0) {
      HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, 1));  // the partial of the hosts before, in `data`
      t_blocks[at++] = data + off;
    }
    t_blocks[at++] = in + off;
    HPSHMEM_RETURN_IF_ERROR(mates_from(off, at));
    HPSHMEM_RETURN_IF_ERROR(ReduceInto(data + off, t_blocks.data(), at + mates, n / item, dtype, step_op, members));
    if (h < last) {
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(data + off, data + off, n, call.AtMember(up, call.layout.arrivals),
                                                kWord, 1, SignalOp::kAdd, call.GlobalRank(up)));
    } else {
      if (down >= 0)
        HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(data + off, data + off, n, call.AtMember(down, call.layout.relayed),
                                                  kWord, 1, SignalOp::kAdd, call.GlobalRank(down)));
      HPSHMEM_RETURN_IF_ERROR(tell_mates());
    }
  }
  if (h < last) {
    for (size_t off = 0; off < bytes; off += chunk) {
      HPSHMEM_RETURN_IF_ERROR(WaitRelayed(call, 1));  // the result, in `data`
      if (down >= 0)
        HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(data + off, data + off, std::min(chunk, bytes - off),
                                                  call.AtMember(down, call.layout.relayed), kWord, 1, SignalOp::kAdd,
                                                  call.GlobalRank(down)));
      HPSHMEM_RETURN_IF_ERROR(tell_mates());
    }
  }
  return WaitConsumed(call, mates);  // host-mates have copied the result
}

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
  if (algorithm_was_auto && bytes >= kByHostFromBytes && SpansHosts(call) && dtype != DType::kFloat16 &&
      dtype != DType::kBFloat16 && PlanChain(call, &t_plan)) {
    return AllreduceByHost(call, buffer, src ? static_cast<const char*>(src) : buffer, count, dtype, op,
                           Pack(static_cast<int>(dtype), static_cast<int>(op), Place(call, buffer) << 24), t_plan,
                           what);
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
