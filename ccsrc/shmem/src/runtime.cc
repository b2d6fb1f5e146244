// Lifecycle: Init connects the ranks and picks a transport per peer;
// Finalize releases everything.
#include "runtime.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "log.h"

namespace hpshmem {
namespace {

std::atomic<Runtime*> g_rt{nullptr};

// Marks every rank of `pes` lost before waking anyone: a waiter woken by the
// first would otherwise name only it when several died together.
void OnPeersLost(Runtime* rt, const std::vector<int>& reported, const std::string& cause) {
  if (rt->finalizing.load()) return;
  std::vector<int> pes = reported;
  // A rank of this host that left may have seen ranks fail that this one
  // has not noticed yet (see PeHeader::lost): take its word for them.
  for (int pe : reported) {
    uint8_t* seg = pe == rt->rank ? nullptr : rt->route[pe]->Segment(pe);
    if (!seg) continue;
    auto* h = reinterpret_cast<PeHeader*>(seg);
    for (int w = 0; w * 64 < rt->nranks; ++w) {
      uint64_t bits = std::atomic_ref<uint64_t>(h->lost[w]).load(std::memory_order_acquire);
      for (; bits; bits &= bits - 1) {
        int r = w * 64 + __builtin_ctzll(bits);
        if (r < rt->nranks && r != rt->rank) pes.push_back(r);
      }
    }
  }
  {
    // Before the state changes: a waiter that sees kLost reads the cause.
    std::lock_guard<std::mutex> lk(rt->loss_mu);
    for (size_t i = 0; i < pes.size(); ++i) {
      std::string& c = rt->loss_cause[pes[i]];
      if (!c.empty()) continue;
      rt->loss_order[pes[i]] = 1 + static_cast<int>(std::count_if(rt->loss_order.begin(), rt->loss_order.end(),
                                                                  [](int o) { return o > 0; }));
      // Those reported by a rank of this host that left are lost for its reasons, not known here.
      c = i < reported.size() ? (cause.empty() ? kExitedCause : cause)
                              : "was lost (a rank of this host saw it fail before it left)";
    }
  }
  PeHeader* mine = rt->header();
  for (int pe : pes)
    std::atomic_ref<uint64_t>(mine->lost[pe / 64]).fetch_or(uint64_t{1} << (pe % 64), std::memory_order_release);
  bool any = false;
  for (int pe : pes) {
    uint8_t expect = static_cast<uint8_t>(PeerState::kAlive);
    if (rt->peer_state[pe].compare_exchange_strong(expect, static_cast<uint8_t>(PeerState::kLost))) {
      rt->lost_count.fetch_add(1, std::memory_order_release);
      HP_WARN("rank %d%s %s; waits on this rank will fail", pe, rt->HostSuffix(pe).c_str(), rt->loss_cause[pe].c_str());
      any = true;
    }
  }
  if (any) {
    // Wake our own sleepers at once; sleepers on other doorbells notice
    // within one sleep slice.
    NotifyAll(&rt->header()->data);
    NotifyAll(&rt->header()->control);
  }
}

// The index in `ts` of the transport that carries rank a's calls to rank b:
// the first that reaches b; -1 when none does. Computed from the cards
// every rank received alike, so all ranks agree on every pair.
int RouteOf(const std::vector<std::unique_ptr<Transport>>& ts, const std::vector<PeerCard>& cards, int a, int b) {
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i]->CanReach(cards, a, b)) return static_cast<int>(i);
  return -1;
}

// Plans the barrier (Runtime::barrier_ranks): grouped by host or not; and
// each rank's host leader (Runtime::host_leader). From the cards and routes
// every rank has alike, so all choose the same plan.
void PlanBarrier(Runtime* rt, const std::vector<PeerCard>& cards) {
  const int n = rt->nranks;
  std::map<std::string, int> leader_on;  // host key -> its first rank
  std::vector<int> leader_of(n), leaders;
  bool mapped = true;
  rt->host_leader.resize(n);
  for (int r = 0; r < n; ++r) {
    auto [it, first] = leader_on.emplace(cards[r].host_key, r);
    leader_of[r] = it->second;
    bool maps = true;  // r maps its host's first rank (itself, when first)
    if (first) {
      leaders.push_back(r);
    } else {
      int t = RouteOf(rt->transports, cards, r, it->second);
      maps = t >= 0 && rt->transports[t]->MapsPeers();
      mapped &= maps;
    }
    rt->host_leader[r] = maps ? it->second : r;
  }
  const bool grouped = mapped && leaders.size() > 1 && leaders.size() < static_cast<size_t>(n);
  if (grouped) {
    rt->leader = leader_of[rt->rank];
    rt->host_ranks = static_cast<int>(std::count(leader_of.begin(), leader_of.end(), rt->leader));
    rt->barrier_ranks = std::move(leaders);
  } else {
    rt->leader = rt->rank;
    rt->host_ranks = 1;
    rt->barrier_ranks.resize(n);
    for (int r = 0; r < n; ++r) rt->barrier_ranks[r] = r;
  }
  auto at = std::find(rt->barrier_ranks.begin(), rt->barrier_ranks.end(), rt->rank);
  rt->barrier_pos = at == rt->barrier_ranks.end() ? -1 : static_cast<int>(at - rt->barrier_ranks.begin());
}

// How this rank waits: it competes for its CPUs with every rank of its
// machine whose affinity mask overlaps its own.
WaitPolicy PolicyFor(const std::vector<PeerCard>& cards, int me, int cpus, const Config& c) {
  int sharing = 0;
  for (const PeerCard& card : cards) {
    if (std::strncmp(card.machine, cards[me].machine, sizeof card.machine) != 0) continue;
    uint64_t theirs[16], mine[16];  // copied out: the cards are packed
    std::memcpy(theirs, card.cpu_mask, sizeof theirs);
    std::memcpy(mine, cards[me].cpu_mask, sizeof mine);
    bool overlap = false;
    for (int w = 0; w < 16 && !overlap; ++w) overlap = (theirs[w] & mine[w]) != 0;
    sharing += overlap ? 1 : 0;
  }
  static const char* kModes[] = {"auto", "spin", "yield", "custom"};
  return ChooseWaitPolicy(kModes[static_cast<int>(c.wait_mode)], c.wait_spin_us, c.wait_yield_us, cpus, sharing);
}

// Connects the transports (MakeTransports' list) and routes every peer to
// the first that reaches it. Each transport's connection is a collective
// that every rank enters when any pair of ranks needs it.
Status Connect(Runtime* rt) {
  PeerCard me{};
  std::string host;
  HPSHMEM_RETURN_IF_ERROR(HostKey(rt->config.host_id, &host));
  std::snprintf(me.host_key, sizeof me.host_key, "%s", host.c_str());
  me.heap_bytes = rt->heap_bytes;
  me.pid = ::getpid();
  me.uid = ::getuid();
  {
    std::string boot;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot);
    std::snprintf(me.machine, sizeof me.machine, "%s", boot.c_str());
  }
  uint64_t mask[16];  // aligned here: the card is packed
  const int cpus = UsableCpus(mask);
  std::memcpy(me.cpu_mask, mask, sizeof mask);
  me.asym_wake = RegisterAsymWake() ? 1 : 0;
  // The host as users know it; with simulated hosts, their ids.
  if (!rt->config.host_id.empty())
    std::snprintf(me.hostname, sizeof me.hostname, "%s", rt->config.host_id.c_str());
  else if (::gethostname(me.hostname, sizeof me.hostname - 1) != 0)
    std::snprintf(me.hostname, sizeof me.hostname, "?");
  HPSHMEM_RETURN_IF_ERROR(MakeTransports(rt->boot.get(), rt->segment.get(), rt->config, &rt->transports));
  for (auto& t : rt->transports) HPSHMEM_RETURN_IF_ERROR(t->Prepare(&me));
  std::vector<PeerCard> cards(rt->nranks);
  HPSHMEM_RETURN_IF_ERROR(rt->boot->Allgather(&me, sizeof me, cards.data()));
  std::string sizes;
  for (int r = 0; r < rt->nranks; ++r) {
    cards[r].host_key[sizeof cards[r].host_key - 1] = 0;
    cards[r].sock_name[sizeof cards[r].sock_name - 1] = 0;
    if (cards[r].heap_bytes != me.heap_bytes)
      sizes += " rank " + std::to_string(r) + "=" + std::to_string(cards[r].heap_bytes);
  }
  if (!sizes.empty()) {
    return Status::CollectiveMismatch("symmetric heap sizes differ between ranks (this rank " +
                                      std::to_string(rt->rank) + "=" + std::to_string(me.heap_bytes) + ";" + sizes +
                                      "); set the same SYMMETRIC_MEMORY_HEAP_SIZE on every rank");
  }
  for (int r = 0; r < rt->nranks; ++r) {
    cards[r].hostname[sizeof cards[r].hostname - 1] = 0;
    if (std::strcmp(cards[r].host_key, me.host_key) != 0) rt->host_name[r] = cards[r].hostname;
  }
  rt->wait = PolicyFor(cards, rt->rank, cpus, rt->config);
  // Writers may skip their fence only if every waiter can pay for it instead.
  bool asym = true;
  for (const PeerCard& c : cards) asym &= c.asym_wake != 0;
  const int n = rt->nranks;
  const size_t kinds = rt->transports.size();
  std::vector<int> mine(n);  // the transport of each of this rank's peers
  for (int r = 0; r < n; ++r) {
    mine[r] = RouteOf(rt->transports, cards, rt->rank, r);
    if (mine[r] < 0) return Status::Unsupported("Init: no transport reaches rank " + std::to_string(r));
  }
  // Only a peer that maps this rank's memory stores into it without a fence,
  // and it maps ours as we map its. A rank that maps no peer (alone on its
  // host) therefore takes the fence on its own puts to itself and sleeps
  // without the barrier, which costs a few microseconds per sleep (with a
  // waiter woken by every arriving message: blocking 8-byte put across
  // simulated hosts 33 -> 17 us).
  auto maps = [&](int a, int b) {
    const int i = RouteOf(rt->transports, cards, a, b);
    return i >= 0 && rt->transports[i]->MapsPeers();
  };
  bool mapped_peer = false;
  for (int r = 0; r < n; ++r) mapped_peer |= r != rt->rank && (maps(rt->rank, r) || maps(r, rt->rank));
  SetAsymWake(asym && mapped_peer);
  std::vector<uint8_t> used(kinds, 0);  // by any pair of ranks: the same answer on every rank
  size_t n_used = 0;
  for (int a = 0; a < n && n_used < kinds; ++a) {
    for (int b = 0; b < n && n_used < kinds; ++b) {
      int i = RouteOf(rt->transports, cards, a, b);
      if (i >= 0 && !used[i]) used[i] = 1, ++n_used;
    }
  }
  rt->all_mapped = true;
  for (size_t i = 0; i < kinds; ++i) {
    if (!used[i]) continue;
    rt->all_mapped &= rt->transports[i]->MapsPeers();
    std::vector<bool> reach(n);
    for (int r = 0; r < n; ++r) reach[r] = mine[r] == static_cast<int>(i);
    HPSHMEM_RETURN_IF_ERROR(rt->transports[i]->Connect(cards, reach, rt->config.timeout_sec));
  }
  PlanBarrier(rt, cards);
  // Only the transports that carry a peer of this rank stay.
  std::vector<std::unique_ptr<Transport>> kept;
  for (size_t i = 0; i < kinds; ++i) {
    Transport* t = rt->transports[i].get();
    bool carries = false;
    for (int r = 0; r < n; ++r) {
      if (mine[r] != static_cast<int>(i)) continue;
      rt->route[r] = t;
      uint8_t* seg = t->Segment(r);
      rt->peer_sym[r] = seg ? seg + kSymOffset : nullptr;
      carries = true;
    }
    if (!carries) continue;
    if (t->NeedsProgress()) rt->progressed.push_back(t);
    kept.push_back(std::move(rt->transports[i]));
  }
  rt->transports = std::move(kept);
  return Status::OK();
}

void Release(Runtime* rt) {
  {
    std::lock_guard<std::mutex> plk(rt->pool_mu);
    rt->pool.reset();
  }
  // Transports first: they hold registrations of the segment and threads
  // that touch it.
  // The list in reverse: a transport may use one listed before it.
  for (auto t = rt->transports.rbegin(); t != rt->transports.rend(); ++t) (*t)->Shutdown();
  rt->segment.reset();
  rt->boot.reset();
}

}  // namespace

Status NotInit(const char* fn) {
  return Status::NotInitialized(std::string(fn) + " called before Init (or after Finalize)");
}

std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

std::string Runtime::LostRanks(const std::vector<uint8_t>* scope) const {
  std::string s;
  for (int r = 0; r < nranks; ++r)
    if ((!scope || (*scope)[r]) && peer_state[r].load() != static_cast<uint8_t>(PeerState::kAlive))
      s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

std::string Runtime::LossText(const std::vector<uint8_t>* scope) {
  // Ranks grouped by host and cause; the group lost first comes first (the
  // others are often its consequences: ranks that gave up and left).
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::lock_guard<std::mutex> lk(loss_mu);
  for (int r = 0; r < nranks; ++r) {
    if ((scope && !(*scope)[r]) || peer_state[r].load() == static_cast<uint8_t>(PeerState::kAlive)) continue;
    std::string key = host_name[r] + '\n' + (loss_cause[r].empty() ? kExitedCause : loss_cause[r]);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == key; });
    if (g == groups.end())
      groups.emplace_back(key, std::vector<int>{r});
    else
      g->second.push_back(r);
  }
  auto first = [&](const std::vector<int>& rs) {
    int o = INT32_MAX;
    for (int r : rs) o = std::min(o, loss_order[r] > 0 ? loss_order[r] : INT32_MAX);
    return o;
  };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const auto& a, const auto& b) { return first(a.second) < first(b.second); });
  std::string out;
  for (const auto& [key, ranks] : groups) {
    std::string cause = key.substr(key.find('\n') + 1);
    std::string who = "rank(s) ";
    for (size_t i = 0; i < ranks.size(); ++i) who += (i ? ", " : "") + std::to_string(ranks[i]);
    who += HostSuffix(ranks[0]);
    if (cause.rfind(kExitedCause, 0) == 0) cause = "exited or were killed" + cause.substr(sizeof kExitedCause - 1);
    out += (out.empty() ? "" : "; ") + who + " " + cause;
  }
  return out.empty() ? "no rank is known to be lost" : out;
}

std::string Runtime::HostSuffix(int pe) const { return host_name[pe].empty() ? "" : " (host " + host_name[pe] + ")"; }

std::string Runtime::LostPeer(int pe) {
  std::string cause;
  {
    std::lock_guard<std::mutex> lk(loss_mu);
    cause = loss_cause[pe];
  }
  return "rank " + std::to_string(pe) + HostSuffix(pe) + ": the rank " + (cause.empty() ? kUnknownLossCause : cause);
}

bool Runtime::AnyLost(const std::vector<uint8_t>* scope) const {
  if (!scope) return lost_count.load(std::memory_order_acquire) > 0;
  for (int r = 0; r < nranks; ++r)
    if ((*scope)[r] && peer_state[r].load() != static_cast<uint8_t>(PeerState::kAlive)) return true;
  return false;
}

Status Runtime::QuietAll() {
  for (auto& t : transports) HPSHMEM_RETURN_IF_ERROR(t->Quiet());
  return Status::OK();
}

std::string Runtime::TransportNames() const {
  std::string s;
  for (const auto& t : transports) {
    if (!s.empty()) s += '+';
    s += t->name();
  }
  return s;
}

Runtime* CurrentRuntime() { return g_rt.load(std::memory_order_acquire); }

namespace {

// Each thread announces "inside a call" in a word of its own, so that a call
// costs one uncontended exchange on entry and a plain store on exit (a shared
// counter would make every call of every thread fight for one cache line).
// Nested calls (a collective calling a put) touch it only at the outermost.
struct CallSlot {
  std::atomic<uint32_t> inside{0};
  int depth = 0;
};

std::atomic<bool> g_asymmetric_fence{false};  // set by each Init (AsymmetricFence)
std::mutex g_slots_mu;
std::vector<CallSlot*> g_slots;  // every thread's slot, while the thread lives

struct SlotOwner {
  CallSlot* slot = new CallSlot;
  SlotOwner() {
    std::lock_guard<std::mutex> lk(g_slots_mu);
    g_slots.push_back(slot);
  }
  ~SlotOwner() {
    std::lock_guard<std::mutex> lk(g_slots_mu);
    g_slots.erase(std::find(g_slots.begin(), g_slots.end(), slot));
    delete slot;
  }
};

CallSlot& MySlot() {
  thread_local SlotOwner owner;
  return *owner.slot;
}

// Whether Finalize can make every thread of the process execute a full
// memory barrier (membarrier, Linux >= 4.14). Then a call marks itself with
// a plain store, and Finalize pays the barrier for all of them, once; without
// it, each call pays an exchange.
// Registered at every Init, not once: a forked child is a new process that
// must register again.
bool AsymmetricFence() { return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0; }

// The barrier on every thread; the global command (slower, no registration)
// covers a process that inherited the flag without registering.
void FenceAllThreads() {
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

// Calls inside the library right now, on every thread.
int CallsInside() {
  std::lock_guard<std::mutex> lk(g_slots_mu);
  int n = 0;
  for (CallSlot* s : g_slots) n += s->inside.load(std::memory_order_seq_cst) != 0;
  return n;
}

}  // namespace

// Dekker with Finalize (all seq_cst): a call marks itself inside, then looks
// at the runtime; Finalize marks it closing, then looks at the marks. Either
// the call sees `closing` and backs off, or Finalize sees the call and waits.
namespace {
void EnterCall() {
  CallSlot& slot = MySlot();
  if (slot.depth++ == 0) {
    if (g_asymmetric_fence.load(std::memory_order_relaxed)) {
      slot.inside.store(1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // Finalize's membarrier orders it
    } else {
      slot.inside.exchange(1, std::memory_order_seq_cst);
    }
  }
}
void LeaveCall() {
  CallSlot& slot = MySlot();
  if (--slot.depth == 0) slot.inside.store(0, std::memory_order_release);
}
}  // namespace

CallScope::CallScope() {
  EnterCall();
  Runtime* rt = g_rt.load(std::memory_order_seq_cst);
  if (rt && !rt->closing.load(std::memory_order_seq_cst)) rt_ = rt;
}

CallScope::~CallScope() { LeaveCall(); }

CallHold::CallHold() { EnterCall(); }
CallHold::~CallHold() { LeaveCall(); }

namespace {
thread_local int t_collective_depth = 0;
thread_local double t_wait_timeout_sec = 0;  // 0: the job's (config.timeout_sec)
}  // namespace
CollectiveScope::CollectiveScope() { ++t_collective_depth; }
CollectiveScope::~CollectiveScope() { --t_collective_depth; }

double SetThreadWaitTimeout(double seconds) {
  double old = t_wait_timeout_sec;
  t_wait_timeout_sec = seconds > 0 ? seconds : 0;
  return old;
}

double WaitTimeoutSec(const Runtime* rt) {
  return t_wait_timeout_sec > 0 ? t_wait_timeout_sec : rt->config.timeout_sec;
}

std::string WaitTimeoutSource() {
  return t_wait_timeout_sec > 0 ? "the thread's own timeout set by its caller" : "HYPER_PARALLEL_SHMEM_TIMEOUT_SEC";
}

bool InCollective() { return t_collective_depth > 0; }

std::mutex& LifecycleMutex() {
  static std::mutex mu;
  return mu;
}

Status Init(const InitAttr& attr) {
  std::lock_guard<std::mutex> lk(LifecycleMutex());
  if (g_rt.load()) return Status::InvalidArgument("Init: the runtime is already initialized (call Finalize first)");
  if (attr.nranks < 1) return Status::InvalidArgument("Init: nranks must be >= 1, got " + std::to_string(attr.nranks));
  if (attr.nranks > kMaxRanks)
    return Status::Unsupported("Init: " + std::to_string(attr.nranks) + " ranks; this build supports up to " +
                               std::to_string(kMaxRanks));
  if (attr.rank < 0 || attr.rank >= attr.nranks) {
    return Status::InvalidArgument("Init: rank " + std::to_string(attr.rank) + " is out of range [0, " +
                                   std::to_string(attr.nranks) + ")");
  }
  auto rt = std::make_unique<Runtime>();
  static uint64_t generations = 0;  // under LifecycleMutex
  rt->generation = ++generations;
  if (Status bad = Config::Build(attr, &rt->config); !bad.ok()) {
    TellJobStartFailed(attr, bad, Config{}.timeout_sec);
    return bad;
  }
  SetLogLevel(rt->config.log_level);
  SetLogRank(attr.rank);
  rt->rank = attr.rank;
  rt->nranks = attr.nranks;
  // Round the heap to whole pages so every segment maps cleanly.
  rt->heap_bytes = (rt->config.heap_bytes + 4095) & ~size_t{4095};
  rt->config.heap_bytes = rt->heap_bytes;
  rt->route.assign(rt->nranks, nullptr);
  rt->peer_sym.assign(rt->nranks, nullptr);
  rt->peer_state.reset(new std::atomic<uint8_t>[rt->nranks]);
  for (int r = 0; r < rt->nranks; ++r) rt->peer_state[r].store(0);
  rt->host_name.assign(rt->nranks, "");
  rt->loss_cause.assign(rt->nranks, "");
  rt->loss_order.assign(rt->nranks, 0);

  BootstrapParams bp;
  HPSHMEM_RETURN_IF_ERROR(
      ResolveBootstrap(attr, rt->config.endpoint, rt->config.secret, rt->config.job_id, rt->config.timeout_sec, &bp));
  HPSHMEM_RETURN_IF_ERROR(Bootstrap::Create(std::move(bp), &rt->boot));
  HPSHMEM_RETURN_IF_ERROR(LocalSegment::Create(rt->heap_bytes, rt->rank, rt->nranks, rt->boot->job_id(), &rt->segment));
  Status s = Connect(rt.get());
  if (!s.ok()) {
    Release(rt.get());
    return s;
  }
  rt->sym_base = rt->segment->base() + kSymOffset;
  rt->sym_bytes = kWorkspaceBytes + rt->heap_bytes;
  rt->heap = rt->sym_base + kWorkspaceBytes;
  rt->alloc = std::make_unique<OffsetAllocator>(rt->heap_bytes);
  InitTeams(rt.get());
  Runtime* raw = rt.get();
  for (auto& t : rt->transports)
    t->StartMonitor([raw](const std::vector<int>& pes, const std::string& cause) { OnPeersLost(raw, pes, cause); },
                    [raw](int pe) { return raw->LostPeer(pe); });
  // Every rank has connected every peer before anyone uses one.
  s = rt->boot->Barrier();
  if (!s.ok()) {
    Release(rt.get());
    return s;
  }
  HP_INFO("initialized: %d ranks, heap %zu bytes, timeout %.1f s, block_dim %d, transports %s", rt->nranks,
          rt->heap_bytes, rt->config.timeout_sec, rt->config.block_dim, rt->TransportNames().c_str());
  g_asymmetric_fence.store(AsymmetricFence());
  g_rt.store(rt.release(), std::memory_order_seq_cst);
  return Status::OK();
}

Status Finalize() {
  std::lock_guard<std::mutex> lk(LifecycleMutex());
  Runtime* rt = g_rt.load();
  if (!rt) return NotInit("Finalize");
  Status s = Barrier();
  // From here on a peer that closes its connections is leaving, not dying.
  // The second barrier makes sure every rank knows that before any rank closes.
  rt->finalizing.store(true);
  if (s.ok()) s = Barrier();
  // Over a transport of messages (UCX) the last barrier messages may still be
  // in flight when this rank leaves it; closing connections then would drop
  // them. Once every rank is here, nothing is owed to anyone.
  bool in_flight = false;
  for (auto& t : rt->transports) in_flight |= t->InFlightAfterBarrier();
  if (s.ok() && in_flight) s = rt->boot->Barrier();
  if (!s.ok() && rt->lost_count.load() > 0) {
    std::vector<int> lost;
    for (int r = 0; r < rt->nranks; ++r)
      if (rt->peer_state[r].load() != static_cast<uint8_t>(PeerState::kAlive)) lost.push_back(r);
    for (auto& t : rt->transports) t->Leave(lost);
  }
  // Calls still in flight on other threads: waits are woken and leave with
  // kNotInitialized, the rest finish; nothing is released under them.
  rt->closing.store(true, std::memory_order_seq_cst);
  // Every thread's plain "inside" store is now visible here, and every later
  // load of `closing` on those threads sees it (the other half of the Dekker).
  if (g_asymmetric_fence.load()) FenceAllThreads();
  g_rt.store(nullptr, std::memory_order_seq_cst);
  for (auto& t : rt->transports) t->Interrupt();
  auto since = std::chrono::steady_clock::now();
  bool warned = false;
  int inside;
  while ((inside = CallsInside()) > 0) {
    NotifyAll(&rt->header()->data);
    NotifyAll(&rt->header()->control);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!warned && std::chrono::steady_clock::now() - since > std::chrono::seconds(1)) {
      HP_WARN("finalize: waiting for %d call(s) still running on other threads", inside);
      warned = true;
    }
  }
  Release(rt);
  delete rt;
  SetLogRank(-1);
  return s;
}

Status BootstrapAllgather(const void* mine, size_t bytes, void* all) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("BootstrapAllgather");
  if (bytes > (size_t{1} << 20))
    return Status::InvalidArgument("BootstrapAllgather: " + std::to_string(bytes) + " bytes is more than 1 MiB");
  if (bytes && (!mine || !all)) return Status::InvalidArgument("BootstrapAllgather: null buffer");
  return rt->boot->AllgatherChecked(mine, bytes, all, "BootstrapAllgather");
}

Status BootstrapBarrier() {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("BootstrapBarrier");
  return rt->boot->Barrier();
}

bool IsInitialized() { return CurrentRuntime() != nullptr; }
int MyPe() {
  CallScope call;
  Runtime* rt = call.rt();
  return rt ? rt->rank : -1;
}
int NPes() {
  CallScope call;
  Runtime* rt = call.rt();
  return rt ? rt->nranks : 0;
}

}  // namespace hpshmem
