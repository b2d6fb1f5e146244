#include "ucx_progress.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

#include "log.h"
#include "ucx_connection.h"
#include "wait.h"

namespace hpshmem {
namespace {

constexpr auto kProgressLinger = std::chrono::microseconds(50);
constexpr int kIdleWakeMs = 5;
// How long the progress thread stands aside after application threads stop
// polling without going to sleep (PollEnd): messages that arrive while the
// application computes wait at most this long.
constexpr int64_t kHandBackUs = 200;

int64_t NowNs() { return MonotonicNs(); }

}  // namespace

Status UcxProgress::Start(ucp_worker_h worker, std::function<void()> tick, int tick_ms) {
  worker_ = worker;
  tick_ = std::move(tick);
  tick_ns_ = int64_t{tick_ms} * 1000000;
  epfd_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  int efd = -1;
  ucs_status_t st;
  if ((st = ucp_worker_get_efd(worker_, &efd)) != UCS_OK) return UcxError("worker event fd", st);
  if (!epfd_.valid() || !wake_.valid()) return Status::FromErrno("epoll/eventfd for the UCX progress thread");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = efd;
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, efd, &ev);
  ev.data.fd = wake_.get();
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

void UcxProgress::Stop() {
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    FutexWakeAll(reinterpret_cast<uint32_t*>(&parked_));
    uint64_t one = 1;
    ssize_t w = ::write(wake_.get(), &one, sizeof one);
    (void)w;
    thread_.join();
  }
  epfd_.Reset();
  wake_.Reset();
}

void UcxProgress::PollEnd(bool to_sleep) {
  // The last poller going to sleep hands the worker back to the progress
  // thread at once; one that returns lets it come back on its own a moment
  // later (kHandBack), by when the application has usually polled again:
  // waking it now would only make it fight the next send for the lock.
  last_poll_ns_.store(to_sleep ? 0 : NowNs(), std::memory_order_relaxed);
  if (polling_.fetch_sub(1, std::memory_order_seq_cst) == 1 && to_sleep && parked_.load(std::memory_order_seq_cst)) {
    FutexWakeAll(reinterpret_cast<uint32_t*>(&parked_));
  }
}

void UcxProgress::Loop() {
  epoll_event ev[4];
  while (!stopping_.load(std::memory_order_acquire)) {
    if (tick_) {
      if (int64_t now = NowNs(); now >= next_tick_ns_) {
        next_tick_ns_ = now + tick_ns_;
        tick_();
      }
    }
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

}  // namespace hpshmem
