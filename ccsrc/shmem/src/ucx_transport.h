// UCX between ranks that do not share memory (other hosts, or every peer
// under HYPER_PARALLEL_SHMEM_TRANSPORT=ucx): one worker per rank, the whole
// segment registered once (ucp_mem_map), remote keys and worker addresses
// exchanged through the bootstrap, one endpoint per remote peer.
//
// Data: puts, put-with-signal and gets are active messages of at most
// kAmChunk bytes, pipelined and handled in order by the TARGET's CPU; the
// last piece of a put asks for an echo (on it the bytes are at the target),
// the last piece of a put-with-signal carries the signal (one message for
// small ones), a get is a request answered by pieces. Over TCP UCX emulates
// RMA through the target's CPU anyway, and this way is 4-6x faster (measured:
// benchmarks/bench_hosts.py). With rma (HYPER_PARALLEL_SHMEM_UCX_RMA=1, for
// networks whose NICs do RMA) puts and gets are ucp_put_nbx + endpoint flush
// and ucp_get_nbx on the registered heap instead.
// Signals and fetching atomics are always messages applied by the target's
// CPU with the same atomics that same-host peers use on that word (so a word
// updated from both stays atomic), after which the target rings its own
// doorbell: remote signals wake sleeping waiters exactly like local ones.
// Messages on one endpoint are handled in order, so a signal never overtakes
// data sent before it; Quiet sends a marker to every peer with messages in
// flight and waits for its echo.
//
// Progress: a thread per rank sleeps in epoll on the worker's event fd
// (at most 5 ms at a time; next to no CPU when idle) and handles arrivals without the application calling
// in; waiting threads also progress the worker while they spin. Peer
// failure: endpoints use UCX's peer error handling; a failed endpoint marks
// the rank lost (waits then fail with PeerDead).
//
// The parts: ucx_connection (context, worker, registration, endpoints,
// failures), ucx_data_path (the verbs and their completion), ucx_arrivals
// (the message handlers), ucx_progress (the progress thread), ucx_wire (the
// messages).
#pragma once

#include <memory>
#include <vector>

#include "bootstrap.h"
#include "segment.h"
#include "transport.h"

namespace hpshmem {

// Puts, put-with-signal and get replies travel as active messages of at
// most this many bytes, pipelined; each must fit one TCP receive segment
// (kTcpRxSegment). Measured between two real hosts (veth, Ethernet MTU),
// alternated three times: 1 MiB put-with-signal one way 504-667 us against
// 867-892 with 128 KiB messages (2 ranks), 1 MiB alltoall 242-414 against
// 506-616; 448 KiB in a 512 KiB segment was no faster, 64 KiB twice as slow.
// Across simulated hosts (loopback): 16 MiB put 4.3-5.2 against 9.4 ms.
constexpr size_t kAmChunk = 240 * 1024;

// A UCX transport for this rank's segment, not yet connected (Transport::
// Connect, collective over every rank of the job). rma: puts and gets as
// UCX RMA. Connect's errors: kSystem (a UCX call failed, with UCX's reason),
// kBootstrap, kTimeout, kPeerDead.
std::unique_ptr<Transport> NewUcxTransport(Bootstrap* boot, LocalSegment* seg, bool rma, double peer_timeout_sec);

}  // namespace hpshmem
