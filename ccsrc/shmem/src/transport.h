// Transports move bytes and atomics between ranks. One is chosen per peer at
// Init; the data path calls it without re-deciding. Today: shared memory for
// ranks on this host (ShmTransport). Offsets are bytes from the start of the
// peer's segment (header included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "hpshmem/status.h"
#include "pe_header.h"

namespace hpshmem {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // The peer's segment mapped into this process, or nullptr when the peer is
  // not load/store reachable through this transport.
  virtual uint8_t* Segment(int pe) const = 0;
  PeHeader* Header(int pe) const { return reinterpret_cast<PeHeader*>(Segment(pe)); }
  // Starts watching the peers; `on_peer_lost(pe)` runs on a monitor thread
  // when a peer's process goes away.
  virtual void StartMonitor(std::function<void(int)> on_peer_lost) = 0;
  // Stops the monitor, closes connections and unmaps segments. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace hpshmem
