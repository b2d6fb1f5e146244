// Allgather and alltoall over one-sided puts and gets; the protocol is
// described in ops.h. Push: the owner of the data writes it into every peer
// and bumps the peer's arrival counter. Pull: the owner announces the call
// (its data is in place) and each consumer reads the pieces itself, in rank
// order, then tells the owner it is done reading.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/reduce/reduce.h"

namespace hpshmem::ops {
namespace {

constexpr SignalType kWord = SignalType::kInt64;
constexpr size_t kGatedMax = 1 << 20;  // bytes per peer sent ahead of the target's announcement

// What one collective call needs, looked up once per call rather than per
// step. Indices p are team ranks; G(p) is p's global rank and At(p, w) is
// member p's copy of one of this rank's layout words (a team's words may sit
// at a different workspace offset on each member; the world's never do).
struct Job {
  // The team's arrays and the workspace below belong to the runtime: a
  // Finalize on another thread must not release them under this call. Every
  // signal of a collective is waited for by its receiver (CollectiveScope).
  CollectiveScope scope;
  CollectiveLayout L;
  CollectiveCounters* c = nullptr;
  int me = 0, w = 0, team = kTeamWorld;
  int64_t hash = 0;
  const int* pes = nullptr;
  const int64_t* block = nullptr;
  char* ws = nullptr;  // workspace base (the symmetric range starts with it)
  size_t eager = 0;    // EagerSlotBytes(w): payload a slot holds
  int G(int p) const { return pes[p]; }
  int64_t* At(int p, int64_t* word) const {
    return reinterpret_cast<int64_t*>(reinterpret_cast<char*>(word) + (block[p] - block[me]));
  }
  // Member `holder`'s slot for sender `from` in call `epoch`, as a symmetric
  // address (a put's target at `holder`, or read here when holder == me).
  char* Slot(int holder, int from, int64_t epoch) const {
    size_t i = static_cast<size_t>(epoch & 1) * w + from;
    return ws + block[holder] + TeamWordsBeforeEager(w) * sizeof(int64_t) + i * (kEagerHeaderBytes + eager);
  }
};

// What a sender puts at the head of its slot in the receiver, with the
// payload after it when that fits (an eager piece). The slot is the
// receiver's only news of the call from this sender, so it also carries what
// the receiver needs to check sizes and, for pieces too large to go eager,
// where the sender should put them.
struct EagerHeader {
  int64_t epoch;  // the call; older values are a previous call's
  int64_t count;  // what the sender sends this receiver (allgather: bytes; alltoall: elements)
  int64_t place;  // alltoall: byte offset in the sender's receive buffer for the receiver's piece
  int64_t want;   // alltoall: elements the sender expects from the receiver
};
static_assert(sizeof(EagerHeader) <= kEagerHeaderBytes);
thread_local std::vector<char> t_stage;  // header + payload, sent as one put

// The team's global ranks, for messages: "[3, 1]".
std::string Members(const Job& j) {
  std::string s = "[";
  for (int p = 0; p < j.w && p < 16; ++p) s += (p ? ", " : "") + std::to_string(j.G(p));
  return s + (j.w > 16 ? ", ...]" : "]");
}

Status Open(Job* j, int team) {
  TeamView v;
  HPSHMEM_RETURN_IF_ERROR(GetTeam(team, &v));
  void* base = nullptr;
  HPSHMEM_RETURN_IF_ERROR(CollectiveWorkspace(&base));
  if (team == kTeamWorld && TeamBlockWords(v.size) * sizeof(int64_t) > kWorkspaceBytes) {
    return Status::Unsupported("collectives support up to " +
                               std::to_string((kWorkspaceBytes / sizeof(int64_t) - 3) / 3) + " ranks (workspace of " +
                               std::to_string(kWorkspaceBytes) + " bytes)");
  }
  j->ws = static_cast<char*>(base);
  auto* p = reinterpret_cast<int64_t*>(j->ws + v.block[v.me]);
  int64_t w = v.size;
  j->L = {p, p + w, p + w + 1, p + w + 2, p + w + 3};
  j->c = v.counters;
  j->me = v.me;
  j->w = v.size;
  j->team = team;
  j->hash = v.hash;
  j->pes = v.pes;
  j->block = v.block;
  j->eager = EagerSlotBytes(v.size);
  return Status::OK();
}

// Puts `h` (and `bytes` of `data` after it) into member p's slot for this
// rank, setting ready[me] at p to the call's epoch: the data is there when p
// sees it.
Status WaitReady(const Job& j, int peer, int64_t epoch);

Status PutSlot(const Job& j, int p, const EagerHeader& h, const void* data, size_t bytes) {
  // Two slots per sender suffice because a sender in call e knows that every
  // member entered e - 1 (so is done with the slot of e - 2) — unless e - 1
  // was a small broadcast, whose members wait for nobody but the root.
  if (j.c->loose_epoch == h.epoch - 1) HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, h.epoch - 1));
  size_t total = kEagerHeaderBytes + bytes;
  if (t_stage.size() < total) t_stage.resize(kEagerHeaderBytes + j.eager);
  std::memcpy(t_stage.data(), &h, sizeof h);
  if (bytes) std::memcpy(t_stage.data() + kEagerHeaderBytes, data, bytes);
  return hpshmem::PutMemSignal(j.Slot(p, j.me, h.epoch), t_stage.data(), total, j.At(p, j.L.ready + j.me), kWord,
                               h.epoch, SignalOp::kSet, j.G(p));
}

// This rank's copy of what member p put into its slot here for call `epoch`.
const EagerHeader& SlotHeader(const Job& j, int p, int64_t epoch) {
  return *reinterpret_cast<const EagerHeader*>(j.Slot(j.me, p, epoch));
}
const char* SlotData(const Job& j, int p, int64_t epoch) { return j.Slot(j.me, p, epoch) + kEagerHeaderBytes; }

// Begin for alltoall: peer p's announcement carries place_for(p), the two
// words p needs from this rank (see CollectiveLayout::place).
template <class PlaceFor>
Status BeginPlaced(const Job& j, int64_t* epoch, PlaceFor&& place_for) {
  int64_t e = ++j.c->epoch;
  for (int k = 0; k < j.w; ++k) {
    int p = (j.me + k) % j.w;
    int64_t words[2];
    place_for(p, words);
    HPSHMEM_RETURN_IF_ERROR(hpshmem::PutMemSignal(j.At(p, j.L.place + 2 * j.me), words, sizeof words,
                                                  j.At(p, j.L.ready + j.me), kWord, e, SignalOp::kSet, j.G(p)));
  }
  *epoch = e;
  return Status::OK();
}

Status Begin(const Job& j, int64_t* epoch) {
  int64_t e = ++j.c->epoch;
  for (int k = 0; k < j.w; ++k) {  // ourselves included: code may wait on any rank uniformly
    int p = (j.me + k) % j.w;
    HPSHMEM_RETURN_IF_ERROR(Signal(j.At(p, j.L.ready + j.me), kWord, e, SignalOp::kSet, j.G(p)));
  }
  *epoch = e;
  // Our own ready word is the gate of the messages peers sent ahead of this
  // call (see Allgather): they land now, before we send anything ourselves.
  return ReleaseGated();
}

// A wait for a peer to enter a call is where ranks that called the
// collectives of different teams in different orders block for good; past
// kProbeAfterMs it publishes itself (NoteWait) and looks at what the peer
// waits for: the peer waiting for this rank in another team's call that this
// rank has not entered is a deadlock, reported at once on both ranks instead
// of after the timeout.
Status WaitReady(const Job& j, int peer, int64_t epoch) {
  std::string label = "collective ready[" + std::to_string(peer) + "]";
  bool noted = false;
  auto probe = [&]() -> Status {
    if (!noted) {
      NoteWait({j.hash, epoch, j.G(peer)});
      noted = true;
    }
    WaitNote theirs;
    // A peer that cannot be read (it died) is the wait loop's to report, in its own words.
    if (!ReadWaitNote(j.G(peer), &theirs).ok()) return Status::OK();
    int64_t mine = 0;
    if (theirs.waiting_for != j.G(j.me) || theirs.team_hash == j.hash || !TeamEpochByHash(theirs.team_hash, &mine) ||
        mine >= theirs.epoch)
      return Status::OK();
    return Status::CollectiveMismatch("ranks entered the collectives of different groups in different orders: rank " +
                                      std::to_string(j.G(j.me)) + " waits for rank " + std::to_string(j.G(peer)) +
                                      " in call #" + std::to_string(epoch) + " of group " + Members(j) +
                                      ", while rank " + std::to_string(j.G(peer)) + " waits for rank " +
                                      std::to_string(j.G(j.me)) + " in call #" + std::to_string(theirs.epoch) +
                                      " of another group (the groups' collectives are now out of "
                                      "step: end the job)");
  };
  Status s = hpshmem::SignalWaitUntilProbed(j.L.ready + peer, kWord, Cmp::kGe, epoch, label.c_str(), j.team, probe);
  // After a deadlock the note stays: the peer may not have read it yet, and
  // this call stays unfinished for good.
  if (noted && s.code() != Code::kCollectiveMismatch) NoteWait({});
  return s;
}

// Counters only grow: `expected` is the total this rank has waited for so far; wait for `n` more.
Status WaitCounter(int64_t* word, int64_t* expected, int64_t n, const char* label, int team) {
  *expected += n;
  return hpshmem::SignalWaitUntil(word, kWord, Cmp::kGe, *expected, nullptr, label, team);
}

Status WaitArrivals(const Job& j, int64_t n) {
  return WaitCounter(j.L.arrivals, &j.c->expected_arrivals, n, "collective arrivals", j.team);
}

Status WaitConsumed(const Job& j, int64_t extra) {
  return WaitCounter(j.L.consumed, &j.c->expected_consumed, extra, "collective consumed", j.team);
}

Status Consumed(const Job& j, int peer) {
  return Signal(j.At(peer, j.L.consumed), kWord, 1, SignalOp::kAdd, j.G(peer));
}

// Tells every peer this rank is done reading its buffers, then waits until
// every peer is done reading this rank's: after it, no rank of the call is
// still reading, so nobody's buffers or words are in use any more.
Status AllConsumed(const Job& j) {
  for (int p = 0; p < j.w; ++p)
    if (p != j.me) HPSHMEM_RETURN_IF_ERROR(Consumed(j, p));
  return WaitConsumed(j, j.w - 1);
}

Status Mismatch(int sender, int receiver, int64_t n, int64_t want) {
  return Status::CollectiveMismatch("shmem_alltoall: rank " + std::to_string(sender) + " sends " + std::to_string(n) +
                                    " elements to rank " + std::to_string(receiver) + ", whose receive_list expects " +
                                    std::to_string(want));
}

// ---- the reducing collectives and broadcast

const char* DTypeName(int64_t d) {
  static const char* kNames[] = {"float32", "float64", "float16", "bfloat16", "int8",
                                 "uint8",   "int16",   "int32",   "int64"};
  return d >= 0 && d < 9 ? kNames[d] : "?";
}

const char* OpName(int64_t o) {
  static const char* kNames[] = {"sum", "avg", "max", "min", "prod"};
  return o >= 0 && o < 5 ? kNames[o] : "?";
}

// What every rank of a call must pass alike, as the two words BeginPlaced
// carries: an element (or byte) count, and the rest packed in one word.
int64_t Pack(int64_t dtype, int64_t op, int64_t extra) { return (extra << 16) | (dtype << 8) | op; }

// Where a symmetric buffer lies, folded to 23 bits (the workspace opens the
// symmetric range at the same offset on every rank): peers read and write the
// buffer at this rank's offset, so ranks that pass buffers at different places
// (one rank a tensor of the heap, another a staging copy) must fail like ranks
// that pass different sizes, not read each other's unrelated bytes.
int64_t Place(const Job& j, const void* buffer) {
  auto off = static_cast<uint64_t>(static_cast<const char*>(buffer) - j.ws);
  return static_cast<int64_t>((off ^ (off >> 23) ^ (off >> 46)) & 0x7fffff);
}

std::string Describe(const char* what, int64_t count, int64_t packed) {
  std::string place = " at heap place " + std::to_string(packed >> 40);
  if (std::strcmp(what, "shmem_broadcast") == 0)
    return std::to_string(count) + " bytes from root " + std::to_string((packed >> 16) & 0xffffff) + place;
  return std::to_string(count) + " elements of " + DTypeName((packed >> 8) & 0xff) + " with op " +
         OpName(packed & 0xff) + place;
}

// Every rank compares every rank's words for call `epoch`, so all reach the
// same verdict. On a mismatch nobody leaves before everyone has read the
// words (a rank gone ahead would overwrite them), then all fail alike.
Status Agree(const Job& j, int64_t epoch, int64_t count, int64_t packed, const char* what) {
  int bad = -1;
  int64_t theirs[2] = {0, 0};
  for (int p = 0; p < j.w; ++p) {
    if (p == j.me) continue;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, epoch));
    if (bad < 0 && (j.L.place[2 * p] != count || j.L.place[2 * p + 1] != packed)) {
      bad = p;
      theirs[0] = j.L.place[2 * p];  // read now: once the sync below is done, p may overwrite them
      theirs[1] = j.L.place[2 * p + 1];
    }
  }
  if (bad < 0) return Status::OK();
  HPSHMEM_RETURN_IF_ERROR(AllConsumed(j));
  return Status::CollectiveMismatch(std::string(what) + ": ranks disagree: rank " + std::to_string(j.me) + " passes " +
                                    Describe(what, count, packed) + ", rank " + std::to_string(bad) + " " +
                                    Describe(what, theirs[0], theirs[1]));
}

Status BeginAgreed(const Job& j, int64_t* epoch, int64_t count, int64_t packed, const char* what) {
  HPSHMEM_RETURN_IF_ERROR(BeginPlaced(j, epoch, [&](int, int64_t* words) {
    words[0] = count;
    words[1] = packed;
  }));
  return Agree(j, *epoch, count, packed, what);
}

// Scratch memory that outlives a call: a fresh allocation per call costs a
// page fault per 4 KiB (and zeroing) at the sizes where it matters.
struct Scratch {
  std::unique_ptr<char[]> p;
  size_t size = 0;
  char* Get(size_t bytes) {
    if (bytes > size) {
      p.reset(new char[bytes]);
      size = bytes;
    }
    return p.get();
  }
};
thread_local Scratch t_result;
thread_local std::vector<Scratch> t_fetched;
thread_local std::vector<const void*> t_srcs;  // one source per rank: too many for the stack at large W

// Reduces element range [lo, hi) of symmetric `data` over every rank, in rank
// order, into `out` (which may be this rank's own range). Peers' copies are
// read in place where their memory is mapped here, else fetched first. Peers
// must have entered the call.
Status ReduceRange(const Job& j, const char* data, size_t lo, size_t hi, size_t item, DType dtype, ReduceOp op,
                   void* out) {
  size_t bytes = (hi - lo) * item;
  if (t_fetched.size() < static_cast<size_t>(j.w)) t_fetched.resize(j.w);
  if (t_srcs.size() < static_cast<size_t>(j.w)) t_srcs.resize(j.w);
  const void** srcs = t_srcs.data();
  for (int p = 0; p < j.w; ++p) {
    const char* local = data + lo * item;
    if (void* direct = hpshmem::Ptr(local, j.G(p))) {
      srcs[p] = direct;
    } else {
      char* buf = t_fetched[p].Get(bytes);
      HPSHMEM_RETURN_IF_ERROR(hpshmem::GetMem(buf, local, bytes, j.G(p)));
      srcs[p] = buf;
    }
  }
  return ReduceInto(out, srcs, j.w, hi - lo, dtype, op, j.w);
}

}  // namespace

Status CollectiveBegin(int64_t* epoch, int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  return Begin(j, epoch);
}

Status CollectiveWaitReady(int peer, int64_t epoch, int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  if (peer < 0 || peer >= j.w) return Status::InvalidArgument("CollectiveWaitReady: peer out of range");
  return WaitReady(j, peer, epoch);
}

Status CollectiveWaitArrivals(int64_t n, int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  return WaitArrivals(j, n);
}

Status CollectiveWaitConsumed(int64_t extra, int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  return WaitConsumed(j, extra);
}

Status CollectiveConsumed(int peer, int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  return Consumed(j, peer);
}

namespace {

Status SizeMismatch(const Job& j, int p, int64_t theirs, size_t mine) {
  return Status::CollectiveMismatch("shmem_allgather: ranks pass different sizes: rank " + std::to_string(j.G(j.me)) +
                                    " " + std::to_string(mine) + " bytes, rank " + std::to_string(j.G(p)) + " " +
                                    (theirs >= 0 ? std::to_string(theirs) : "more than " + std::to_string(j.eager)) +
                                    " bytes");
}

// Allgather of at most EagerSlotBytes per rank: each rank puts its piece
// into every peer's slot without waiting for anyone, then collects what the
// peers put into its own slots. One wait per peer, none of them for a peer's
// permission: when ranks outnumber cores, a rank that runs gets its whole
// share of the call done before it yields.
Status AllgatherEager(const Job& j, char* o, const void* in, size_t bytes) {
  const int me = j.me, w = j.w;
  int64_t e = ++j.c->epoch;
  EagerHeader h{e, static_cast<int64_t>(bytes), 0, 0};
  for (int k = 1; k < w; ++k) HPSHMEM_RETURN_IF_ERROR(PutSlot(j, (me + k) % w, h, in, bytes));
  HPSHMEM_RETURN_IF_ERROR(Signal(j.L.ready + me, kWord, e, SignalOp::kSet, j.G(me)));
  HPSHMEM_RETURN_IF_ERROR(ReleaseGated());
  Status bad;
  int64_t traded = 0;
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, e));
    const EagerHeader& got = SlotHeader(j, p, e);
    if (got.epoch == e && got.count == static_cast<int64_t>(bytes)) continue;
    if (bad.ok()) bad = SizeMismatch(j, p, got.epoch == e ? got.count : -1, bytes);
    if (got.epoch != e || static_cast<size_t>(got.count) > j.eager) {
      // p's piece was too large to go eager (or p is in pull mode): it puts
      // nothing into our output once it sees our size; an arrival each way
      // stands in for the data.
      HPSHMEM_RETURN_IF_ERROR(Signal(j.At(p, j.L.arrivals), kWord, 1, SignalOp::kAdd, j.G(p)));
      ++traded;
    }
  }
  if (traded) HPSHMEM_RETURN_IF_ERROR(WaitArrivals(j, traded));
  if (!bad.ok()) return bad;  // the output stays as it was
  // Every piece is here (and stays: a peer rewrites this parity's slot only
  // in call e + 2, after we have entered e + 1).
  std::memmove(o + me * bytes, in, bytes);
  for (int p = 0; p < w; ++p)
    if (p != me) std::memcpy(o + p * bytes, SlotData(j, p, e), bytes);
  return Status::OK();
}

// Push alltoall. Every rank puts into each peer's slot a header saying what
// it sends that peer, what it expects from it and where that piece goes in
// its receive buffer, followed by the piece itself when it fits (eager).
// Then, per peer, once its header is here: as a sender, a piece too large for
// the slot goes straight into the peer's receive buffer (with an arrival); as
// a receiver, an eager piece is copied out of the slot. Both sides see both
// counts, so a size mismatch fails both ranks of the pair (the sender still
// arrives, without data: nobody hangs) and nothing is written out of place.
Status AlltoallPush(const Job& j, const void* const* sends, const int64_t* send_elems, char* r,
                    const int64_t* recv_elems, size_t itemsize, int block_dim) {
  const int me = j.me, w = j.w;
  std::vector<int64_t> before(w + 1, 0);  // byte offset of each source's piece in our receive buffer
  for (int q = 0; q < w; ++q) before[q + 1] = before[q] + recv_elems[q] * static_cast<int64_t>(itemsize);
  auto eager = [&](int64_t n) { return static_cast<size_t>(n) * itemsize <= j.eager; };
  int64_t e = ++j.c->epoch;
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    int64_t n = send_elems[p];
    EagerHeader h{e, n, before[p], recv_elems[p]};
    HPSHMEM_RETURN_IF_ERROR(PutSlot(j, p, h, sends[p], eager(n) ? n * itemsize : 0));
  }
  HPSHMEM_RETURN_IF_ERROR(Signal(j.L.ready + me, kWord, e, SignalOp::kSet, j.G(me)));
  HPSHMEM_RETURN_IF_ERROR(ReleaseGated());
  Status bad;
  if (send_elems[me] != recv_elems[me])
    bad = Mismatch(j.G(me), j.G(me), send_elems[me], recv_elems[me]);
  else if (send_elems[me])
    HPSHMEM_RETURN_IF_ERROR(ops::PutMem(r + before[me], sends[me], send_elems[me] * itemsize, j.G(me), block_dim));
  int64_t incoming = 0;
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, e));
    const EagerHeader& h = SlotHeader(j, p, e);
    if (h.epoch != e) {
      return Status::CollectiveMismatch("shmem_alltoall: rank " + std::to_string(j.G(p)) +
                                        " entered another collective (or pull mode) where rank " +
                                        std::to_string(j.G(me)) + " called a push alltoall");
    }
    int64_t n = send_elems[p];  // ours to p
    if (n != h.want) {
      if (bad.ok()) bad = Mismatch(j.G(me), j.G(p), n, h.want);
      if (!eager(n)) HPSHMEM_RETURN_IF_ERROR(Signal(j.At(p, j.L.arrivals), kWord, 1, SignalOp::kAdd, j.G(p)));
    } else if (!eager(n)) {
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(r + h.place, sends[p], n * itemsize, j.At(p, j.L.arrivals), kWord, 1,
                                                SignalOp::kAdd, j.G(p), block_dim));
    }
    int64_t m = h.count;  // p's to us
    if (!eager(m)) ++incoming;
    if (m != recv_elems[p]) {
      if (bad.ok()) bad = Mismatch(j.G(p), j.G(me), m, recv_elems[p]);
    } else if (m && eager(m)) {
      std::memcpy(r + before[p], SlotData(j, p, e), m * itemsize);
    }
  }
  if (incoming) HPSHMEM_RETURN_IF_ERROR(WaitArrivals(j, incoming));
  return bad;
}

}  // namespace

Status Allgather(void* out, const void* in, size_t bytes, bool pull, int block_dim, int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  int me = j.me, w = j.w;
  auto* o = static_cast<char*>(out);
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(j, 0));  // peers may still read our slot from a pull call
  if (!pull && bytes <= j.eager) return AllgatherEager(j, o, in, bytes);
  if (in != o + me * bytes) HPSHMEM_RETURN_IF_ERROR(ops::PutMem(o + me * bytes, in, bytes, j.G(me), block_dim));
  int64_t e;
  if (pull) {
    HPSHMEM_RETURN_IF_ERROR(Begin(j, &e));
  } else {
    // Announced with our size in each peer's slot, to every peer (those sent
    // gated data too): a peer whose size differs fails instead of writing
    // past our output or hanging.
    e = ++j.c->epoch;
    for (int k = 1; k < w; ++k)
      HPSHMEM_RETURN_IF_ERROR(PutSlot(j, (me + k) % w, {e, static_cast<int64_t>(bytes), 0, 0}, nullptr, 0));
    HPSHMEM_RETURN_IF_ERROR(Signal(j.L.ready + me, kWord, e, SignalOp::kSet, j.G(me)));
    HPSHMEM_RETURN_IF_ERROR(ReleaseGated());
  }
  // A peer whose header for this call is here with another size.
  auto differs = [&](int p) {
    const EagerHeader& h = SlotHeader(j, p, e);
    return h.epoch == e && h.count != static_cast<int64_t>(bytes);
  };
  if (!pull) {
    // Peers that can hold a message (other hosts) get it at once, gated on
    // their ready word: it lands when they enter this call, and we save
    // waiting a message's flight for their announcement. Past kGatedMax the
    // copy a held message costs outweighs that; those, and peers of this
    // host, go after the announcement.
    bool gated_any = false;
    for (int k = 1; k < w && bytes <= kGatedMax; ++k) {
      int p = (me + k) % w;
      if (!CanHoldGated(j.G(p))) continue;
      gated_any = true;
      HPSHMEM_RETURN_IF_ERROR(PutMemSignalGated(o + me * bytes, in, bytes, j.At(p, j.L.arrivals), kWord, 1,
                                                SignalOp::kAdd, j.G(p), j.At(p, j.L.ready + p), e));
    }
    Status bad;
    for (int k = 1; k < w; ++k) {  // rotated start spreads the traffic over the peers
      int p = (me + k) % w;
      if (gated_any && CanHoldGated(j.G(p))) continue;
      HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, e));
      if (differs(p)) {
        // Nothing goes into p's output; an arrival stands in for the data
        // (p sends us one too).
        if (bad.ok()) bad = SizeMismatch(j, p, SlotHeader(j, p, e).count, bytes);
        HPSHMEM_RETURN_IF_ERROR(Signal(j.At(p, j.L.arrivals), kWord, 1, SignalOp::kAdd, j.G(p)));
        continue;
      }
      HPSHMEM_RETURN_IF_ERROR(ops::PutMemSignal(o + me * bytes, in, bytes, j.At(p, j.L.arrivals), kWord, 1,
                                                SignalOp::kAdd, j.G(p), block_dim));
    }
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(j, w - 1));
    // Peers sent gated data are checked now: every header has landed (each
    // came before its sender's arrival, data or traded).
    for (int p = 0; p < w && bad.ok(); ++p)
      if (p != me && differs(p)) bad = SizeMismatch(j, p, SlotHeader(j, p, e).count, bytes);
    return bad;
  }
  for (int p = 0; p < w; ++p) {  // our own slot was filled before we announced the call
    if (p == me) continue;
    HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, e));
    HPSHMEM_RETURN_IF_ERROR(ops::GetMem(o + p * bytes, o + p * bytes, bytes, j.G(p), block_dim));
    HPSHMEM_RETURN_IF_ERROR(Consumed(j, p));
  }
  return WaitConsumed(j, w - 1);  // our buffers are the caller's again once every reader is done
}

Status Alltoall(const void* const* sends, const int64_t* send_elems, void* recv, const int64_t* recv_elems,
                size_t itemsize, bool pull, int block_dim, int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  const CollectiveLayout& L = j.L;
  int me = j.me, w = j.w;
  auto* r = static_cast<char*>(recv);
  Status bad;
  int64_t e;
  if (!pull) return AlltoallPush(j, sends, send_elems, r, recv_elems, itemsize, block_dim);
  char* b = j.ws;  // pieces are named by offset from the workspace base, the same on every rank
  HPSHMEM_RETURN_IF_ERROR(BeginPlaced(j, &e, [&](int p, int64_t* words) {
    words[0] = static_cast<const char*>(sends[p]) - b;
    words[1] = send_elems[p];
  }));
  size_t offset = 0;
  for (int p = 0; p < w; ++p) {
    HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, e));
    int64_t src_off = L.place[2 * p], n = L.place[2 * p + 1];
    if (n != recv_elems[p]) {
      if (bad.ok()) bad = Mismatch(p, me, n, recv_elems[p]);
      HPSHMEM_RETURN_IF_ERROR(Signal(j.At(p, L.mismatch), kWord, 1, SignalOp::kAdd, j.G(p)));
    } else {
      HPSHMEM_RETURN_IF_ERROR(ops::GetMem(r + offset, b + src_off, n * itemsize, j.G(p), block_dim));
    }
    offset += recv_elems[p] * itemsize;
    HPSHMEM_RETURN_IF_ERROR(Consumed(j, p));
  }
  // The caller may reuse its send tensors once we return: wait for every reader.
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(j, w));
  // Reports about this rank's sizes from its readers; taken in full either way, so
  // none is raised twice.
  int64_t seen = 0;
  HPSHMEM_RETURN_IF_ERROR(SignalFetch(L.mismatch, kWord, &seen));
  bool reported = seen != j.c->mismatch_seen;
  j.c->mismatch_seen = seen;
  if (!bad.ok()) return bad;
  if (reported) {
    return Status::CollectiveMismatch("shmem_alltoall: rank " + std::to_string(me) +
                                      "'s receive sizes disagree with what its peers send");
  }
  return Status::OK();
}

Status Allreduce(void* data, size_t count, DType dtype, ReduceOp op, AllreduceAlgorithm algorithm, int team,
                 const void* src) {
  const char* what = "shmem_allreduce";
  size_t item = DTypeSize(dtype);
  if (!item) return Status::TypeError(std::string(what) + ": dtype code " + std::to_string(static_cast<int>(dtype)));
  HPSHMEM_RETURN_IF_ERROR(CheckReducible(dtype, op, what));
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  auto* d = static_cast<char*>(data);
  size_t bytes = count * item;
  if (algorithm == AllreduceAlgorithm::kAuto)
    algorithm = bytes <= kOneShotMaxBytes ? AllreduceAlgorithm::kOneShot : AllreduceAlgorithm::kTwoShot;
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(j, 0));  // peers may still read this buffer from an earlier call
  // Nobody reads `data` before this rank announces the call below.
  if (src && src != data && bytes) std::memmove(d, src, bytes);
  int64_t e;
  HPSHMEM_RETURN_IF_ERROR(BeginAgreed(j, &e, static_cast<int64_t>(count),
                                      Pack(static_cast<int>(dtype), static_cast<int>(op), Place(j, d) << 24), what));
  if (j.w == 1) return ReduceRange(j, d, 0, count, item, dtype, op, d);  // avg over one rank, in place
  if (algorithm == AllreduceAlgorithm::kOneShot) {
    // Every rank reduces the whole tensor from every rank's copy; it may
    // overwrite its own copy once every peer has finished reading it.
    char* out = t_result.Get(bytes);
    HPSHMEM_RETURN_IF_ERROR(ReduceRange(j, d, 0, count, item, dtype, op, out));
    HPSHMEM_RETURN_IF_ERROR(AllConsumed(j));
    if (bytes) std::memcpy(d, out, bytes);
    return Status::OK();
  }
  // Two-shot: rank r reduces element block r from every rank, in place into
  // its own block r, then puts it into block r of every rank. Block r is read
  // and written by rank r alone, so nothing waits between the two halves.
  size_t lo = count * j.me / j.w, hi = count * (j.me + 1) / j.w;
  char* mine = d + lo * item;
  HPSHMEM_RETURN_IF_ERROR(ReduceRange(j, d, lo, hi, item, dtype, op, mine));
  for (int k = 1; k < j.w; ++k) {
    int p = (j.me + k) % j.w;
    HPSHMEM_RETURN_IF_ERROR(
        ops::PutMemSignal(mine, mine, (hi - lo) * item, j.At(p, j.L.arrivals), kWord, 1, SignalOp::kAdd, j.G(p)));
  }
  return WaitArrivals(j, j.w - 1);
}

Status ReduceScatter(void* out, const void* in, size_t count, DType dtype, ReduceOp op, int team) {
  const char* what = "shmem_reduce_scatter";
  size_t item = DTypeSize(dtype);
  if (!item) return Status::TypeError(std::string(what) + ": dtype code " + std::to_string(static_cast<int>(dtype)));
  HPSHMEM_RETURN_IF_ERROR(CheckReducible(dtype, op, what));
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(j, 0));
  int64_t e;
  HPSHMEM_RETURN_IF_ERROR(BeginAgreed(j, &e, static_cast<int64_t>(count),
                                      Pack(static_cast<int>(dtype), static_cast<int>(op), Place(j, in) << 24 | 1),
                                      what));
  const char* src = static_cast<const char*>(in);
  HPSHMEM_RETURN_IF_ERROR(ReduceRange(j, src, count * j.me, count * (j.me + 1), item, dtype, op, out));
  // The caller may reuse `in` once we return: wait for every reader.
  return AllConsumed(j);
}

Status Broadcast(void* data, size_t bytes, int root, int team, const void* src) {
  const char* what = "shmem_broadcast";
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  if (root < 0 || root >= j.w) return CheckRank(root, j.w, "root");
  HPSHMEM_RETURN_IF_ERROR(WaitConsumed(j, 0));
  int64_t e;
  HPSHMEM_RETURN_IF_ERROR(
      BeginAgreed(j, &e, static_cast<int64_t>(bytes), Pack(0, 0, Place(j, data) << 24 | root), what));
  if (j.me == root) {
    for (int k = 1; k < j.w; ++k) {
      int p = (j.me + k) % j.w;
      HPSHMEM_RETURN_IF_ERROR(
          ops::PutMemSignal(data, src ? src : data, bytes, j.At(p, j.L.arrivals), kWord, 1, SignalOp::kAdd, j.G(p)));
    }
  } else {
    HPSHMEM_RETURN_IF_ERROR(WaitArrivals(j, 1));
  }
  // A rank that left now could overwrite the words of this call that a slower
  // rank has yet to compare (Agree): everyone leaves once all have compared.
  return AllConsumed(j);
}

Status BroadcastSmall(void* data, size_t bytes, int root, int team, const void* src) {
  const char* what = "shmem_broadcast";
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  if (root < 0 || root >= j.w) return CheckRank(root, j.w, "root");
  if (bytes > j.eager)
    return Status::InvalidArgument(std::string(what) + ": " + std::to_string(bytes) + " bytes do not fit the " +
                                   std::to_string(j.eager) + "-byte eager slot of a team of " + std::to_string(j.w));
  int64_t e = ++j.c->epoch;
  HPSHMEM_RETURN_IF_ERROR(Signal(j.L.ready + j.me, kWord, e, SignalOp::kSet, j.G(j.me)));  // as every call does
  if (j.me == root) {
    for (int k = 1; k < j.w; ++k) {
      int p = (j.me + k) % j.w;
      // p has entered the previous call, so it is done with this parity's slot (call e - 2).
      HPSHMEM_RETURN_IF_ERROR(WaitReady(j, p, e - 1));
      HPSHMEM_RETURN_IF_ERROR(PutSlot(j, p, {e, static_cast<int64_t>(bytes), root, 0}, src ? src : data, bytes));
    }
    j.c->loose_epoch = e;
    return ReleaseGated();
  }
  // Every member hears that this one entered (the root to send, the others
  // for their next eager call, see PutSlot); nobody waits for it here.
  j.c->loose_epoch = e;
  for (int k = 1; k < j.w; ++k) {
    int p = (j.me + k) % j.w;
    if (p != root) HPSHMEM_RETURN_IF_ERROR(Signal(j.At(p, j.L.ready + j.me), kWord, e, SignalOp::kSet, j.G(p)));
  }
  HPSHMEM_RETURN_IF_ERROR(Signal(j.At(root, j.L.ready + j.me), kWord, e, SignalOp::kSet, j.G(root)));
  HPSHMEM_RETURN_IF_ERROR(ReleaseGated());
  HPSHMEM_RETURN_IF_ERROR(WaitReady(j, root, e));
  const EagerHeader& h = SlotHeader(j, root, e);
  if (h.epoch != e || h.count != static_cast<int64_t>(bytes) || h.place != root) {
    return Status::CollectiveMismatch(
        std::string(what) + ": rank " + std::to_string(j.G(j.me)) + " broadcasts " + std::to_string(bytes) +
        " bytes from team rank " + std::to_string(root) + ", but that rank " +
        (h.epoch != e ? std::string("entered another collective")
                      : "broadcasts " + std::to_string(h.count) + " bytes from team rank " + std::to_string(h.place)));
  }
  // The slot stays as it is until call e + 2, which the root starts only after this rank entered e + 1.
  if (bytes) std::memcpy(data, SlotData(j, root, e), bytes);
  return Status::OK();
}

Status TeamBarrier(int team) {
  Job j;
  HPSHMEM_RETURN_IF_ERROR(Open(&j, team));
  // As Barrier: what this rank did before is complete at its targets first.
  HPSHMEM_RETURN_IF_ERROR(Quiet());
  int64_t e;
  HPSHMEM_RETURN_IF_ERROR(Begin(j, &e));
  for (int k = 1; k < j.w; ++k) HPSHMEM_RETURN_IF_ERROR(WaitReady(j, (j.me + k) % j.w, e));
  return Status::OK();
}

}  // namespace hpshmem::ops
