#include "ucx_connection.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "log.h"
#include "wait.h"

namespace hpshmem {
namespace {

constexpr char kTcpRxSegment[] = "256k";  // > kAmChunk plus its header

}  // namespace

Status UcxError(const std::string& what, ucs_status_t st) {
  return Status(Code::kSystem, "UCX " + what + ": " + ucs_status_string(st));
}

Status UcxConnection::Open(int nranks, uint8_t* base, size_t bytes, const std::vector<AmHandler>& handlers, void* arg) {
  nranks_ = nranks;
  base_ = base;
  bytes_ = bytes;
  eps_.assign(nranks_, nullptr);
  rkeys_.assign(nranks_, nullptr);
  rbase_.assign(nranks_, 0);
  ep_args_.resize(nranks_);
  early_echo_.assign(nranks_, 0);
  failed_.reset(new std::atomic<uint8_t>[nranks_]);
  for (int r = 0; r < nranks_; ++r) {
    failed_[r] = 0;
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
  for (const AmHandler& h : handlers) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = h.id;
    hp.cb = h.cb;
    hp.arg = arg;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    if ((st = ucp_worker_set_am_recv_handler(worker_, &hp)) != UCS_OK) return UcxError("active message handler", st);
  }
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = base_;
  mp.length = bytes_;
  if ((st = ucp_mem_map(ctx_, &mp, &memh_)) != UCS_OK)
    return UcxError("registering the " + std::to_string(bytes_) + "-byte heap segment", st);
  return Status::OK();
}

Status UcxConnection::Exchange(Bootstrap* boot, std::vector<std::string>* all) {
  // One blob per rank: segment address, worker address, remote key.
  void* rkey_buf = nullptr;
  size_t rkey_len = 0;
  ucs_status_t st;
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
  return boot->AllgatherV(blob.data(), blob.size(), all);
}

Status UcxConnection::Connect(const std::vector<std::string>& all, const std::vector<int>& peers,
                              const std::function<void(int, uint64_t)>& owed) {
  ucs_status_t st;
  for (int pe : peers) {
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
      eps_[pe] = h;  // closed by Close
      return UcxError("remote key of rank " + std::to_string(pe), st);
    }
    uint64_t early;
    {
      std::lock_guard<std::mutex> lk(ep_mu_);
      eps_[pe] = h;
      early = std::exchange(early_echo_[pe], 0);
    }
    if (early) owed(pe, early);
  }
  eps_ready_.store(true, std::memory_order_release);
  return Status::OK();
}

bool UcxConnection::OweUntilConnected(int pe, uint64_t seq) {
  if (eps_ready_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lk(ep_mu_);
  if (eps_[pe]) return false;
  early_echo_[pe] = std::max(early_echo_[pe], seq);
  return true;
}

ucs_status_ptr_t UcxConnection::AmSend(int pe, unsigned id, const void* hdr, size_t hlen, const void* data,
                                       size_t len) {
  CrossProcessRelease();
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  return ucp_am_send_nbx(eps_[pe], id, hdr, hlen, data, len, &p);
}

void UcxConnection::Post(int pe, unsigned id, const void* hdr, size_t hlen, const void* data, size_t len) {
  if (!eps_[pe] || failed_[pe].load()) return;
  ucs_status_ptr_t req = AmSend(pe, id, hdr, hlen, data, len);
  if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);  // UCX releases it on completion
}

Status UcxConnection::Fail(int pe, const char* what, ucs_status_t st) const {
  if (failed_[pe].load()) {
    Transport::LostPeerFn lost_peer;
    {
      std::lock_guard<std::mutex> lk(lost_mu_);
      lost_peer = lost_peer_;
    }
    return Status::PeerDead(
        std::string(what) + " to " +
        (lost_peer ? lost_peer(pe) : "rank " + std::to_string(pe) + ": the rank " + kUnknownLossCause));
  }
  return UcxError(std::string(what) + " to rank " + std::to_string(pe), st);
}

// ---------------------------------------------------------------- failure

void UcxConnection::OnEpError(void* arg, ucp_ep_h, ucs_status_t st) {
  auto* a = static_cast<EpArg*>(arg);
  HP_DEBUG("UCX: endpoint to rank %d failed: %s", a->pe, ucs_status_string(st));
  // Which of the two it was, UCX does not tell: over TCP a killed process's
  // closed socket reads as an "Endpoint timeout" too, while a dead link
  // shows nothing here at all (TCP retransmits; see UcxTransport::Watch).
  a->self->Lost(a->pe, std::string("lost its connection (UCX: ") + ucs_status_string(st) +
                           "): the process exited or was killed, or the network to its host failed");
}

void UcxConnection::Lost(int pe, const std::string& cause) {
  if (failed_[pe].exchange(1)) return;
  std::lock_guard<std::mutex> lk(lost_mu_);
  if (on_lost_)
    on_lost_({pe}, cause);
  else
    lost_early_.emplace_back(pe, cause);
}

void UcxConnection::StartMonitor(Transport::LostFn on_peers_lost, Transport::LostPeerFn lost_peer) {
  std::lock_guard<std::mutex> lk(lost_mu_);
  on_lost_ = std::move(on_peers_lost);
  lost_peer_ = std::move(lost_peer);
  for (auto& [pe, cause] : lost_early_) on_lost_({pe}, cause);
  lost_early_.clear();
}

void UcxConnection::Close() {
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
}

}  // namespace hpshmem
