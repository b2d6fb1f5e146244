#include "wait.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace hpshmem {

void FutexWait(uint32_t* addr, uint32_t expected, int max_ms) { FutexWaitUs(addr, expected, int64_t{max_ms} * 1000); }

void FutexWaitUs(uint32_t* addr, uint32_t expected, int64_t max_us) {
  timespec ts{static_cast<time_t>(max_us / 1000000), static_cast<long>(max_us % 1000000) * 1000L};
  // Shared (not PRIVATE) futex: the word lives in memory mapped by several
  // processes at different addresses; the kernel keys it by inode + offset.
  syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(uint32_t* addr) { syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

int64_t ApplyAtomic(void* word, SignalType type, SignalOp op, int64_t value) {
  CrossProcessRelease();
  if (type == SignalType::kInt32) {
    std::atomic_ref<int32_t> w(*static_cast<int32_t*>(word));
    auto v = static_cast<int32_t>(value);
    return op == SignalOp::kSet ? w.exchange(v, std::memory_order_seq_cst) : w.fetch_add(v, std::memory_order_seq_cst);
  }
  std::atomic_ref<int64_t> w(*static_cast<int64_t*>(word));
  return op == SignalOp::kSet ? w.exchange(value, std::memory_order_seq_cst)
                              : w.fetch_add(value, std::memory_order_seq_cst);
}

int64_t LoadSignal(const void* p, SignalType t) {
  int64_t v = t == SignalType::kInt32
                  ? std::atomic_ref<int32_t>(*static_cast<int32_t*>(const_cast<void*>(p))).load(std::memory_order_acquire)
                  : std::atomic_ref<int64_t>(*static_cast<int64_t*>(const_cast<void*>(p))).load(std::memory_order_acquire);
  CrossProcessAcquire();
  return v;
}

void Notify(Doorbell* b) {
  if (std::atomic_ref<uint32_t>(b->sleepers).load(std::memory_order_seq_cst) > 0) NotifyAll(b);
}

void NotifyAll(Doorbell* b) {
  std::atomic_ref<uint32_t>(b->ring).fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&b->ring);
}

}  // namespace hpshmem
