// Broadcast: the root puts its data into every member (after all agree on
// size and root); across hosts, up to an eager slot, into every member's slot
// while the members agree (BroadcastEager), and up to kBroadcastStepsMaxBytes as
// scatters then allgathers through the slots (BroadcastInSteps); when a host
// other than the root's holds several members, from kByHostFromBytes, to each
// host once (BroadcastEagerByHost, BroadcastByHost); or, for small data, into
// every member's eager slot without waiting for them (BroadcastSmall, ops.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/collective/call.h"

namespace hpshmem::ops {

using namespace collective;

namespace {

// From this size a broadcast across hosts whose members share hosts sends the
// data to each host once (BroadcastByHost); below, the extra hop within a host
// costs more than the bytes it keeps off the wire.
constexpr size_t kByHostFromBytes = size_t{16} << 10;

// Broadcast of at most an eager slot across hosts: the root puts the data
// into every member's slot, each other member its header alone, all at once;
// every member checks every header (so each has entered: none is still reading
// a slot that the next call but one rewrites), and copies the root's data.
// One message from the root, where the announced path pays an announcement,
// the data and a release.
Status BroadcastEager(const CollectiveCall& call, char* data, const void* from, size_t bytes, int root, int64_t packed,
                      const char* what) {
  int64_t epoch;
  const Piece piece{static_cast<const char*>(from), call.me == root ? bytes : 0};
  HPSHMEM_RETURN_IF_ERROR(
      ExchangeEager(call, static_cast<int64_t>(bytes), packed, [&](int) { return piece; }, &epoch, what));
  if (call.me != root && bytes) std::memcpy(data, SlotData(call, root, epoch), bytes);
  return Status::OK();
}

// Broadcast across hosts past one slot, up to kBroadcastStepsMaxBytes, in chunks
// of up to a slot per member: the root puts piece p (1/W of the chunk) into
// member p's slot, the others their headers alone; then every member but the
// root puts its piece, and the root its own, into every other member's slot
// but the root's. The root sends the data about twice instead of W - 1 times,
// in two steps of one message per peer pair and chunk. Every header carries
// the whole call's (bytes, packed): the first step compares them.
Status BroadcastInSteps(const CollectiveCall& call, char* data, const char* from, size_t bytes, int root,
                        int64_t packed, const char* what) {
  const int me = call.me, members = call.members;
  const size_t chunk = members * call.eager_bytes;
  for (size_t first = 0; first < bytes; first += chunk) {
    const size_t n = std::min(chunk, bytes - first);
    char* out = data + first;
    const char* src = from + first;
    auto lo = [&](int p) { return n * p / members; };
    auto size = [&](int p) { return lo(p + 1) - lo(p); };
    int64_t epoch;
    HPSHMEM_RETURN_IF_ERROR(ExchangeEager(
        call, static_cast<int64_t>(bytes), packed,
        [&](int p) { return me == root ? Piece{src + lo(p), size(p)} : Piece{nullptr, 0}; }, &epoch, what));
    if (me != root && size(me)) std::memcpy(out + lo(me), SlotData(call, root, epoch), size(me));
    // Our piece is read from `data` now: a peer may rewrite the first step's slot once it has our second header.
    const Piece mine{me == root ? src + lo(me) : out + lo(me), size(me)};
    HPSHMEM_RETURN_IF_ERROR(ExchangeEager(
        call, static_cast<int64_t>(bytes), packed, [&](int p) { return p == root ? Piece{nullptr, 0} : mine; }, &epoch,
        what));
    if (me == root) continue;
    for (int p = 0; p < members; ++p)
      if (p != me && size(p)) std::memcpy(out + lo(p), SlotData(call, p, epoch), size(p));
  }
  return Status::OK();
}

// Who each member takes a broadcast from rooted at `root`, by host: the
// root for the members of its host, else the first member of their host,
// which takes it from the root. True when some host other than the root's
// holds several members, so that the data crosses to each host once
// (BroadcastByHost) where BroadcastInSteps and the announced path send it to
// every member. The same answer on every member (HostLeader).
bool PlanByHost(const CollectiveCall& call, int root, std::vector<int>* from) {
  const int members = call.members;
  std::unordered_map<int, int> first_of;  // host leader (global rank) -> its host's first member
  from->resize(members);
  bool saves = false;
  int root_host = hpshmem::HostLeader(call.GlobalRank(root));
  if (root_host < 0) return false;
  for (int p = 0; p < members; ++p) {
    const int host = hpshmem::HostLeader(call.GlobalRank(p));
    if (host < 0) return false;
    if (host == root_host) {
      (*from)[p] = root;
      continue;
    }
    auto [it, first] = first_of.emplace(host, p);
    (*from)[p] = first ? p : it->second;
    saves |= !first;
  }
  return saves;
}

// Broadcast across hosts past one slot when a host holds several members:
// the data crosses to each other host once, to its first member, which tells
// the others of its host chunk by chunk; they copy each chunk from its memory
// while the next is on the wire. The members of the root's host copy from the
// root's buffer when it holds the data (the root's header to them says so),
// else the root copies each chunk into them after sending it on. All agree
// first, through one header per peer pair (as the eager calls' first step, so
// members that disagree fail alike whichever path each took), before anything
// is written; a member whose memory others read waits until they are done.
Status BroadcastByHost(const CollectiveCall& call, char* data, const char* src, size_t bytes, int root, int64_t packed,
                       const std::vector<int>& from, const char* what) {
  const int me = call.me, members = call.members;
  const int64_t epoch = ++call.counters->epoch;
  for (int k = 1; k < members; ++k) {
    const int p = (me + k) % members;
    const int64_t readable = me == root && from[p] == root && src == data;  // the root's buffer holds the data
    HPSHMEM_RETURN_IF_ERROR(PutSlot(call, p, {epoch, static_cast<int64_t>(bytes), packed, readable}, nullptr, 0));
  }
  HPSHMEM_RETURN_IF_ERROR(AwaitEager(call, static_cast<int64_t>(bytes), packed, epoch, what));
  // Chunks: small enough that a host's copying overlaps the wire, large enough that the
  // signals between chunks cost little. Measured on two real hosts, 4 ranks: 64 KiB chunks
  // took 1.4x as long at 1-16 MiB, 128 KiB 1.2x; 256 KiB to 2 MiB within the noise.
  const size_t chunk = std::clamp<size_t>(bytes / 8, size_t{256} << 10, size_t{2} << 20);
  const int source = from[me];
  const bool pull_from_root = me == root ? src == data : source == root && SlotHeader(call, root, epoch).want == 1;
  int readers = 0;  // members that read this rank's memory
  for (int p = 0; p < members; ++p) readers += p != me && from[p] == me && (me != root || pull_from_root);
  if (me == root) {
    for (size_t off = 0; off < bytes; off += chunk) {
      const size_t n = std::min(chunk, bytes - off);
      for (int pass = 0; pass < (pull_from_root ? 1 : 2); ++pass) {  // the other hosts first: the wire is slower
        for (int k = 1; k < members; ++k) {
          const int p = (me + k) % members;
          if (pass == 0 ? from[p] != p : from[p] != root) continue;
          HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(data + off, src + off, n, call.AtMember(p, call.layout.arrivals),
                                                    kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
        }
      }
    }
    return WaitConsumed(call, readers);
  }
  if (source == root) {
    if (pull_from_root) {
      HPSHMEM_RETURN_IF_ERROR(hpshmem::GetMem(data, data, bytes, call.GlobalRank(root)));
      return Consumed(call, root);
    }
    return WaitArrivals(call, static_cast<int64_t>((bytes + chunk - 1) / chunk));  // the root's copy of each chunk
  }
  if (source != me) return CopyChunksAsTheyArrive(call, data, bytes, chunk, source);
  for (size_t off = 0; off < bytes; off += chunk) {
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, 1));
    for (int k = 1; k < members; ++k) {
      const int p = (me + k) % members;
      if (from[p] == me)
        HPSHMEM_RETURN_IF_ERROR(
            Signal(call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
    }
  }
  return WaitConsumed(call, readers);
}

// BroadcastByHost for at most an eager slot: the root's data goes, with its
// header, into the slots of the members of its host and of each other host's
// first member alone; once a first member has every header (so its host's
// members agreed), it copies the data from its slot into their buffers.
Status BroadcastEagerByHost(const CollectiveCall& call, char* data, const char* src, size_t bytes, int root,
                            int64_t packed, const std::vector<int>& from, const char* what) {
  const int me = call.me, members = call.members;
  int64_t epoch;
  const Piece piece{src, bytes}, none{nullptr, 0};
  HPSHMEM_RETURN_IF_ERROR(ExchangeEager(
      call, static_cast<int64_t>(bytes), packed,
      [&](int p) { return me == root && (from[p] == p || from[p] == root) ? piece : none; }, &epoch, what));
  if (me == root) return Status::OK();
  if (from[me] == me) {
    for (int k = 1; k < members; ++k) {
      const int p = (me + k) % members;
      if (from[p] == me)
        HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(data, SlotData(call, root, epoch), bytes,
                                                  call.AtMember(p, call.layout.arrivals), kWord, 1, SignalOp::kAdd,
                                                  call.GlobalRank(p)));
    }
  }
  if (from[me] == me || from[me] == root) {
    std::memcpy(data, SlotData(call, root, epoch), bytes);
    return Status::OK();
  }
  return WaitArrivals(call, 1);
}

}  // namespace

Status Broadcast(void* data, size_t bytes, int root, int team, const void* src) {
  const char* what = "shmem_broadcast";
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  if (root < 0 || root >= call.members) return CheckRank(root, call.members, "root");
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(call, 0));
  const int64_t packed = Pack(0, 0, Place(call, data) << 24 | root);
  if (call.members > 1 && SpansHosts(call) && bytes >= kByHostFromBytes) {
    std::vector<int> from;
    if (PlanByHost(call, root, &from)) {
      const char* source = static_cast<const char*>(src ? src : data);
      return bytes <= call.eager_bytes
                 ? BroadcastEagerByHost(call, static_cast<char*>(data), source, bytes, root, packed, from, what)
                 : BroadcastByHost(call, static_cast<char*>(data), source, bytes, root, packed, from, what);
    }
  }
  if (call.members > 1 && bytes <= call.eager_bytes && SpansHosts(call))
    return BroadcastEager(call, static_cast<char*>(data), src ? src : data, bytes, root, packed, what);
  if (call.members > 1 && bytes <= kBroadcastStepsMaxBytes && SpansHosts(call))
    return BroadcastInSteps(call, static_cast<char*>(data), static_cast<const char*>(src ? src : data), bytes, root,
                            packed, what);
  int64_t epoch;
  HPSHMEM_RETURN_IF_ERROR(BeginAgreed(call, &epoch, static_cast<int64_t>(bytes), packed, what));
  if (call.me == root) {
    for (int k = 1; k < call.members; ++k) {
      int p = (call.me + k) % call.members;
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(data, src ? src : data, bytes, call.AtMember(p, call.layout.arrivals),
                                                kWord, 1, SignalOp::kAdd, call.GlobalRank(p)));
    }
  } else {
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(call, 1));
  }
  // A rank that left now could overwrite the words of this call that a slower
  // rank has yet to compare (BeginAgreed): everyone leaves once all have compared.
  return AllConsumed(call);
}

Status BroadcastSmall(void* data, size_t bytes, int root, int team, const void* src) {
  const char* what = "shmem_broadcast";
  CollectiveCall call;
  HPSHMEM_RETURN_IF_ERROR(Open(&call, team));
  if (root < 0 || root >= call.members) return CheckRank(root, call.members, "root");
  if (bytes > call.eager_bytes)
    return Status::InvalidArgument(std::string(what) + ": " + std::to_string(bytes) + " bytes do not fit the " +
                                   std::to_string(call.eager_bytes) + "-byte eager slot of a team of " +
                                   std::to_string(call.members));
  const int64_t epoch = ++call.counters->epoch;
  HPSHMEM_RETURN_IF_ERROR(Signal(call.layout.ready + call.me, kWord, epoch, SignalOp::kSet,
                                 call.GlobalRank(call.me)));  // as every call does
  if (call.me == root) {
    for (int k = 1; k < call.members; ++k) {
      int p = (call.me + k) % call.members;
      // p has entered the previous call, so it is done with this parity's slot (call e - 2).
      HPSHMEM_RETURN_IF_ERROR(WaitReady(call, p, epoch - 1));
      HPSHMEM_RETURN_IF_ERROR(PutSlot(call, p, {epoch, static_cast<int64_t>(bytes), root, 0}, src ? src : data, bytes));
    }
    call.counters->loose_epoch = epoch;
    return Status::OK();
  }
  // Every member hears that this one entered (the root to send, the others
  // for their next eager call, see PutSlot); nobody waits for it here.
  call.counters->loose_epoch = epoch;
  for (int k = 1; k < call.members; ++k) {
    int p = (call.me + k) % call.members;
    if (p != root)
      HPSHMEM_RETURN_IF_ERROR(
          Signal(call.AtMember(p, call.layout.ready + call.me), kWord, epoch, SignalOp::kSet, call.GlobalRank(p)));
  }
  HPSHMEM_RETURN_IF_ERROR(
      Signal(call.AtMember(root, call.layout.ready + call.me), kWord, epoch, SignalOp::kSet, call.GlobalRank(root)));
  HPSHMEM_RETURN_IF_ERROR(WaitReady(call, root, epoch));
  const EagerHeader& header = SlotHeader(call, root, epoch);
  if (header.epoch != epoch || header.count != static_cast<int64_t>(bytes) || header.place != root) {
    return Status::CollectiveMismatch(
        std::string(what) + ": rank " + std::to_string(call.GlobalRank(call.me)) + " broadcasts " +
        std::to_string(bytes) + " bytes from team rank " + std::to_string(root) + ", but that rank " +
        (header.epoch != epoch
             ? std::string("entered another collective")
             : "broadcasts " + std::to_string(header.count) + " bytes from team rank " + std::to_string(header.place)));
  }
  // The slot stays as it is until call e + 2, which the root starts only after this rank entered e + 1.
  if (bytes) std::memcpy(data, SlotData(call, root, epoch), bytes);
  return Status::OK();
}

}  // namespace hpshmem::ops
