// The progress half of the UCX transport: a thread per rank sleeps in epoll
// on the worker's event fd (at most kIdleWakeMs at a time; next to no CPU
// when idle) and handles arrivals without the application calling in. An
// application thread that polls the worker in a wait gets it to itself
// meanwhile (PollBegin/PollEnd).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "hpshmem/status.h"
#include "net.h"

namespace hpshmem {

class UcxProgress {
 public:
  UcxProgress() = default;
  ~UcxProgress() { Stop(); }
  UcxProgress(const UcxProgress&) = delete;
  UcxProgress& operator=(const UcxProgress&) = delete;

  // Starts the thread on `worker`, which must outlive Stop; it also runs
  // `tick` every `tick_ms` milliseconds (roughly: between its waits).
  // Errors: kSystem.
  Status Start(ucp_worker_h worker, std::function<void()> tick = {}, int tick_ms = 0);
  // Stops and joins the thread. Idempotent.
  void Stop();

  // An application thread is about to poll the worker in a loop.
  void PollBegin() { polling_.fetch_add(1, std::memory_order_seq_cst); }
  // It stopped; to_sleep: it goes to sleep now, so the thread must take over at once.
  void PollEnd(bool to_sleep);

 private:
  void Loop();

  ucp_worker_h worker_ = nullptr;
  std::function<void()> tick_;
  int64_t tick_ns_ = 0, next_tick_ns_ = 0;
  Fd epfd_, wake_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  // Application threads polling the worker in a wait, and whether the
  // progress thread stands aside for them (a futex word).
  std::atomic<int> polling_{0};
  std::atomic<uint32_t> parked_{0};
  std::atomic<int64_t> last_poll_ns_{0};  // when the last poller returned (0: it went to sleep)
};

}  // namespace hpshmem
