#include "wait.h"

#include "copy.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <sched.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

namespace hpshmem {

namespace {

// CPUs' worth of the CPU quota (quota / period, rounded up) from "<quota> <period>" or "max ..."; 0: none.
int QuotaCpus(double quota, double period) {
  if (!(quota > 0) || !(period > 0)) return 0;
  return static_cast<int>(std::ceil(quota / period - 1e-9));
}

// The tightest CPU quota on the way from this process's cgroup up to the
// root of the hierarchy it sees; 0 when none is set.
int CgroupCpus() {
  int best = 0;
  auto take = [&](int c) {
    if (c > 0 && (best == 0 || c < best)) best = c;
  };
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    // v2: "0::/path"; v1: "N:cpu,cpuacct:/path"
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    bool v2 = ctrl.empty();
    if (!v2 && ctrl.find("cpu") == std::string::npos) continue;
    std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/" + ctrl;
    for (;;) {
      std::string dir = root + path;
      if (v2) {
        std::ifstream f(dir + "/cpu.max");
        std::string q;
        double period = 0;
        if (f >> q >> period && q != "max") take(QuotaCpus(std::atof(q.c_str()), period));
      } else {
        std::ifstream fq(dir + "/cpu.cfs_quota_us"), fp(dir + "/cpu.cfs_period_us");
        double quota = 0, period = 0;
        if (fq >> quota && fp >> period) take(QuotaCpus(quota, period));
      }
      if (path.empty() || path == "/") break;
      size_t cut = path.find_last_of('/');
      path = cut == 0 || cut == std::string::npos ? "/" : path.substr(0, cut);
    }
  }
  return best;
}

}  // namespace

int UsableCpus(uint64_t* mask_words) {
  std::memset(mask_words, 0, 16 * sizeof(uint64_t));
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < 1024 && c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      mask_words[c / 64] |= uint64_t{1} << (c % 64);
      ++n;
    }
  }
  if (n == 0) n = 1;
  int quota = CgroupCpus();
  return quota > 0 && quota < n ? quota : n;
}

WaitPolicy ChooseWaitPolicy(const std::string& mode, double spin_us, double yield_us, int cpus, int sharing) {
  WaitPolicy p;
  p.cpus = cpus;
  p.sharing = sharing;
  p.oversubscribed = sharing > cpus;
  if (mode == "custom") {
    p.mode = mode;
    p.spin_ns = static_cast<int64_t>(spin_us * 1000);
    p.yield_ns = static_cast<int64_t>(yield_us * 1000);
    return p;
  }
  p.mode = mode == "auto" ? (p.oversubscribed ? "yield" : "spin") : mode;
  if (p.mode == "yield") {
    // The rank waited for is likely queued on this core: hand it the core at
    // once. sched_yield does (EEVDF moves the yielder's deadline a slice
    // out); a futex sleep would too, but its wake-up costs tens of
    // microseconds on a virtual machine (measured: docs/performance.md, "Waiting").
    p.spin_ns = 0;
    p.yield_ns = 1000000;  // 8 ranks on 2 cores: a peer may wait for several others' turns
  }
  return p;
}

void FutexWait(uint32_t* addr, uint32_t expected, int max_ms) { FutexWaitUs(addr, expected, int64_t{max_ms} * 1000); }

void FutexWaitUs(uint32_t* addr, uint32_t expected, int64_t max_us) {
  timespec ts{static_cast<time_t>(max_us / 1000000), static_cast<long>(max_us % 1000000) * 1000L};
  // Shared (not PRIVATE) futex: the word lives in memory mapped by several
  // processes at different addresses; the kernel keys it by inode + offset.
  syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(uint32_t* addr) { syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

namespace {
template <class T>
int64_t ApplyAmoAs(T* word, AmoOp op, T v, T cmp) {
  std::atomic_ref<T> w(*word);
  constexpr auto o = std::memory_order_seq_cst;
  switch (op) {
    case AmoOp::kSet:
    case AmoOp::kSwap:
      return w.exchange(v, o);
    case AmoOp::kAdd:
      return w.fetch_add(v, o);
    case AmoOp::kAnd:
      return w.fetch_and(v, o);
    case AmoOp::kOr:
      return w.fetch_or(v, o);
    case AmoOp::kXor:
      return w.fetch_xor(v, o);
    case AmoOp::kCompareSwap:
      w.compare_exchange_strong(cmp, v, o, o);
      return cmp;
    case AmoOp::kFetch:
      return w.load(o);
  }
  return 0;
}
}  // namespace

int64_t ApplyAmo(void* word, SignalType type, AmoOp op, int64_t value, int64_t compare) {
  CrossProcessRelease();
  int64_t old;
  // Unsigned words: the bits are what matters, and unsigned adds wrap without UB.
  if (type == SignalType::kInt32) {
    old = static_cast<int32_t>(ApplyAmoAs<uint32_t>(static_cast<uint32_t*>(word), op, static_cast<uint32_t>(value),
                                                    static_cast<uint32_t>(compare)));
  } else {
    old = static_cast<int64_t>(ApplyAmoAs<uint64_t>(static_cast<uint64_t*>(word), op, static_cast<uint64_t>(value),
                                                    static_cast<uint64_t>(compare)));
  }
  CrossProcessAcquire();
  return old;
}

int64_t ApplyAtomic(void* word, SignalType type, SignalOp op, int64_t value) {
  return ApplyAmo(word, type, op == SignalOp::kSet ? AmoOp::kSwap : AmoOp::kAdd, value, 0);
}

int64_t LoadSignal(const void* p, SignalType t) {
  int64_t v =
      t == SignalType::kInt32
          ? std::atomic_ref<int32_t>(*static_cast<int32_t*>(const_cast<void*>(p))).load(std::memory_order_acquire)
          : std::atomic_ref<int64_t>(*static_cast<int64_t*>(const_cast<void*>(p))).load(std::memory_order_acquire);
  CrossProcessAcquire();
  return v;
}

bool RegisterAsymWake() {
  long have = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (have < 0 || !(have & MEMBARRIER_CMD_GLOBAL_EXPEDITED)) return false;
  return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
}

void SetAsymWake(bool on) {
  direct_detail::g_streaming_from.store(StreamingCopyThreshold(), std::memory_order_relaxed);
  direct_detail::g_asym_wake.store(on, std::memory_order_relaxed);
}

void AsymWakeBarrier() {
  if (::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0)
    (void)::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

void NotifyAll(Doorbell* b) {
  std::atomic_ref<uint32_t>(b->ring).fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&b->ring);
}

}  // namespace hpshmem
