// The data path of the UCX transport: the verbs as active messages (or UCX
// RMA), their completion (quiet markers and echoes), and the handlers that
// apply what peers send (ucx_arrivals.cc). The connection (ucx_connection.h)
// and the progress thread (ucx_progress.h) are its parts.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ucx_connection.h"
#include "ucx_progress.h"
#include "ucx_transport.h"
#include "ucx_wire.h"
#include "wait.h"

namespace hpshmem {

class UcxTransport final : public Transport {
 public:
  UcxTransport(Bootstrap* boot, LocalSegment* seg, bool rma, double peer_timeout_sec)
      : boot_(boot), seg_(seg), rma_(rma), peer_timeout_sec_(peer_timeout_sec) {}
  ~UcxTransport() override { Shutdown(); }

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
  Status Quiet() override;
  void Progress() override { ucp_worker_progress(conn_.worker()); }
  void PollBegin() override { progress_.PollBegin(); }
  void PollEnd(bool to_sleep) override { progress_.PollEnd(to_sleep); }
  void Interrupt() override { interrupted_.store(true, std::memory_order_release); }
  void Leave(const std::vector<int>& lost) override;
  void StartMonitor(LostFn on_peers_lost, LostPeerFn lost_peer) override {
    conn_.StartMonitor(std::move(on_peers_lost), std::move(lost_peer));
  }
  void Shutdown() override;

 private:
  // ---- arrivals (ucx_arrivals.cc), run by whichever thread progresses the worker

  // The handlers, by message id.
  static std::vector<UcxConnection::AmHandler> Handlers();
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
  static ucs_status_t OnHeartbeat(void* arg, const void* h, size_t hlen, void* data, size_t len,
                                  const ucp_am_recv_param_t* p);
  bool InSegment(uint64_t off, uint64_t len) const { return off <= bytes_ && len <= bytes_ - off; }
  void ApplyAndNotify(uint64_t off, uint8_t type, uint8_t op, int64_t value);
  // Writes a put-with-signal's bytes here, then applies its signal.
  void ApplyPut(const PutSignalHdr& h, const void* data, size_t len);
  // Answers a quiet marker (or a put asking for it) from rank `to`.
  void Echo(int to, uint64_t seq);

  // ---- sending and completion (ucx_data_path.cc)

  Status Setup(const std::vector<bool>& remote, double timeout_sec);
  // Run by the progress thread every kBeatMs: a heartbeat to every peer, and
  // a peer not heard from for peer_timeout_sec_ is lost. TCP says nothing
  // for minutes when a link or host goes down (it retransmits), nor does
  // UCX's keepalive over it; silence is how the runtime finds out.
  void Watch();
  static constexpr int kBeatMs = 500;
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
  // Progresses until the echo `seq` from pe has come back.
  Status WaitEcho(int pe, uint64_t seq, const char* what);
  // Sends `bytes` from `src` to pe's segment at `off` as messages of at most
  // kAmChunk bytes, in order; the last one also carries `last`'s signal and
  // echo request. Returns once `src` may be reused.
  Status SendData(int pe, size_t off, const void* src, size_t bytes, PutSignalHdr last, const char* what);
  // Put-with-signal as messages.
  Status SendPutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type, SignalOp op,
                       int64_t value, const char* what);
  Status RmaPut(int pe, size_t off, const void* src, size_t bytes);
  Status RmaGet(int pe, void* dst, size_t off, size_t bytes);
  // Marker + echo to pe when it has tracked messages in flight.
  Status QuietPeer(int pe);
  Status StartQuiet(int pe, uint64_t* seq);

  Bootstrap* boot_;
  LocalSegment* seg_;
  UcxConnection conn_;
  UcxProgress progress_;
  int rank_ = -1, nranks_ = 0;
  double timeout_sec_ = 120;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  std::vector<int> peers_;                // the ranks reached through UCX
  bool rma_;                              // puts/gets as UCX RMA instead of messages
  std::atomic<bool> interrupted_{false};  // Interrupt(): waits give up
  double peer_timeout_sec_;
  std::unique_ptr<std::atomic<int64_t>[]> last_heard_;  // per peer: its last heartbeat (MonotonicNs)
  std::atomic<bool> watching_{false};                   // connections are up: Watch may send and judge
  // A heartbeat's header (this rank): UCX may read it after Post returns,
  // while the socket is busy, so it lives as long as the transport.
  int32_t beat_hdr_ = -1;
  bool shut_ = false;
  // Completion: a peer is dirty while it has tracked messages that no echo
  // has covered yet.
  std::unique_ptr<std::atomic<uint8_t>[]> dirty_;
  std::atomic<uint64_t> quiet_round_trips_{0};  // markers Quiet sent
  std::unique_ptr<std::atomic<uint64_t>[]> quiet_sent_, quiet_acked_;
  std::vector<QuietHdr> ack_slot_;  // echoes in flight, one per peer (their seqs only grow)
  // Gets: one in flight per rank; its replies are written while it waits.
  std::vector<std::vector<GetReplyHdr>> get_reply_;  // headers of the get replies in flight, per peer
  std::mutex get_mu_;                                // one get in flight per rank
  std::mutex get_reply_mu_;                          // replies vs. the end of their get
  bool get_open_ = false;                            // replies of get_seq_ may still be written
  std::atomic<uint64_t> get_seq_{0}, get_done_{0};
  uint8_t* get_dst_ = nullptr;  // where the replies of get_seq_ go
  size_t get_len_ = 0, get_received_ = 0;
  // Fetching atomics: one in flight per rank.
  std::vector<FetchReplyHdr> fetch_slot_;  // fetch replies in flight, one per peer
  std::mutex fetch_mu_;
  std::atomic<uint64_t> fetch_seq_{0}, fetch_done_{0};
  std::atomic<int64_t> fetch_old_{0};
};

}  // namespace hpshmem
