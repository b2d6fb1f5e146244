// Arrivals of the UCX transport: what peers' messages do here. Handlers run
// on whichever thread progresses the worker (the progress thread, or an
// application thread waiting), one at a time, in the order of each
// endpoint's messages.
#include <cstring>

#include "copy.h"
#include "log.h"
#include "ucx_data_path.h"
#include "wait.h"

namespace hpshmem {

std::vector<UcxConnection::AmHandler> UcxTransport::Handlers() {
  return {
      {kAmSignal, Incoming<OnSignal>},     {kAmPutSignal, Incoming<OnPutSignal>},   {kAmQuietReq, Incoming<OnQuietReq>},
      {kAmQuietAck, Incoming<OnQuietAck>}, {kAmFetchReply, Incoming<OnFetchReply>}, {kAmLeave, Incoming<OnLeave>},
      {kAmGet, Incoming<OnGet>},           {kAmGetReply, Incoming<OnGetReply>},     {kAmAmo, Incoming<OnAmo>},
      {kAmHeartbeat, OnHeartbeat}};
}

ucs_status_t UcxTransport::OnHeartbeat(void* arg, const void* hdr, size_t hlen, void*, size_t,
                                       const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
  int32_t from;
  if (hlen != sizeof from) return UCS_OK;
  std::memcpy(&from, hdr, sizeof from);
  if (from >= 0 && from < self->nranks_) self->last_heard_[from].store(MonotonicNs(), std::memory_order_relaxed);
  return UCS_OK;
}

void UcxTransport::ApplyAndNotify(uint64_t off, uint8_t type, uint8_t op, int64_t value) {
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

ucs_status_t UcxTransport::OnSignal(void* arg, const void* hdr, size_t hlen, void*, size_t,
                                    const ucp_am_recv_param_t*) {
  SignalHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  static_cast<UcxTransport*>(arg)->ApplyAndNotify(h.off, h.type, h.op, h.value);
  return UCS_OK;
}

ucs_status_t UcxTransport::OnPutSignal(void* arg, const void* hdr, size_t hlen, void* data, size_t len,
                                       const ucp_am_recv_param_t* p) {
  auto* self = static_cast<UcxTransport*>(arg);
  PutSignalHdr h;
  if (hlen != sizeof h || (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    HP_WARN("UCX: dropped a malformed put-with-signal");
    return UCS_OK;
  }
  std::memcpy(&h, hdr, sizeof h);
  if (!self->InSegment(h.off, len) || h.from < 0 || h.from >= self->nranks_) {
    HP_WARN("UCX: dropped a put-with-signal outside the heap");
    return UCS_OK;
  }
  self->ApplyPut(h, data, len);
  if (h.echo) self->Echo(h.from, h.echo);
  return UCS_OK;
}

void UcxTransport::ApplyPut(const PutSignalHdr& h, const void* data, size_t len) {
  if (len) std::memcpy(base_ + h.off, data, len);
  StoreFence();
  if (h.type != kNoSignal)
    ApplyAndNotify(h.sig_off, h.type, h.op, h.value);
  else
    Notify(DoorbellFor(base_, h.off));  // a waiter may watch the bytes themselves (WaitUntil)
}

ucs_status_t UcxTransport::OnQuietReq(void* arg, const void* hdr, size_t hlen, void*, size_t,
                                      const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
  QuietHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  if (h.from < 0 || h.from >= self->nranks_) return UCS_OK;
  self->Echo(h.from, h.seq);
  return UCS_OK;
}

void UcxTransport::Echo(int to, uint64_t seq) {
  // Everything `to` sent before the message carrying `seq` has been handled.
  if (to < 0 || to >= nranks_) return;
  if (conn_.OweUntilConnected(to, seq)) return;
  ack_slot_[to] = QuietHdr{rank_, seq};
  conn_.Post(to, kAmQuietAck, &ack_slot_[to], sizeof(QuietHdr));
}

ucs_status_t UcxTransport::OnQuietAck(void* arg, const void* hdr, size_t hlen, void*, size_t,
                                      const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
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

ucs_status_t UcxTransport::OnAmo(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
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
  self->conn_.Post(h.from, kAmFetchReply, &self->fetch_slot_[h.from], sizeof(FetchReplyHdr));
  return UCS_OK;
}

ucs_status_t UcxTransport::OnFetchReply(void* arg, const void* hdr, size_t hlen, void*, size_t,
                                        const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
  FetchReplyHdr h;
  if (hlen != sizeof h) return UCS_OK;
  std::memcpy(&h, hdr, sizeof h);
  self->fetch_old_.store(h.old, std::memory_order_relaxed);
  self->fetch_done_.store(h.seq, std::memory_order_release);
  return UCS_OK;
}

ucs_status_t UcxTransport::OnLeave(void* arg, const void* hdr, size_t hlen, void* data, size_t len,
                                   const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
  int32_t from;
  if (hlen != sizeof from || len % sizeof(int32_t)) return UCS_OK;
  std::memcpy(&from, hdr, sizeof from);
  // The dead ranks first: they are the cause; the leaver is only a consequence.
  for (size_t i = 0; i < len / sizeof(int32_t); ++i) {
    int32_t r;
    std::memcpy(&r, static_cast<const char*>(data) + i * sizeof r, sizeof r);
    if (r >= 0 && r < self->nranks_ && r != self->rank_)
      self->conn_.Lost(r, "was lost (rank " + std::to_string(from) + " saw it fail and left the job)");
  }
  if (from >= 0 && from < self->nranks_) self->conn_.Lost(from, "left the job after an error");
  return UCS_OK;
}

ucs_status_t UcxTransport::OnGet(void* arg, const void* hdr, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
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
    self->conn_.Post(h.from, kAmGetReply, &hdrs[i], sizeof(GetReplyHdr), self->base_ + h.off + hdrs[i].pos,
                     std::min<size_t>(kAmChunk, h.len - hdrs[i].pos));
  }
  return UCS_OK;
}

ucs_status_t UcxTransport::OnGetReply(void* arg, const void* hdr, size_t hlen, void* data, size_t len,
                                      const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
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

}  // namespace hpshmem
