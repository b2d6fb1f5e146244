// The sending side of the UCX transport: set-up, the verbs and their
// completion. See ucx_transport.h for the protocol.
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "copy.h"
#include "log.h"
#include "ucx_data_path.h"
#include "wait.h"

namespace hpshmem {

std::unique_ptr<Transport> NewUcxTransport(Bootstrap* boot, LocalSegment* seg, bool rma, double peer_timeout_sec) {
  return std::make_unique<UcxTransport>(boot, seg, rma, peer_timeout_sec);
}

Status UcxTransport::Connect(const std::vector<PeerCard>&, const std::vector<bool>& reach, double timeout_sec) {
  bool any = false;
  for (bool r : reach) any |= r;
  if (!any) {  // still take part in the exchange the other ranks make
    std::vector<std::string> all;
    return boot_->AllgatherV(nullptr, 0, &all);
  }
  return Setup(reach, timeout_sec);  // on failure, Shutdown releases what was set up
}

Status UcxTransport::Setup(const std::vector<bool>& remote, double timeout_sec) {
  rank_ = boot_->rank();
  nranks_ = boot_->nranks();
  beat_hdr_ = rank_;
  timeout_sec_ = timeout_sec;
  base_ = seg_->base();
  bytes_ = seg_->bytes();
  for (int r = 0; r < nranks_; ++r)
    if (remote[r]) peers_.push_back(r);
  ack_slot_.resize(nranks_);
  fetch_slot_.resize(nranks_);
  get_reply_.resize(nranks_);
  dirty_.reset(new std::atomic<uint8_t>[nranks_]);
  last_heard_.reset(new std::atomic<int64_t>[nranks_]);
  quiet_sent_.reset(new std::atomic<uint64_t>[nranks_]);
  quiet_acked_.reset(new std::atomic<uint64_t>[nranks_]);
  for (int r = 0; r < nranks_; ++r) {
    dirty_[r] = 0;
    quiet_sent_[r] = 0;
    quiet_acked_[r] = 0;
    last_heard_[r] = 0;
  }
  HPSHMEM_RETURN_IF_ERROR(conn_.Open(nranks_, base_, bytes_, Handlers(), this));
  std::vector<std::string> all;
  HPSHMEM_RETURN_IF_ERROR(conn_.Exchange(boot_, &all));
  // The progress thread runs from here on: connection set-up needs both sides.
  HPSHMEM_RETURN_IF_ERROR(progress_.Start(conn_.worker(), [this] { Watch(); }, kBeatMs));
  HPSHMEM_RETURN_IF_ERROR(conn_.Connect(all, peers_, [this](int pe, uint64_t seq) { Echo(pe, seq); }));
  // A round trip to every peer: connections are up (or the failure is named) before Init returns.
  for (int pe : peers_) dirty_[pe] = 1;
  Status s = Quiet();
  if (s.ok()) {
    for (int pe : peers_) last_heard_[pe].store(MonotonicNs(), std::memory_order_relaxed);
    watching_.store(true, std::memory_order_release);
  }
  if (s.code() == Code::kTimeout) {
    return Status::Timeout(s.message() +
                           ": UCX could not reach it; check UCX_TLS and UCX_NET_DEVICES (ucx_info -d "
                           "lists this host's transports and devices)");
  }
  return s;
}

void UcxTransport::Watch() {
  if (!watching_.load(std::memory_order_acquire)) return;
  for (int pe : peers_) conn_.Post(pe, kAmHeartbeat, &beat_hdr_, sizeof beat_hdr_);
  if (peer_timeout_sec_ <= 0) return;
  const int64_t now = MonotonicNs(), limit = static_cast<int64_t>(peer_timeout_sec_ * 1e9);
  for (int pe : peers_) {
    if (conn_.failed(pe) || now - last_heard_[pe].load(std::memory_order_relaxed) <= limit) continue;
    conn_.Lost(pe, "became unreachable: nothing heard for " + Seconds(peer_timeout_sec_) +
                       " s (HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC): the network to its host is down, the host is "
                       "down, or the process is stopped");
  }
}

void UcxTransport::Shutdown() {
  if (shut_) return;
  shut_ = true;
  progress_.Stop();  // first: it touches the worker
  conn_.Close();
}

// ---------------------------------------------------------------- completion

template <class Done>
Status UcxTransport::WaitFor(Done&& done, int pe, const char* what) {
  if (done()) return Status::OK();
  Deadline dl(timeout_sec_);
  PollScope polling(this);
  for (unsigned i = 0; !done(); ++i) {
    if (conn_.failed(pe)) return conn_.Fail(pe, what, UCS_ERR_CONNECTION_RESET);
    if (interrupted_.load(std::memory_order_acquire)) {
      return Status::NotInitialized("rank " + std::to_string(rank_) + ": " + what + " to rank " + std::to_string(pe) +
                                    " was interrupted: the runtime was finalized meanwhile");
    }
    if (ucp_worker_progress(conn_.worker())) continue;
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

Status UcxTransport::Wait(ucs_status_ptr_t req, int pe, const char* what) {
  if (req == nullptr) return Status::OK();
  if (UCS_PTR_IS_ERR(req)) return conn_.Fail(pe, what, UCS_PTR_STATUS(req));
  ucs_status_t st = UCS_INPROGRESS;
  Status s = WaitFor([&] { return (st = ucp_request_check_status(req)) != UCS_INPROGRESS; }, pe, what);
  if (!s.ok()) {
    ucp_request_cancel(conn_.worker(), req);
    ucp_request_free(req);  // released by UCX once the cancellation completes
    return s;
  }
  ucp_request_free(req);
  return st == UCS_OK ? Status::OK() : conn_.Fail(pe, what, st);
}

Status UcxTransport::WaitEcho(int pe, uint64_t seq, const char* what) {
  return WaitFor([&] { return quiet_acked_[pe].load(std::memory_order_acquire) >= seq; }, pe, what);
}

Status UcxTransport::Send(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len, bool track,
                          const char* what) {
  ucs_status_ptr_t req = conn_.AmSend(pe, id, hdr, hlen, data, len);
  // Marked once queued on the endpoint, so a Quiet that clears the mark sends
  // its marker behind this message.
  if (track && !UCS_PTR_IS_ERR(req)) dirty_[pe].store(1, std::memory_order_release);
  return Wait(req, pe, what);
}

Status UcxTransport::StartQuiet(int pe, uint64_t* seq) {
  *seq = 0;
  if (!dirty_[pe].exchange(0, std::memory_order_acq_rel)) return Status::OK();
  quiet_round_trips_.fetch_add(1, std::memory_order_relaxed);
  *seq = quiet_sent_[pe].fetch_add(1) + 1;
  QuietHdr h{rank_, *seq};
  return Send(pe, kAmQuietReq, &h, sizeof h, nullptr, 0, false, "quiet");
}

Status UcxTransport::QuietPeer(int pe) {
  uint64_t seq;
  HPSHMEM_RETURN_IF_ERROR(StartQuiet(pe, &seq));
  return seq ? WaitEcho(pe, seq, "quiet") : Status::OK();
}

Status UcxTransport::Quiet() {
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

Status UcxTransport::SendData(int pe, size_t off, const void* src, size_t bytes, PutSignalHdr last, const char* what) {
  size_t n = Pieces(bytes);
  std::vector<PutSignalHdr> hdrs(n);  // each must outlive its pending send
  std::vector<ucs_status_ptr_t> reqs;
  Status s;
  for (size_t i = 0; i < n && s.ok(); ++i) {
    size_t pos = i * kAmChunk, len = std::min(kAmChunk, bytes - pos);
    hdrs[i] = i + 1 == n ? last : PutSignalHdr{0, 0, 0, kNoSignal, 0, rank_, 0};
    hdrs[i].off = off + pos;
    ucs_status_ptr_t r =
        conn_.AmSend(pe, kAmPutSignal, &hdrs[i], sizeof(PutSignalHdr), static_cast<const uint8_t*>(src) + pos, len);
    if (UCS_PTR_IS_ERR(r))
      s = conn_.Fail(pe, what, UCS_PTR_STATUS(r));
    else if (r)
      reqs.push_back(r);
  }
  for (ucs_status_ptr_t r : reqs) {  // every one, even after a failure: the headers go with this frame
    Status w = Wait(r, pe, what);
    if (s.ok()) s = w;
  }
  return s;
}

Status UcxTransport::Put(int pe, size_t off, const void* src, size_t bytes) {
  if (rma_) return RmaPut(pe, off, src, bytes);
  // The data as messages (in order behind everything sent before), the last
  // asking for the quiet echo, which also covers everything sent to pe
  // before it: on the echo the bytes are at the target.
  dirty_[pe].store(0, std::memory_order_release);
  uint64_t seq = quiet_sent_[pe].fetch_add(1) + 1;
  HPSHMEM_RETURN_IF_ERROR(SendData(pe, off, src, bytes, PutSignalHdr{0, 0, 0, kNoSignal, 0, rank_, seq}, "put"));
  return WaitEcho(pe, seq, "put");
}

Status UcxTransport::PutNbi(int pe, size_t off, const void* src, size_t bytes) {
  // RMA would need a flush per endpoint in Quiet and before every later
  // message to order it: there a put stays a completed one.
  if (rma_) return RmaPut(pe, off, src, bytes);
  // The messages of Put without its echo: sent in order behind everything
  // before, and marked for the next Quiet to complete.
  HPSHMEM_RETURN_IF_ERROR(SendData(pe, off, src, bytes, PutSignalHdr{0, 0, 0, kNoSignal, 0, rank_, 0}, "put"));
  dirty_[pe].store(1, std::memory_order_release);
  return Status::OK();
}

Status UcxTransport::RmaPut(int pe, size_t off, const void* src, size_t bytes) {
  HPSHMEM_RETURN_IF_ERROR(QuietPeer(pe));  // messages sent earlier land first
  ucp_request_param_t p{};
  HPSHMEM_RETURN_IF_ERROR(
      Wait(ucp_put_nbx(conn_.ep(pe), src, bytes, conn_.remote_base(pe) + off, conn_.rkey(pe), &p), pe, "put"));
  // Remote completion: on return the bytes are at the target.
  return Wait(ucp_ep_flush_nbx(conn_.ep(pe), &p), pe, "put (flush)");
}

Status UcxTransport::Get(int pe, void* dst, size_t off, size_t bytes) {
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

Status UcxTransport::RmaGet(int pe, void* dst, size_t off, size_t bytes) {
  HPSHMEM_RETURN_IF_ERROR(QuietPeer(pe));  // a get sees what this rank sent before it
  ucp_request_param_t p{};
  return Wait(ucp_get_nbx(conn_.ep(pe), dst, bytes, conn_.remote_base(pe) + off, conn_.rkey(pe), &p), pe, "get");
}

Status UcxTransport::Signal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) {
  SignalHdr h{off, value, static_cast<uint8_t>(type), static_cast<uint8_t>(op)};
  return Send(pe, kAmSignal, &h, sizeof h, nullptr, 0, !InCollective(), "signal");
}

Status UcxTransport::ProtocolSignal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) {
  SignalHdr h{off, value, static_cast<uint8_t>(type), static_cast<uint8_t>(op)};
  return Send(pe, kAmSignal, &h, sizeof h, nullptr, 0, false, "signal");
}

Status UcxTransport::PutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type,
                               SignalOp op, int64_t value) {
  if (rma_ && bytes > kAmChunk) {
    HPSHMEM_RETURN_IF_ERROR(RmaPut(pe, off, src, bytes));
    return Signal(pe, sig_off, type, op, value);
  }
  return SendPutSignal(pe, off, src, bytes, sig_off, type, op, value, "put-with-signal");
}

Status UcxTransport::SendPutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type,
                                   SignalOp op, int64_t value, const char* what) {
  // The signal rides on the last piece, so it lands after every byte.
  PutSignalHdr last{0, sig_off, value, static_cast<uint8_t>(type), static_cast<uint8_t>(op), rank_, 0};
  HPSHMEM_RETURN_IF_ERROR(SendData(pe, off, src, bytes, last, what));
  if (!InCollective()) dirty_[pe].store(1, std::memory_order_release);
  return Status::OK();
}

Status UcxTransport::Amo(int pe, size_t off, SignalType type, AmoOp op, int64_t value, int64_t compare, int64_t* old) {
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

Status UcxTransport::AmoNbi(int pe, size_t off, SignalType type, AmoOp op, int64_t value) {
  // Sequence 0: pe applies it without a reply; Quiet's marker, behind it on
  // the same endpoint, completes it.
  AmoHdr h{rank_, 0, off, value, 0, static_cast<uint8_t>(type), static_cast<uint8_t>(op)};
  return Send(pe, kAmAmo, &h, sizeof h, nullptr, 0, true, "atomic");
}

// ---------------------------------------------------------------- failure

void UcxTransport::Leave(const std::vector<int>& lost) {
  std::vector<int32_t> list(lost.begin(), lost.end());
  int32_t me = rank_;
  for (int pe : peers_) {
    if (conn_.failed(pe)) continue;
    // Best effort, bounded: the peer may be gone too.
    (void)Send(pe, kAmLeave, &me, sizeof me, list.data(), list.size() * sizeof(int32_t), false, "leave");
  }
}

}  // namespace hpshmem
