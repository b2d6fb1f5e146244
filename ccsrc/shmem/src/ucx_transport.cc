#include "ucx_transport.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <list>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <thread>

#include "copy.h"
#include "log.h"
#include "wait.h"

namespace hpshmem {
namespace {

enum AmId : unsigned {
  kAmSignal = 1,
  kAmPutSignal,
  kAmQuietReq,
  kAmQuietAck,
  kAmFetchReply,
  kAmLeave,
  kAmGet,
  kAmGetReply,
  kAmAmo
};

constexpr uint8_t kNoSignal = 0;  // PutSignalHdr::type of a plain put

#pragma pack(push, 1)
struct SignalHdr {
  uint64_t off;
  int64_t value;
  uint8_t type, op;
};
struct PutSignalHdr {
  uint64_t off, sig_off;
  int64_t value;
  uint8_t type, op;
  int32_t from;
  uint64_t echo;      // nonzero: answer with a quiet echo of this number once handled
  uint64_t gate_off;  // nonzero: hold until the target's int64 there is >= gate
  int64_t gate;
};
struct QuietHdr {
  int32_t from;
  uint64_t seq;
};
// Any AmoOp; answered with a FetchReplyHdr.
struct AmoHdr {
  int32_t from;
  uint64_t seq, off;
  int64_t value, compare;
  uint8_t type, op;
};
struct FetchReplyHdr {
  uint64_t seq;
  int64_t old;
};
struct GetHdr {
  int32_t from;
  uint64_t seq, off, len;
};
struct GetReplyHdr {
  uint64_t seq, pos;  // `pos`: where this piece goes in the requested range
};
#pragma pack(pop)

Status UcxError(const std::string& what, ucs_status_t st) {
  return Status(Code::kSystem, "UCX " + what + ": " + ucs_status_string(st));
}

constexpr auto kProgressLinger = std::chrono::microseconds(50);

// Messages of at most kAmChunk bytes that carry `bytes` (one, when empty: it still carries the header).
size_t Pieces(size_t bytes) { return bytes ? (bytes + kAmChunk - 1) / kAmChunk : 1; }
constexpr int kIdleWakeMs = 5;
// How long the progress thread stands aside after application threads stop
// polling without going to sleep (PollEnd): messages that arrive while the
// application computes wait at most this long.
constexpr int64_t kHandBackUs = 200;
constexpr char kTcpRxSegment[] = "256k";  // > kAmChunk plus its header

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

class Ucx final : public Transport {
 public:
  Ucx(Bootstrap* boot, LocalSegment* seg, bool rma) : boot_(boot), seg_(seg), rma_(rma) {}
  ~Ucx() override { Shutdown(); }

  const char* name() const override { return "ucx"; }
  // Any pair: the transport of last resort.
  bool CanReach(const std::vector<PeerCard>&, int, int) const override { return true; }
  Status Connect(const std::vector<PeerCard>& cards, const std::vector<bool>& reach, double timeout_sec) override;
  bool InFlightAfterBarrier() const override { return true; }
  bool NeedsProgress() const override { return true; }
  uint8_t* Segment(int) const override { return nullptr; }
  uint64_t QuietRoundTrips() const override { return quiet_round_trips_.load(std::memory_order_relaxed); }
  Status Put(int pe, size_t off, const void* src, size_t bytes) override;
  Status PutNbi(int pe, size_t off, const void* src, size_t bytes) override;
  Status AmoNbi(int pe, size_t off, SignalType type, AmoOp op, int64_t value) override;
  Status Get(int pe, void* dst, size_t off, size_t bytes) override;
  Status Signal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) override;
  Status ProtocolSignal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) override;
  Status PutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type, SignalOp op,
                   int64_t value) override;
  Status Amo(int pe, size_t off, SignalType type, AmoOp op, int64_t value, int64_t compare, int64_t* old) override;
  bool HoldsGated() const override { return true; }
  Status PutSignalGated(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type, SignalOp op,
                        int64_t value, size_t gate_off, int64_t gate_value) override;
  void ReleaseGated() override;
  Status Quiet() override;
  void Progress() override { ucp_worker_progress(worker_); }
  void PollBegin() override { polling_.fetch_add(1, std::memory_order_seq_cst); }
  void PollEnd(bool to_sleep) override {
    // The last poller going to sleep hands the worker back to the progress
    // thread at once; one that returns lets it come back on its own a moment
    // later (kHandBack), by when the application has usually polled again:
    // waking it now would only make it fight the next send for the lock.
    last_poll_ns_.store(to_sleep ? 0 : NowNs(), std::memory_order_relaxed);
    if (polling_.fetch_sub(1, std::memory_order_seq_cst) == 1 && to_sleep && parked_.load(std::memory_order_seq_cst)) {
      FutexWakeAll(reinterpret_cast<uint32_t*>(&parked_));
    }
  }
  void Interrupt() override { interrupted_.store(true, std::memory_order_release); }
  void Leave(const std::vector<int>& lost) override;
  void StartMonitor(std::function<void(const std::vector<int>&)> on_peers_lost) override;
  void Shutdown() override;

 private:
  struct EpArg {
    Ucx* self;
    int pe;
  };
  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t st);
  // Every active message enters through here: it comes from a peer that acted
  // on what this rank sent before (see CrossProcessRelease).
  template <ucp_am_recv_callback_t Handler>
  static ucs_status_t Incoming(void* arg, const void* h, size_t hlen, void* data, size_t len,
                               const ucp_am_recv_param_t* p) {
    CrossProcessAcquire();
    return Handler(arg, h, hlen, data, len, p);
  }
  static ucs_status_t OnSignal(void* arg, const void* h, size_t hlen, void* data, size_t len,
                               const ucp_am_recv_param_t* p);
  static ucs_status_t OnPutSignal(void* arg, const void* h, size_t hlen, void* data, size_t len,
                                  const ucp_am_recv_param_t* p);
  static ucs_status_t OnQuietReq(void* arg, const void* h, size_t hlen, void* data, size_t len,
                                 const ucp_am_recv_param_t* p);
  static ucs_status_t OnQuietAck(void* arg, const void* h, size_t hlen, void* data, size_t len,
                                 const ucp_am_recv_param_t* p);
  static ucs_status_t OnFetchReply(void* arg, const void* h, size_t hlen, void* data, size_t len,
                                   const ucp_am_recv_param_t* p);
  static ucs_status_t OnAmo(void* arg, const void* h, size_t hlen, void* data, size_t len,
                            const ucp_am_recv_param_t* p);
  static ucs_status_t OnLeave(void* arg, const void* h, size_t hlen, void* data, size_t len,
                              const ucp_am_recv_param_t* p);
  static ucs_status_t OnGet(void* arg, const void* h, size_t hlen, void* data, size_t len,
                            const ucp_am_recv_param_t* p);
  static ucs_status_t OnGetReply(void* arg, const void* h, size_t hlen, void* data, size_t len,
                                 const ucp_am_recv_param_t* p);

  // The status of a failed operation toward pe: PeerDead once its endpoint failed.
  Status Fail(int pe, const char* what, ucs_status_t st);
  // Completes `req` (progressing the worker on this thread).
  Status Wait(ucs_status_ptr_t req, int pe, const char* what);
  // Progresses until done() or the deadline / pe's failure.
  template <class Done>
  Status WaitFor(Done&& done, int pe, const char* what);
  // Sends an eager active message and waits for local completion (the
  // header and data may be reused on return). track: a message the target
  // must have handled before Quiet returns.
  Status Send(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len, bool track,
              const char* what);
  // Queues an eager active message on pe's endpoint (the one send path).
  ucs_status_ptr_t AmSend(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len);
  // Progresses until the echo `seq` from pe has come back.
  Status WaitEcho(int pe, uint64_t seq, const char* what);
  // Sends from a message handler: no waiting; header and data must stay valid.
  void Reply(int pe, unsigned id, const void* hdr, size_t hlen, const void* data = nullptr, size_t len = 0);
  // Sends `bytes` from `src` to pe's segment at `off` as messages of at most
  // kAmChunk bytes, in order; the last one also carries `last`'s signal and
  // echo request. Returns once `src` may be reused.
  Status SendData(int pe, size_t off, const void* src, size_t bytes, PutSignalHdr last, const char* what);
  // Put-with-signal as messages, gated when gate_off is nonzero (see PutSignalGated).
  Status SendPutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type, SignalOp op,
                       int64_t value, size_t gate_off, int64_t gate_value, const char* what);
  Status RmaPut(int pe, size_t off, const void* src, size_t bytes);
  Status RmaGet(int pe, void* dst, size_t off, size_t bytes);
  // Answers a quiet marker (or a put asking for it) from rank `to`.
  void Echo(int to, uint64_t seq);
  // Marker + echo to pe when it has tracked messages in flight.
  Status QuietPeer(int pe);
  Status StartQuiet(int pe, uint64_t* seq);
  bool InSegment(uint64_t off, uint64_t len) const { return off <= bytes_ && len <= bytes_ - off; }
  void ApplyAndNotify(uint64_t off, uint8_t type, uint8_t op, int64_t value);
  // Writes a put-with-signal's bytes here, then applies its signal.
  void ApplyPut(const PutSignalHdr& h, const void* data, size_t len);
  Status Setup(Bootstrap* boot, LocalSegment* seg, const std::vector<bool>& remote, double timeout_sec);
  void Lost(int pe);
  void ProgressLoop();

  Bootstrap* boot_;
  LocalSegment* seg_;
  int rank_ = -1, nranks_ = 0;
  double timeout_sec_ = 120;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  std::vector<int> peers_;  // the ranks reached through UCX
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_mem_h memh_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<ucp_rkey_h> rkeys_;
  std::vector<uint64_t> rbase_;  // each peer's segment address in its own process
  std::vector<EpArg> ep_args_;
  std::unique_ptr<std::atomic<uint8_t>[]> dirty_, failed_;
  std::atomic<uint64_t> quiet_round_trips_{0};  // markers Quiet sent
  std::unique_ptr<std::atomic<uint64_t>[]> quiet_sent_, quiet_acked_;
  std::vector<QuietHdr> ack_slot_;                   // echoes in flight, one per peer (their seqs only grow)
  std::mutex ep_mu_;                                 // set-up: endpoint creation vs. echoes that arrive early
  std::vector<uint64_t> early_echo_;                 // markers answered once the endpoint exists
  std::atomic<bool> eps_ready_{false};               // every endpoint exists
  std::vector<FetchReplyHdr> fetch_slot_;            // fetch replies in flight, one per peer
  std::vector<std::vector<GetReplyHdr>> get_reply_;  // headers of the get replies in flight, per peer
  std::mutex get_mu_;                                // one get in flight per rank
  std::mutex get_reply_mu_;                          // replies vs. the end of their get
  bool get_open_ = false;                            // replies of get_seq_ may still be written
  std::atomic<uint64_t> get_seq_{0}, get_done_{0};
  uint8_t* get_dst_ = nullptr;  // where the replies of get_seq_ go
  size_t get_len_ = 0, get_received_ = 0;
  bool rma_;             // puts/gets as UCX RMA instead of messages
  std::mutex fetch_mu_;  // one fetch in flight per rank
  std::atomic<uint64_t> fetch_seq_{0}, fetch_done_{0};
  std::atomic<int64_t> fetch_old_{0};
  Fd epfd_, wake_;
  std::thread progress_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> interrupted_{false};  // Interrupt(): waits give up
  // Gated messages that arrived before their gate opened, in arrival order.
  struct Held {
    PutSignalHdr hdr;
    std::vector<uint8_t> data;
  };
  std::mutex held_mu_;
  std::list<Held> held_;
  std::vector<uint32_t> held_from_;  // messages held per sender
  // Application threads polling the worker in a wait, and whether the
  // progress thread stands aside for them (a futex word).
  std::atomic<int> polling_{0};
  std::atomic<uint32_t> parked_{0};
  std::atomic<int64_t> last_poll_ns_{0};  // when the last poller returned (0: it went to sleep)
  std::mutex lost_mu_;
  std::function<void(const std::vector<int>&)> on_lost_;
  std::vector<int> lost_early_;  // failures seen before StartMonitor
  bool shut_ = false;
};

Status Ucx::Setup(Bootstrap* boot, LocalSegment* seg, const std::vector<bool>& remote, double timeout_sec) {
  rank_ = boot->rank();
  nranks_ = boot->nranks();
  held_from_.assign(nranks_, 0);
  timeout_sec_ = timeout_sec;
  base_ = seg->base();
  bytes_ = seg->bytes();
  for (int r = 0; r < nranks_; ++r)
    if (remote[r]) peers_.push_back(r);
  eps_.assign(nranks_, nullptr);
  rkeys_.assign(nranks_, nullptr);
  rbase_.assign(nranks_, 0);
  ep_args_.resize(nranks_);
  ack_slot_.resize(nranks_);
  early_echo_.assign(nranks_, 0);
  fetch_slot_.resize(nranks_);
  get_reply_.resize(nranks_);
  dirty_.reset(new std::atomic<uint8_t>[nranks_]);
  failed_.reset(new std::atomic<uint8_t>[nranks_]);
  quiet_sent_.reset(new std::atomic<uint64_t>[nranks_]);
  quiet_acked_.reset(new std::atomic<uint64_t>[nranks_]);
  for (int r = 0; r < nranks_; ++r) {
    dirty_[r] = 0;
    failed_[r] = 0;
    quiet_sent_[r] = 0;
    quiet_acked_[r] = 0;
    ep_args_[r] = {this, r};
  }

  // A put travels as messages of up to kAmChunk bytes; UCX's TCP transport
  // receives a message larger than its receive segment (64 KiB by default)
  // by copying its fragments together before our handler copies it once
  // more into the heap. A segment that holds a whole piece saves that copy
  // (measured across hosts here, with 128 KiB pieces: put 2 MiB 4.1 -> 7.5
  // GB/s, 256 KiB allgather 118 -> 64 us). UCX 1.13 takes transport settings from the
  // environment only (ucp_config_modify does not reach them), so the variable
  // is set here, before the transports read it; the user's own value wins.
  setenv("UCX_TCP_RX_SEG_SIZE", kTcpRxSegment, /*overwrite=*/0);
  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg);
  if (st != UCS_OK) return UcxError("reading the configuration (UCX_* variables)", st);
  // A host that vanishes without closing its connections is noticed by
  // UCX's keepalive; its default interval is 20 s, the runtime promises a
  // few. The user's own UCX_KEEPALIVE_INTERVAL wins.
  if (!std::getenv("UCX_KEEPALIVE_INTERVAL") && ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", "1s") != UCS_OK)
    HP_DEBUG("UCX: no KEEPALIVE_INTERVAL setting here");
  // The worker is shared by the application's threads and the progress
  // thread: a thread that finds it taken must sleep, not spin, or on a host
  // with fewer cores than threads it spins through the time slice of the
  // holder it displaced (measured: 8-byte alltoall across hosts 600 us with
  // UCX's default spinlock, 60 us with a mutex). The user's setting wins.
  if (!std::getenv("UCX_USE_MT_MUTEX") && ucp_config_modify(cfg, "USE_MT_MUTEX", "y") != UCS_OK)
    HP_DEBUG("UCX: no USE_MT_MUTEX setting here");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  st = ucp_init(&params, cfg, &ctx_);
  ucp_config_release(cfg);
  if (st != UCS_OK) return UcxError("init", st);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;  // application threads and the progress thread share it
  if ((st = ucp_worker_create(ctx_, &wp, &worker_)) != UCS_OK) return UcxError("worker create", st);
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
  if ((st = ucp_worker_query(worker_, &wa)) != UCS_OK) return UcxError("worker query", st);
  if (wa.thread_mode != UCS_THREAD_MODE_MULTI)
    return Status::Unsupported("this UCX build has no multi-threaded workers (built without thread support)");
  const struct {
    unsigned id;
    ucp_am_recv_callback_t cb;
  } handlers[] = {
      {kAmSignal, Incoming<OnSignal>},     {kAmPutSignal, Incoming<OnPutSignal>},   {kAmQuietReq, Incoming<OnQuietReq>},
      {kAmQuietAck, Incoming<OnQuietAck>}, {kAmFetchReply, Incoming<OnFetchReply>}, {kAmLeave, Incoming<OnLeave>},
      {kAmGet, Incoming<OnGet>},           {kAmGetReply, Incoming<OnGetReply>},     {kAmAmo, Incoming<OnAmo>}};
  for (const auto& h : handlers) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = h.id;
    hp.cb = h.cb;
    hp.arg = this;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    if ((st = ucp_worker_set_am_recv_handler(worker_, &hp)) != UCS_OK) return UcxError("active message handler", st);
  }
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = base_;
  mp.length = bytes_;
  if ((st = ucp_mem_map(ctx_, &mp, &memh_)) != UCS_OK)
    return UcxError("registering the " + std::to_string(bytes_) + "-byte heap segment", st);

  // One blob per rank: segment address, worker address, remote key.
  void* rkey_buf = nullptr;
  size_t rkey_len = 0;
  if ((st = ucp_rkey_pack(ctx_, memh_, &rkey_buf, &rkey_len)) != UCS_OK) return UcxError("rkey pack", st);
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  if ((st = ucp_worker_get_address(worker_, &addr, &addr_len)) != UCS_OK) {
    ucp_rkey_buffer_release(rkey_buf);
    return UcxError("worker address", st);
  }
  std::string blob(16 + addr_len + rkey_len, '\0');
  uint64_t lens[2] = {reinterpret_cast<uint64_t>(base_), static_cast<uint64_t>(addr_len)};
  std::memcpy(blob.data(), lens, 16);
  std::memcpy(blob.data() + 16, addr, addr_len);
  std::memcpy(blob.data() + 16 + addr_len, rkey_buf, rkey_len);
  ucp_worker_release_address(worker_, addr);
  ucp_rkey_buffer_release(rkey_buf);
  std::vector<std::string> all;
  HPSHMEM_RETURN_IF_ERROR(boot->AllgatherV(blob.data(), blob.size(), &all));

  // The progress thread runs from here on: connection set-up needs both sides.
  epfd_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  int efd = -1;
  if ((st = ucp_worker_get_efd(worker_, &efd)) != UCS_OK) return UcxError("worker event fd", st);
  if (!epfd_.valid() || !wake_.valid()) return Status::FromErrno("epoll/eventfd for the UCX progress thread");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = efd;
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, efd, &ev);
  ev.data.fd = wake_.get();
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  progress_ = std::thread([this] { ProgressLoop(); });

  for (int pe : peers_) {
    const std::string& b = all[pe];
    uint64_t hl[2];
    if (b.size() < 16) return Status::Bootstrap("rank " + std::to_string(pe) + " sent no UCX address");
    std::memcpy(hl, b.data(), 16);
    if (hl[1] > b.size() - 16) return Status::Bootstrap("rank " + std::to_string(pe) + " sent a malformed UCX address");
    rbase_[pe] = hl[0];
    ucp_ep_params_t ep{};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(b.data() + 16);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = OnEpError;
    ep.err_handler.arg = &ep_args_[pe];
    ucp_ep_h h = nullptr;
    if ((st = ucp_ep_create(worker_, &ep, &h)) != UCS_OK) return UcxError("endpoint to rank " + std::to_string(pe), st);
    if ((st = ucp_ep_rkey_unpack(h, b.data() + 16 + hl[1], &rkeys_[pe])) != UCS_OK) {
      eps_[pe] = h;  // closed by Shutdown
      return UcxError("remote key of rank " + std::to_string(pe), st);
    }
    uint64_t early;
    {
      std::lock_guard<std::mutex> lk(ep_mu_);
      eps_[pe] = h;
      early = std::exchange(early_echo_[pe], 0);
    }
    if (early) Echo(pe, early);
  }
  eps_ready_.store(true, std::memory_order_release);
  // A round trip to every peer: connections are up (or the failure is named) before Init returns.
  for (int pe : peers_) dirty_[pe] = 1;
  Status s = Quiet();
  if (s.code() == Code::kTimeout) {
    return Status::Timeout(s.message() +
                           ": UCX could not reach it; check UCX_TLS and UCX_NET_DEVICES (ucx_info -d "
                           "lists this host's transports and devices)");
  }
  return s;
}

// ---------------------------------------------------------------- completion

Status Ucx::Fail(int pe, const char* what, ucs_status_t st) {
  if (failed_[pe].load()) {
    return Status::PeerDead(std::string(what) + " to rank " + std::to_string(pe) +
                            ": the rank exited, was killed, or its connection was lost");
  }
  return UcxError(std::string(what) + " to rank " + std::to_string(pe), st);
}

template <class Done>
Status Ucx::WaitFor(Done&& done, int pe, const char* what) {
  if (done()) return Status::OK();
  Deadline dl(timeout_sec_);
  PollScope polling(this);
  for (unsigned i = 0; !done(); ++i) {
    if (failed_[pe].load()) return Fail(pe, what, UCS_ERR_CONNECTION_RESET);
    if (interrupted_.load(std::memory_order_acquire)) {
      return Status::NotInitialized("rank " + std::to_string(rank_) + ": " + what + " to rank " + std::to_string(pe) +
                                    " was interrupted: the runtime was finalized meanwhile");
    }
    if (ucp_worker_progress(worker_)) continue;
    if ((i & 255) == 0) {
      if (dl.Expired()) {
        return Status::Timeout("rank " + std::to_string(rank_) + ": " + what + " to rank " + std::to_string(pe) +
                               " did not complete within " + Seconds(timeout_sec_) +
                               " s (HYPER_PARALLEL_SHMEM_TIMEOUT_SEC)");
      }
      sched_yield();  // the progress thread may hold the worker
    }
  }
  return Status::OK();
}

Status Ucx::Wait(ucs_status_ptr_t req, int pe, const char* what) {
  if (req == nullptr) return Status::OK();
  if (UCS_PTR_IS_ERR(req)) return Fail(pe, what, UCS_PTR_STATUS(req));
  ucs_status_t st = UCS_INPROGRESS;
  Status s = WaitFor([&] { return (st = ucp_request_check_status(req)) != UCS_INPROGRESS; }, pe, what);
  if (!s.ok()) {
    ucp_request_cancel(worker_, req);
    ucp_request_free(req);  // released by UCX once the cancellation completes
    return s;
  }
  ucp_request_free(req);
  return st == UCS_OK ? Status::OK() : Fail(pe, what, st);
}

ucs_status_ptr_t Ucx::AmSend(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len) {
  CrossProcessRelease();
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  return ucp_am_send_nbx(eps_[pe], id, hdr, hlen, data, len, &p);
}

Status Ucx::WaitEcho(int pe, uint64_t seq, const char* what) {
  return WaitFor([&] { return quiet_acked_[pe].load(std::memory_order_acquire) >= seq; }, pe, what);
}

Status Ucx::Send(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len, bool track,
                 const char* what) {
  ucs_status_ptr_t req = AmSend(pe, id, hdr, hlen, data, len);
  // Marked once queued on the endpoint, so a Quiet that clears the mark sends
  // its marker behind this message.
  if (track && !UCS_PTR_IS_ERR(req)) dirty_[pe].store(1, std::memory_order_release);
  return Wait(req, pe, what);
}

void Ucx::Reply(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len) {
  if (!eps_[pe] || failed_[pe].load()) return;
  ucs_status_ptr_t req = AmSend(pe, id, hdr, hlen, data, len);
  if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);  // UCX releases it on completion
}

Status Ucx::StartQuiet(int pe, uint64_t* seq) {
  *seq = 0;
  if (!dirty_[pe].exchange(0, std::memory_order_acq_rel)) return Status::OK();
  quiet_round_trips_.fetch_add(1, std::memory_order_relaxed);
  *seq = quiet_sent_[pe].fetch_add(1) + 1;
  QuietHdr h{rank_, *seq};
  return Send(pe, kAmQuietReq, &h, sizeof h, nullptr, 0, false, "quiet");
}

Status Ucx::QuietPeer(int pe) {
  uint64_t seq;
  HPSHMEM_RETURN_IF_ERROR(StartQuiet(pe, &seq));
  return seq ? WaitEcho(pe, seq, "quiet") : Status::OK();
}

Status Ucx::Quiet() {
  std::vector<std::pair<int, uint64_t>> pending;
  for (int pe : peers_) {
    uint64_t seq;
    HPSHMEM_RETURN_IF_ERROR(StartQuiet(pe, &seq));
    if (seq) pending.emplace_back(pe, seq);
  }
  for (auto [pe, seq] : pending) HPSHMEM_RETURN_IF_ERROR(WaitEcho(pe, seq, "quiet"));
  return Status::OK();
}

// ---------------------------------------------------------------- verbs

Status Ucx::SendData(int pe, size_t off, const void* src, size_t bytes, PutSignalHdr last, const char* what) {
  size_t n = Pieces(bytes);
  std::vector<PutSignalHdr> hdrs(n);  // each must outlive its pending send
  std::vector<ucs_status_ptr_t> reqs;
  Status s;
  for (size_t i = 0; i < n && s.ok(); ++i) {
    size_t pos = i * kAmChunk, len = std::min(kAmChunk, bytes - pos);
    hdrs[i] = i + 1 == n ? last : PutSignalHdr{0, 0, 0, kNoSignal, 0, rank_, 0, last.gate_off, last.gate};
    hdrs[i].off = off + pos;
    ucs_status_ptr_t r =
        AmSend(pe, kAmPutSignal, &hdrs[i], sizeof(PutSignalHdr), static_cast<const uint8_t*>(src) + pos, len);
    if (UCS_PTR_IS_ERR(r))
      s = Fail(pe, what, UCS_PTR_STATUS(r));
    else if (r)
      reqs.push_back(r);
  }
  for (ucs_status_ptr_t r : reqs) {  // every one, even after a failure: the headers go with this frame
    Status w = Wait(r, pe, what);
    if (s.ok()) s = w;
  }
  return s;
}

Status Ucx::Put(int pe, size_t off, const void* src, size_t bytes) {
  if (rma_) return RmaPut(pe, off, src, bytes);
  // The data as messages (in order behind everything sent before), the last
  // asking for the quiet echo, which also covers everything sent to pe
  // before it: on the echo the bytes are at the target.
  dirty_[pe].store(0, std::memory_order_release);
  uint64_t seq = quiet_sent_[pe].fetch_add(1) + 1;
  HPSHMEM_RETURN_IF_ERROR(SendData(pe, off, src, bytes, PutSignalHdr{0, 0, 0, kNoSignal, 0, rank_, seq, 0, 0}, "put"));
  return WaitEcho(pe, seq, "put");
}

Status Ucx::PutNbi(int pe, size_t off, const void* src, size_t bytes) {
  // RMA would need a flush per endpoint in Quiet and before every later
  // message to order it: there a put stays a completed one.
  if (rma_) return RmaPut(pe, off, src, bytes);
  // The messages of Put without its echo: sent in order behind everything
  // before, and marked for the next Quiet to complete.
  HPSHMEM_RETURN_IF_ERROR(SendData(pe, off, src, bytes, PutSignalHdr{0, 0, 0, kNoSignal, 0, rank_, 0, 0, 0}, "put"));
  dirty_[pe].store(1, std::memory_order_release);
  return Status::OK();
}

Status Ucx::RmaPut(int pe, size_t off, const void* src, size_t bytes) {
  HPSHMEM_RETURN_IF_ERROR(QuietPeer(pe));  // messages sent earlier land first
  ucp_request_param_t p{};
  HPSHMEM_RETURN_IF_ERROR(Wait(ucp_put_nbx(eps_[pe], src, bytes, rbase_[pe] + off, rkeys_[pe], &p), pe, "put"));
  // Remote completion: on return the bytes are at the target.
  return Wait(ucp_ep_flush_nbx(eps_[pe], &p), pe, "put (flush)");
}

Status Ucx::Get(int pe, void* dst, size_t off, size_t bytes) {
  if (rma_) return RmaGet(pe, dst, off, bytes);
  // A request, and replies carrying the data: one round trip. The request is
  // handled after everything this rank sent to pe before it, so no quiet is
  // needed first (an RMA get would need one).
  std::lock_guard<std::mutex> lk(get_mu_);
  uint64_t seq = get_seq_.load() + 1;
  {
    std::lock_guard<std::mutex> rlk(get_reply_mu_);
    get_dst_ = static_cast<uint8_t*>(dst);
    get_len_ = bytes;
    get_received_ = 0;
    get_seq_.store(seq, std::memory_order_release);
    get_open_ = true;
  }
  GetHdr h{rank_, seq, off, bytes};
  Status s = Send(pe, kAmGet, &h, sizeof h, nullptr, 0, false, "get");
  if (s.ok()) s = WaitFor([&] { return get_done_.load(std::memory_order_acquire) >= seq; }, pe, "get");
  // After a failure a late reply must not write into `dst`, which is the caller's again.
  std::lock_guard<std::mutex> rlk(get_reply_mu_);
  get_open_ = false;
  return s;
}

Status Ucx::RmaGet(int pe, void* dst, size_t off, size_t bytes) {
  HPSHMEM_RETURN_IF_ERROR(QuietPeer(pe));  // a get sees what this rank sent before it
  ucp_request_param_t p{};
  return Wait(ucp_get_nbx(eps_[pe], dst, bytes, rbase_[pe] + off, rkeys_[pe], &p), pe, "get");
}

Status Ucx::Signal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) {
  SignalHdr h{off, value, static_cast<uint8_t>(type), static_cast<uint8_t>(op)};
  return Send(pe, kAmSignal, &h, sizeof h, nullptr, 0, !InCollective(), "signal");
}

Status Ucx::ProtocolSignal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) {
  SignalHdr h{off, value, static_cast<uint8_t>(type), static_cast<uint8_t>(op)};
  return Send(pe, kAmSignal, &h, sizeof h, nullptr, 0, false, "signal");
}

Status Ucx::PutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type, SignalOp op,
                      int64_t value) {
  if (rma_ && bytes > kAmChunk) {
    HPSHMEM_RETURN_IF_ERROR(RmaPut(pe, off, src, bytes));
    return Signal(pe, sig_off, type, op, value);
  }
  return SendPutSignal(pe, off, src, bytes, sig_off, type, op, value, 0, 0, "put-with-signal");
}

Status Ucx::PutSignalGated(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type,
                           SignalOp op, int64_t value, size_t gate_off, int64_t gate_value) {
  // Always messages (also under UCX RMA): only a message can be held.
  return SendPutSignal(pe, off, src, bytes, sig_off, type, op, value, gate_off, gate_value, "gated put-with-signal");
}

Status Ucx::SendPutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type,
                          SignalOp op, int64_t value, size_t gate_off, int64_t gate_value, const char* what) {
  // The signal rides on the last piece, so it lands after every byte.
  PutSignalHdr last{0, sig_off,  value,     static_cast<uint8_t>(type), static_cast<uint8_t>(op), rank_,
                    0, gate_off, gate_value};
  HPSHMEM_RETURN_IF_ERROR(SendData(pe, off, src, bytes, last, what));
  if (!InCollective()) dirty_[pe].store(1, std::memory_order_release);
  return Status::OK();
}

Status Ucx::Amo(int pe, size_t off, SignalType type, AmoOp op, int64_t value, int64_t compare, int64_t* old) {
  // A round trip even without a result: the caller may rely on the update
  // being applied (a lock handed over) when this returns.
  std::lock_guard<std::mutex> lk(fetch_mu_);
  uint64_t seq = fetch_seq_.fetch_add(1) + 1;
  AmoHdr h{rank_, seq, off, value, compare, static_cast<uint8_t>(type), static_cast<uint8_t>(op)};
  HPSHMEM_RETURN_IF_ERROR(Send(pe, kAmAmo, &h, sizeof h, nullptr, 0, false, "atomic"));
  HPSHMEM_RETURN_IF_ERROR(WaitFor([&] { return fetch_done_.load(std::memory_order_acquire) >= seq; }, pe, "atomic"));
  if (old) *old = fetch_old_.load(std::memory_order_acquire);
  return Status::OK();
}

Status Ucx::AmoNbi(int pe, size_t off, SignalType type, AmoOp op, int64_t value) {
  // Sequence 0: pe applies it without a reply; Quiet's marker, behind it on
  // the same endpoint, completes it.
  AmoHdr h{rank_, 0, off, value, 0, static_cast<uint8_t>(type), static_cast<uint8_t>(op)};
  return Send(pe, kAmAmo, &h, sizeof h, nullptr, 0, true, "atomic");
}

// ---------------------------------------------------------------- arrivals

void Ucx::ApplyAndNotify(uint64_t off, uint8_t type, uint8_t op, int64_t value) {
  auto t = static_cast<SignalType>(type);
  size_t w = static_cast<size_t>(type);
  if ((t != SignalType::kInt32 && t != SignalType::kInt64) || !InSegment(off, w) || off % w || op > 1) {
    HP_WARN("UCX: dropped a malformed signal (offset %llu, type %u, op %u)", static_cast<unsigned long long>(off), type,
            op);
    return;
  }
  ApplyAtomic(base_ + off, t, static_cast<SignalOp>(op), value);
  Notify(DoorbellFor(base_, off));
}

ucs_status_t Ucx::OnSignal(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  SignalHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  static_cast<Ucx*>(arg)->ApplyAndNotify(h.off, h.type, h.op, h.value);
  return UCS_OK;
}

ucs_status_t Ucx::OnPutSignal(void* arg, const void* hdr, size_t hlen, void* data, size_t len,
                              const ucp_am_recv_param_t* p) {
  auto* self = static_cast<Ucx*>(arg);
  PutSignalHdr h;
  if (hlen != sizeof h || (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    HP_WARN("UCX: dropped a malformed put-with-signal");
    return UCS_OK;
  }
  std::memcpy(&h, hdr, sizeof h);
  if (!self->InSegment(h.off, len) || (h.gate_off && (!self->InSegment(h.gate_off, 8) || h.gate_off % 8)) ||
      h.from < 0 || h.from >= self->nranks_) {
    HP_WARN("UCX: dropped a put-with-signal outside the heap");
    return UCS_OK;
  }
  if (h.gate_off) {
    std::unique_lock<std::mutex> lk(self->held_mu_);
    if (self->held_from_[h.from] || LoadSignal(self->base_ + h.gate_off, SignalType::kInt64) < h.gate) {
      // Not yet: keep a copy, in order behind this sender's other held messages.
      ++self->held_from_[h.from];
      const auto* d = static_cast<const uint8_t*>(data);
      self->held_.push_back(Held{h, std::vector<uint8_t>(d, d + len)});
      return UCS_OK;
    }
  }
  self->ApplyPut(h, data, len);
  if (h.echo) self->Echo(h.from, h.echo);
  return UCS_OK;
}

void Ucx::ApplyPut(const PutSignalHdr& h, const void* data, size_t len) {
  if (len) std::memcpy(base_ + h.off, data, len);
  StoreFence();
  if (h.type != kNoSignal)
    ApplyAndNotify(h.sig_off, h.type, h.op, h.value);
  else
    Notify(DoorbellFor(base_, h.off));  // a waiter may watch the bytes themselves (WaitUntil)
}

void Ucx::ReleaseGated() {
  std::vector<std::pair<int, uint64_t>> echoes;  // sent once the lock is dropped: sending takes UCX's lock
  {
    std::lock_guard<std::mutex> lk(held_mu_);
    if (held_.empty()) return;
    std::vector<uint8_t> blocked(nranks_, 0);  // a sender whose first held message stays holds the rest
    for (auto it = held_.begin(); it != held_.end();) {
      const PutSignalHdr& h = it->hdr;
      if (blocked[h.from] || LoadSignal(base_ + h.gate_off, SignalType::kInt64) < h.gate) {
        blocked[h.from] = 1;
        ++it;
        continue;
      }
      ApplyPut(h, it->data.data(), it->data.size());
      if (h.echo) echoes.emplace_back(h.from, h.echo);
      --held_from_[h.from];
      it = held_.erase(it);
    }
  }
  for (auto [to, seq] : echoes) Echo(to, seq);
}

ucs_status_t Ucx::OnQuietReq(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<Ucx*>(arg);
  QuietHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  if (h.from < 0 || h.from >= self->nranks_) return UCS_OK;
  self->Echo(h.from, h.seq);
  return UCS_OK;
}

void Ucx::Echo(int to, uint64_t seq) {
  // Everything `to` sent before the message carrying `seq` has been handled.
  if (to < 0 || to >= nranks_) return;
  if (!eps_ready_.load(std::memory_order_acquire)) {
    // During set-up a peer's marker can arrive before this rank has its
    // endpoint back to that peer: answer once the endpoint exists.
    std::lock_guard<std::mutex> lk(ep_mu_);
    if (!eps_[to]) {
      early_echo_[to] = std::max(early_echo_[to], seq);
      return;
    }
  }
  ack_slot_[to] = QuietHdr{rank_, seq};
  Reply(to, kAmQuietAck, &ack_slot_[to], sizeof(QuietHdr));
}

ucs_status_t Ucx::OnQuietAck(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<Ucx*>(arg);
  QuietHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  if (h.from < 0 || h.from >= self->nranks_) return UCS_OK;
  std::atomic<uint64_t>& acked = self->quiet_acked_[h.from];
  uint64_t cur = acked.load();
  while (cur < h.seq && !acked.compare_exchange_weak(cur, h.seq)) {
  }
  return UCS_OK;
}

ucs_status_t Ucx::OnAmo(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<Ucx*>(arg);
  AmoHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  if (h.from < 0 || h.from >= self->nranks_) return UCS_OK;
  auto t = static_cast<SignalType>(h.type);
  size_t w = static_cast<size_t>(h.type);
  int64_t old = 0;
  if ((t != SignalType::kInt32 && t != SignalType::kInt64) || !self->InSegment(h.off, w) || h.off % w ||
      h.op > static_cast<uint8_t>(AmoOp::kFetch)) {
    HP_WARN("UCX: dropped a malformed atomic (offset %llu, type %u, op %u)", static_cast<unsigned long long>(h.off),
            h.type, h.op);
  } else {
    old = ApplyAmo(self->base_ + h.off, t, static_cast<AmoOp>(h.op), h.value, h.compare);
    if (static_cast<AmoOp>(h.op) != AmoOp::kFetch) Notify(DoorbellFor(self->base_, h.off));
  }
  if (h.seq == 0) return UCS_OK;  // AmoNbi: nobody waits for an answer
  // Answered even when dropped, so that the sender does not wait out its timeout.
  self->fetch_slot_[h.from] = FetchReplyHdr{h.seq, old};
  self->Reply(h.from, kAmFetchReply, &self->fetch_slot_[h.from], sizeof(FetchReplyHdr));
  return UCS_OK;
}

ucs_status_t Ucx::OnFetchReply(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<Ucx*>(arg);
  FetchReplyHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  self->fetch_old_.store(h.old, std::memory_order_relaxed);
  self->fetch_done_.store(h.seq, std::memory_order_release);
  return UCS_OK;
}

ucs_status_t Ucx::OnLeave(void* arg, const void* hdr, size_t hlen, void* data, size_t len, const ucp_am_recv_param_t*) {
  auto* self = static_cast<Ucx*>(arg);
  int32_t from;
  if (hlen != sizeof from || len % sizeof(int32_t)) return UCS_OK;
  std::memcpy(&from, hdr, sizeof from);
  // The dead ranks first: they are the cause; the leaver is only a consequence.
  for (size_t i = 0; i < len / sizeof(int32_t); ++i) {
    int32_t r;
    std::memcpy(&r, static_cast<const char*>(data) + i * sizeof r, sizeof r);
    if (r >= 0 && r < self->nranks_ && r != self->rank_) self->Lost(r);
  }
  if (from >= 0 && from < self->nranks_) self->Lost(from);
  return UCS_OK;
}

ucs_status_t Ucx::OnGet(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<Ucx*>(arg);
  GetHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  if (h.from < 0 || h.from >= self->nranks_ || !self->InSegment(h.off, h.len)) {
    HP_WARN("UCX: dropped a malformed get request");
    return UCS_OK;
  }
  // The data goes straight from the heap, in pieces; their headers must
  // outlive pending sends (the requester has one get in flight, so the
  // previous request's replies have all arrived).
  std::vector<GetReplyHdr>& hdrs = self->get_reply_[h.from];
  size_t n = Pieces(h.len);
  hdrs.assign(n, GetReplyHdr{h.seq, 0});
  for (size_t i = 0; i < n; ++i) {
    hdrs[i].pos = i * kAmChunk;
    self->Reply(h.from, kAmGetReply, &hdrs[i], sizeof(GetReplyHdr), self->base_ + h.off + hdrs[i].pos,
                std::min<size_t>(kAmChunk, h.len - hdrs[i].pos));
  }
  return UCS_OK;
}

ucs_status_t Ucx::OnGetReply(void* arg, const void* hdr, size_t hlen, void* data, size_t len,
                             const ucp_am_recv_param_t*) {
  auto* self = static_cast<Ucx*>(arg);
  GetReplyHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  // Only replies to the get in flight, and only while it waits for them.
  std::lock_guard<std::mutex> lk(self->get_reply_mu_);
  if (!self->get_open_ || h.seq != self->get_seq_.load(std::memory_order_acquire) || h.pos > self->get_len_ ||
      len > self->get_len_ - h.pos) {
    return UCS_OK;
  }
  std::memcpy(self->get_dst_ + h.pos, data, len);
  self->get_received_ += len;
  if (self->get_received_ == self->get_len_) self->get_done_.store(h.seq, std::memory_order_release);
  return UCS_OK;
}

// ---------------------------------------------------------------- progress and failure

void Ucx::Leave(const std::vector<int>& lost) {
  std::vector<int32_t> list(lost.begin(), lost.end());
  int32_t me = rank_;
  for (int pe : peers_) {
    if (failed_[pe].load()) continue;
    // Best effort, bounded: the peer may be gone too.
    (void)Send(pe, kAmLeave, &me, sizeof me, list.data(), list.size() * sizeof(int32_t), false, "leave");
  }
}

void Ucx::ProgressLoop() {
  epoll_event ev[4];
  while (!stopping_.load(std::memory_order_acquire)) {
    // Application threads that poll in a wait get the worker to themselves:
    // two threads progressing one worker fight for its lock, and on a host
    // with fewer cores than threads the loser spins away the holder's time
    // slice. The worker comes back here once nobody has polled for
    // kHandBackUs (between calls, the application usually polls again much
    // sooner), or at once when a poller goes to sleep (PollEnd).
    auto aside_us = [&] {
      if (polling_.load(std::memory_order_seq_cst) > 0) return kHandBackUs;
      int64_t last = last_poll_ns_.load(std::memory_order_relaxed);
      return last ? kHandBackUs - (NowNs() - last) / 1000 : int64_t{0};
    };
    if (int64_t us = aside_us(); us > 0) {
      parked_.store(1, std::memory_order_seq_cst);
      if ((us = aside_us()) > 0 && !stopping_.load(std::memory_order_acquire)) {
        FutexWaitUs(reinterpret_cast<uint32_t*>(&parked_), 1, us);
      }
      parked_.store(0, std::memory_order_seq_cst);
      continue;
    }
    // A burst (a large put is many fragments) keeps coming: after more than
    // one event, poll on for a short while before paying for a sleep and a
    // wake-up per fragment. A single message (a signal) goes straight back
    // to sleep, leaving the worker to the application threads. Idle, this
    // costs nothing.
    unsigned events = 0;
    while (ucp_worker_progress(worker_)) ++events;
    if (events > 1) {
      auto last = Clock::now();
      while (Clock::now() - last < kProgressLinger) {
        if (ucp_worker_progress(worker_))
          last = Clock::now();
        else
          sched_yield();
      }
    }
    ucs_status_t st = ucp_worker_arm(worker_);
    if (st == UCS_ERR_BUSY) continue;  // more arrived meanwhile
    if (st != UCS_OK) {
      HP_WARN("UCX: worker arm failed (%s); polling every millisecond", ucs_status_string(st));
      ::usleep(1000);
      continue;
    }
    // Asleep until the network or Shutdown has something. Bounded: an
    // application thread progressing the same worker can take an arrival
    // off the socket after this thread armed, and then no event would ever
    // wake it for what that thread left queued. A few hundred empty wake-ups
    // a second cost next to nothing.
    ::epoll_wait(epfd_.get(), ev, 4, kIdleWakeMs);
  }
}

void Ucx::OnEpError(void* arg, ucp_ep_h, ucs_status_t st) {
  auto* a = static_cast<EpArg*>(arg);
  HP_DEBUG("UCX: endpoint to rank %d failed: %s", a->pe, ucs_status_string(st));
  a->self->Lost(a->pe);
}

void Ucx::Lost(int pe) {
  if (failed_[pe].exchange(1)) return;
  std::lock_guard<std::mutex> lk(lost_mu_);
  if (on_lost_)
    on_lost_({pe});
  else
    lost_early_.push_back(pe);
}

void Ucx::StartMonitor(std::function<void(const std::vector<int>&)> on_peers_lost) {
  std::lock_guard<std::mutex> lk(lost_mu_);
  on_lost_ = std::move(on_peers_lost);
  if (!lost_early_.empty()) on_lost_(lost_early_);
  lost_early_.clear();
}

void Ucx::Shutdown() {
  if (shut_) return;
  shut_ = true;
  if (progress_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    FutexWakeAll(reinterpret_cast<uint32_t*>(&parked_));
    uint64_t one = 1;
    ssize_t w = ::write(wake_.get(), &one, sizeof one);
    (void)w;
    progress_.join();
  }
  for (auto& rk : rkeys_) {
    if (rk) ucp_rkey_destroy(rk);
    rk = nullptr;
  }
  // Force-close: every rank has passed the final barrier, nothing is owed.
  std::vector<ucs_status_ptr_t> closing;
  for (auto& ep : eps_) {
    if (!ep) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
    ep = nullptr;
  }
  Deadline dl(2.0);
  for (ucs_status_ptr_t r : closing) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && !dl.Expired()) ucp_worker_progress(worker_);
    ucp_request_free(r);
  }
  if (memh_) ucp_mem_unmap(ctx_, memh_);
  memh_ = nullptr;
  if (worker_) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (ctx_) ucp_cleanup(ctx_);
  ctx_ = nullptr;
  epfd_.Reset();
  wake_.Reset();
}

Status Ucx::Connect(const std::vector<PeerCard>&, const std::vector<bool>& reach, double timeout_sec) {
  bool any = false;
  for (bool r : reach) any |= r;
  if (!any) {  // still take part in the exchange the other ranks make
    std::vector<std::string> all;
    return boot_->AllgatherV(nullptr, 0, &all);
  }
  return Setup(boot_, seg_, reach, timeout_sec);  // on failure, ~Ucx releases what was set up
}

}  // namespace

std::unique_ptr<Transport> NewUcxTransport(Bootstrap* boot, LocalSegment* seg, bool rma) {
  return std::make_unique<Ucx>(boot, seg, rma);
}

}  // namespace hpshmem
