#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "copy.h"
#include "multirank.h"
#include "ops/ops.h"

using hpshmem::Cmp;
using hpshmem::Code;
using hpshmem::SignalOp;
using hpshmem::SignalType;
using hptest::JobOptions;
using hptest::RunJob;

TEST(Signal, ConcurrentAddsLoseNoUpdate) {
  auto r = RunJob(4, [](int rank, int n) {
    void* p;
    RCHECK_OK(hpshmem::Calloc(2 * n, sizeof(int64_t), &p));
    auto* c64 = static_cast<int64_t*>(p);
    auto* c32 = reinterpret_cast<int32_t*>(c64 + n);
    RCHECK_OK(hpshmem::Barrier());
    const int iters = 100000;
    for (int i = 0; i < iters; ++i) {
      int pe = (rank + i) % n;  // every rank hits every counter, all at once
      RCHECK_OK(hpshmem::Signal(c64 + 0, SignalType::kInt64, 3, SignalOp::kAdd, pe));
      RCHECK_OK(hpshmem::Signal(c32 + 1, SignalType::kInt32, -1, SignalOp::kAdd, pe));
    }
    RCHECK_OK(hpshmem::Barrier());
    RCHECK(c64[0] == int64_t{3} * iters, "int64 adds: " + std::to_string(c64[0]));
    RCHECK(c32[1] == -iters, "int32 adds: " + std::to_string(c32[1]));
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

namespace {

// FNV-1a over 8-byte words, then the tail bytes. Each step is a bijection of
// the running hash, so one stale word always changes the result; by words it
// costs an eighth of the byte loop, which matters for the streaming test's
// messages (a quarter of the last-level cache: ~75 MiB on a 300 MiB L3).
uint64_t Fnv(const unsigned char* p, size_t n) {
  const uint64_t prime = 1099511628211ULL;
  uint64_t h = 1469598103934665603ULL;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * prime;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * prime;
  return h;
}

// Producers (every rank but the last) stream messages to the last rank with
// put+signal; each message carries its length and checksum in its first
// bytes. The consumer checks every message the moment it sees the signal.
// min_bytes > 0: every message is at least that long (the streaming-copy path).
void OrderingStress(int rank, int n, int threads_per_producer, int iters = 300, size_t max_bytes = (1 << 20) + 4096,
                    size_t min_bytes = 0) {
  int producers = n - 1, streams = producers * threads_per_producer;
  void *slots, *sig, *ack;
  RCHECK_OK(hpshmem::Malloc(max_bytes * streams, &slots));
  RCHECK_OK(hpshmem::Calloc(streams, sizeof(int64_t), &sig));
  RCHECK_OK(hpshmem::Calloc(streams, sizeof(int64_t), &ack));
  auto* s64 = static_cast<int64_t*>(sig);
  auto* a64 = static_cast<int64_t*>(ack);
  RCHECK_OK(hpshmem::Barrier());
  int consumer = n - 1;
  if (rank != consumer) {
    auto producer = [&](int t) {
      int stream = rank * threads_per_producer + t;
      std::mt19937_64 rng(stream * 7919 + 1);
      std::vector<unsigned char> msg(max_bytes);
      for (int i = 1; i <= iters; ++i) {
        size_t len = min_bytes ? min_bytes + rng() % (max_bytes - min_bytes)
                               : 16 + rng() % (i % 10 == 0 ? max_bytes - 16 : 9000);
        for (size_t k = 16; k < len; k += 8) {
          uint64_t w = rng();
          std::memcpy(msg.data() + k, &w, std::min<size_t>(8, len - k));
        }
        uint64_t h = Fnv(msg.data() + 16, len - 16);
        std::memcpy(msg.data(), &len, 8);
        std::memcpy(msg.data() + 8, &h, 8);
        // Wait until the consumer has checked message i-1 of this stream.
        RCHECK_OK(hpshmem::SignalWaitUntil(a64 + stream, SignalType::kInt64, Cmp::kGe, i - 1, nullptr));
        RCHECK_OK(hpshmem::ops::PutMemSignal(static_cast<char*>(slots) + stream * max_bytes, msg.data(), len,
                                             s64 + stream, SignalType::kInt64, i, SignalOp::kSet, consumer, i % 3 + 1));
      }
    };
    std::vector<std::thread> ts;
    for (int t = 0; t < threads_per_producer; ++t) ts.emplace_back(producer, t);
    for (auto& t : ts) t.join();
  } else {
    for (int i = 1; i <= iters; ++i) {
      for (int stream = 0; stream < streams; ++stream) {
        int64_t seen;
        RCHECK_OK(hpshmem::SignalWaitUntil(s64 + stream, SignalType::kInt64, Cmp::kEq, i, &seen));
        RCHECK(seen == i, "observed value");
        auto* m = static_cast<unsigned char*>(slots) + stream * max_bytes;
        uint64_t len, h;
        std::memcpy(&len, m, 8);
        std::memcpy(&h, m + 8, 8);
        RCHECK(len >= 16 && len <= max_bytes, "length field");
        RCHECK(Fnv(m + 16, len - 16) == h,
               "stream " + std::to_string(stream) + " message " + std::to_string(i) + ": signal seen before the data");
        RCHECK_OK(hpshmem::Signal(a64 + stream, SignalType::kInt64, i, SignalOp::kSet, stream / threads_per_producer));
      }
    }
  }
  RCHECK_OK(hpshmem::Barrier());
}

}  // namespace

TEST(Signal, PutThenSignalOrderingUnderStress) {
  auto r = RunJob(3, [](int rank, int n) { OrderingStress(rank, n, 1); });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Messages past the streaming-copy threshold go out with non-temporal
// stores, which only a fence orders before the signal: stress that path too.
TEST(Signal, PutThenSignalOrderingAboveTheStreamingThreshold) {
  size_t t = hpshmem::StreamingCopyThreshold();
  const size_t lo = t == SIZE_MAX ? (size_t{8} << 20) : t + 1;
  hptest::JobOptions o;
  o.heap_bytes = 2 * (lo + (1 << 20)) + (8 << 20);
  // Twelve messages at the 8 MiB floor; fewer (at least four) where the
  // threshold is larger, so the bytes moved stay near 100 MiB.
  const int iters = static_cast<int>(std::clamp<size_t>(12 * (size_t{8} << 20) / lo, 4, 12));
  auto r = RunJob(2, [lo, iters](int rank, int n) { OrderingStress(rank, n, 1, iters, lo + (1 << 20) - 4099, lo); }, o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// An int32 signal is 4 bytes wide: SET and ADD on a word, from a peer and
// from the rank itself, leave the words on both sides as they were.
TEST(Signal, Int32SignalsLeaveTheirNeighboursAlone) {
  auto r = RunJob(3, [](int rank, int n) {
    void* p;
    RCHECK_OK(hpshmem::Calloc(3 * 8, sizeof(int32_t), &p));
    auto* w = static_cast<int32_t*>(p) + 8 * rank;  // this rank's row of 8 words, written by everyone
    for (int k = 0; k < 8; ++k) w[k] = 1000 + k;
    RCHECK_OK(hpshmem::Barrier());
    for (int dst = 0; dst < n; ++dst) {
      auto* row = static_cast<int32_t*>(p) + 8 * dst;
      int k = 1 + 2 * rank;  // words 1, 3, 5: each writer its own, with untouched words between
      RCHECK_OK(hpshmem::Signal(row + k, SignalType::kInt32, -5 - rank, SignalOp::kSet, dst));
      RCHECK_OK(hpshmem::Signal(row + k, SignalType::kInt32, 7, SignalOp::kAdd, dst));
    }
    RCHECK_OK(hpshmem::Barrier());
    for (int k = 0; k < 8; ++k) {
      int32_t want = (k % 2 == 1 && k <= 5) ? 2 - (k - 1) / 2 : 1000 + k;  // -5 - writer + 7
      RCHECK(w[k] == want,
             "word " + std::to_string(k) + " = " + std::to_string(w[k]) + ", expected " + std::to_string(want));
    }
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Signal, PutThenSignalOrderingFromManyThreads) {
  auto r = RunJob(2, [](int rank, int n) { OrderingStress(rank, n, 4); });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Signal, AllSixComparisonsWithNegativeValues) {
  auto r = RunJob(2, [](int rank, int) {
    void *p, *step;
    RCHECK_OK(hpshmem::Calloc(2, sizeof(int64_t), &p));
    RCHECK_OK(hpshmem::Calloc(1, sizeof(int64_t), &step));
    auto* s64 = static_cast<int64_t*>(p);
    auto* s32 = reinterpret_cast<int32_t*>(s64 + 1);
    // For each comparison: a value that makes it false now and a value the
    // peer then stores to make it true.
    struct Case {
      Cmp cmp;
      int64_t cmp_to, before, after;
    };
    const Case cases[] = {{Cmp::kEq, -7, -8, -7},
                          {Cmp::kNe, -7, -7, -9},
                          {Cmp::kGt, -7, -7, -6},
                          {Cmp::kGe, -7, -8, -7},
                          {Cmp::kLt, -7, -7, -8},
                          {Cmp::kLe, -7, -6, -7},
                          {Cmp::kGt, -5000000000LL, -6000000000LL, -4000000000LL},
                          {Cmp::kLt, 5000000000LL, 6000000000LL, 4999999999LL}};
    int k = 0;
    for (const Case& c : cases) {
      for (SignalType t : {SignalType::kInt64, SignalType::kInt32}) {
        bool wide = c.cmp_to < INT32_MIN || c.cmp_to > INT32_MAX;
        if (t == SignalType::kInt32 && wide) continue;
        void* sig = t == SignalType::kInt64 ? static_cast<void*>(s64) : static_cast<void*>(s32);
        ++k;
        if (rank == 1) {
          RCHECK_OK(hpshmem::Signal(sig, t, c.before, SignalOp::kSet, 0));
          RCHECK_OK(hpshmem::Signal(step, SignalType::kInt64, k, SignalOp::kSet, 0));
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          RCHECK_OK(hpshmem::Signal(sig, t, c.after, SignalOp::kSet, 0));
        } else {
          RCHECK_OK(hpshmem::SignalWaitUntil(step, SignalType::kInt64, Cmp::kEq, k, nullptr));
          int64_t seen = 0;
          RCHECK_OK(hpshmem::SignalWaitUntil(sig, t, c.cmp, c.cmp_to, &seen));
          RCHECK(seen == c.after, std::string("case ") + std::to_string(k) + " " + hpshmem::CmpName(c.cmp) +
                                      ": observed " + std::to_string(seen));
          // Satisfied already: returns at once with the same value.
          RCHECK_OK(hpshmem::SignalWaitUntil(sig, t, c.cmp, c.cmp_to, &seen));
          RCHECK(seen == c.after, "second wait");
        }
        RCHECK_OK(hpshmem::Barrier());
      }
    }
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Signal, BadArgumentsAreRejectedAndWriteNothing) {
  auto r = RunJob(2, [](int rank, int n) {
    void *sig, *data;
    RCHECK_OK(hpshmem::Calloc(4, sizeof(int64_t), &sig));
    RCHECK_OK(hpshmem::Calloc(64, 1, &data));
    auto* s = static_cast<char*>(sig);
    char src[64];
    std::memset(src, 7, sizeof src);
    int to = 1 - rank;
    hpshmem::Status st = hpshmem::Signal(s + 4, SignalType::kInt64, 1, SignalOp::kSet, to);
    RCHECK(st.code() == Code::kTypeError && st.message().find("aligned") != std::string::npos, st.ToString());
    st = hpshmem::Signal(s, SignalType::kInt32, int64_t{1} << 40, SignalOp::kSet, to);
    RCHECK(st.code() == Code::kInvalidArgument && st.message().find("int32") != std::string::npos, st.ToString());
    st = hpshmem::Signal(s, SignalType::kInt64, 1, static_cast<SignalOp>(7), to);
    RCHECK(st.code() == Code::kInvalidArgument && st.message().find("signal_op 7") != std::string::npos, st.ToString());
    st = hpshmem::Signal(s, static_cast<SignalType>(2), 1, SignalOp::kSet, to);
    RCHECK(st.code() == Code::kTypeError, st.ToString());
    st = hpshmem::Signal(s, SignalType::kInt64, 1, SignalOp::kSet, 2);
    RCHECK(st.code() == Code::kInvalidArgument, st.ToString());
    int64_t local = 0;
    st = hpshmem::Signal(&local, SignalType::kInt64, 1, SignalOp::kSet, to);
    RCHECK(st.code() == Code::kInvalidArgument, st.ToString());
    st = hpshmem::SignalWaitUntil(s, SignalType::kInt64, static_cast<Cmp>(9), 0, nullptr);
    RCHECK(st.code() == Code::kInvalidArgument && st.message().find("compare_op 9") != std::string::npos,
           st.ToString());
    // put+signal with a bad signal must not write the data either.
    for (int bd : {1, 2}) {
      st = hpshmem::ops::PutMemSignal(data, src, sizeof src, s + 2, SignalType::kInt32, 1, SignalOp::kSet, to, bd);
      RCHECK(st.code() == Code::kTypeError, st.ToString());
      st =
          hpshmem::ops::PutMemSignal(data, src, sizeof src, s, SignalType::kInt32, 1, static_cast<SignalOp>(3), to, bd);
      RCHECK(st.code() == Code::kInvalidArgument, st.ToString());
      st = hpshmem::PutMemSignal(data, src, sizeof src, s, SignalType::kInt32, int64_t{1} << 33, SignalOp::kSet, to);
      RCHECK(st.code() == Code::kInvalidArgument, st.ToString());
    }
    RCHECK_OK(hpshmem::Barrier());
    for (int i = 0; i < 64; ++i) RCHECK(static_cast<char*>(data)[i] == 0, "data written by a failed put+signal");
    for (int i = 0; i < 32; ++i) RCHECK(s[i] == 0, "signal written by a failed call");
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Signal, SleepingWaitersAreWokenAndDoNotBurnACore) {
  // 4 ranks on this 2-core machine: three wait ~1 s for rank 0.
  auto r = RunJob(4, [](int rank, int n) {
    void* sig;
    RCHECK_OK(hpshmem::Calloc(1, sizeof(int32_t), &sig));
    RCHECK_OK(hpshmem::Barrier());
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      for (int p = 1; p < n; ++p) RCHECK_OK(hpshmem::Signal(sig, SignalType::kInt32, 42, SignalOp::kSet, p));
    } else {
      rusage before, after;
      getrusage(RUSAGE_THREAD, &before);
      auto t0 = std::chrono::steady_clock::now();
      int64_t seen;
      RCHECK_OK(hpshmem::SignalWaitUntil(sig, SignalType::kInt32, Cmp::kEq, 42, &seen));
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      getrusage(RUSAGE_THREAD, &after);
      double cpu = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) + (after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
                   1e-6 * ((after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
                           (after.ru_stime.tv_usec - before.ru_stime.tv_usec));
      RCHECK(seen == 42, "value");
      RCHECK(cpu < 0.25 * wall, "waiter burned " + std::to_string(cpu) + " s of CPU in " + std::to_string(wall) + " s");
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}
