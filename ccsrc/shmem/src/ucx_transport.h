// UCX between ranks that do not share memory (other hosts, or every peer
// under HYPER_PARALLEL_SHMEM_TRANSPORT=ucx): one worker per rank, the whole
// segment registered once (ucp_mem_map), remote keys and worker addresses
// exchanged through the bootstrap, one endpoint per remote peer.
//
// Data: Put = ucp_put_nbx + endpoint flush (on return the bytes are at the
// target); Get = ucp_get_nbx. Signals, put-with-signal (up to
// kAmPutSignalMax bytes, data and signal in one message) and fetching
// atomics are active messages applied by the TARGET's CPU with the same
// atomics that same-host peers use on that word (so a word updated from both
// stays atomic), after which the target rings its own doorbell: remote
// signals wake sleeping waiters exactly like local ones. Active messages on
// one endpoint are handled in order, so a signal never overtakes data sent
// before it; Quiet sends a marker to every peer with messages in flight and
// waits for its echo.
//
// Progress: a thread per rank sleeps in epoll on the worker's event fd
// (at most 5 ms at a time; next to no CPU when idle) and handles arrivals without the application calling
// in; waiting threads also progress the worker while they spin. Peer
// failure: endpoints use UCX's peer error handling; a failed endpoint marks
// the rank lost (waits then fail with PeerDead).
#pragma once

#include <memory>
#include <vector>

#include "bootstrap.h"
#include "segment.h"
#include "transport.h"

namespace hpshmem {

// Largest put-with-signal sent as one active message; larger ones are a
// flushed RMA put followed by a signal message.
constexpr size_t kAmPutSignalMax = 64 * 1024;

class UcxTransport {
 public:
  // Collective over every rank of the job (each takes part in the exchange,
  // even with no remote peer; *out stays null then). remote[r]: rank r is
  // reached through UCX.
  // Errors: kSystem (a UCX call failed, with UCX's reason), kBootstrap,
  // kTimeout, kPeerDead.
  static Status Create(Bootstrap* boot, LocalSegment* seg, const std::vector<bool>& remote, double timeout_sec,
                       std::unique_ptr<Transport>* out);
};

}  // namespace hpshmem
