#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "bootstrap.h"
#include "failure_checks.h"
#include "multirank.h"
#include "ops/ops.h"

using hpshmem::Cmp;
using hpshmem::Code;
using hpshmem::SignalOp;
using hpshmem::SignalType;
using hptest::JobOptions;
using hptest::LeftoversAfterGrace;
using hptest::NamesRank;
using hptest::RememberJob;
using hptest::RunJob;

TEST(Failure, TimeoutNamesRankSignalRelationAndLastValue) {
  JobOptions o;
  o.timeout_sec = 1;
  auto r = RunJob(
      2,
      [](int rank, int) {
        void* p;
        RCHECK_OK(hpshmem::Calloc(8, sizeof(int32_t), &p));
        auto* sig = static_cast<int32_t*>(p);
        if (rank == 0) RCHECK_OK(hpshmem::Signal(sig + 3, SignalType::kInt32, 3, SignalOp::kSet, 1));
        RCHECK_OK(hpshmem::Barrier());
        // Rank 0 stays out of shmem waits (which would time out too) until
        // rank 1 has seen its two timeouts.
        if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        if (rank == 1) {
          int64_t seen = 0;
          auto t0 = std::chrono::steady_clock::now();
          hpshmem::Status s = hpshmem::SignalWaitUntil(sig + 3, SignalType::kInt32, Cmp::kGe, 5, &seen, "signal[3]");
          double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          RCHECK(s.code() == Code::kTimeout, s.ToString());
          for (const char* part : {"rank 1", "signal[3]", "(int32) >= 5", "last observed 3", "timed out after 1 s",
                                   "HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"})
            RCHECK(s.message().find(part) != std::string::npos,
                   std::string("missing '") + part + "' in: " + s.message());
          RCHECK(seen == 3, "observed");
          RCHECK(dt >= 0.9, "fired early");
          RCHECK(dt < 4.0, "a 1 s deadline took " + std::to_string(dt) + " s");
          s = hpshmem::SignalWaitUntil(sig + 2, SignalType::kInt32, Cmp::kNe, 0, &seen);
          RCHECK(s.message().find("signal at heap offset") != std::string::npos, s.message());
        }
        RCHECK_OK(hpshmem::Barrier());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// A thread's own limit (a process group's timeout) bounds its waits and says so;
// the thread's other waits, and other threads' waits, keep the job's limit.
TEST(Failure, ThreadWaitTimeoutBoundsThatThreadsWaitsOnly) {
  JobOptions o;
  o.timeout_sec = 30;
  auto r = RunJob(
      2,
      [](int rank, int) {
        void* p;
        RCHECK_OK(hpshmem::Calloc(2, sizeof(int64_t), &p));
        auto* sig = static_cast<int64_t*>(p);
        RCHECK_OK(hpshmem::Barrier());
        if (rank == 1) {
          auto t0 = std::chrono::steady_clock::now();
          hpshmem::Status s;
          {
            hpshmem::WaitTimeoutScope limit(0.4);
            s = hpshmem::SignalWaitUntil(sig, SignalType::kInt64, Cmp::kEq, 1, nullptr, "group word");
          }
          double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          RCHECK(s.code() == Code::kTimeout, s.ToString());
          for (const char* part : {"group word", "timed out after 0.4 s", "the thread's own timeout set by its caller"})
            RCHECK(s.message().find(part) != std::string::npos,
                   std::string("missing '") + part + "' in: " + s.message());
          RCHECK(dt >= 0.35 && dt < 5.0, "a 0.4 s limit took " + std::to_string(dt) + " s");
          // Another thread, and this one after the scope, wait past 0.4 s for rank 0's signal.
          std::thread other(
              [&] { RCHECK_OK(hpshmem::SignalWaitUntil(sig + 1, SignalType::kInt64, Cmp::kEq, 1, nullptr)); });
          RCHECK(hpshmem::SetThreadWaitTimeout(0) == 0, "the scope restored the job's limit");
          RCHECK_OK(hpshmem::SignalWaitUntil(sig + 1, SignalType::kInt64, Cmp::kEq, 1, nullptr));
          other.join();
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          RCHECK_OK(hpshmem::Signal(sig + 1, SignalType::kInt64, 1, SignalOp::kSet, 1));
        }
        RCHECK_OK(hpshmem::Barrier());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// "Wait forever" and the longest finite timeout wait; they neither overflow
// into an instant timeout nor hang once the signal comes.
TEST(Failure, InfiniteAndLongestTimeoutsWaitForTheSignal) {
  for (double timeout : {std::numeric_limits<double>::infinity(), 1e9}) {
    auto r = RunJob(
        2,
        [](int rank, int) {
          void* p;
          RCHECK_OK(hpshmem::Calloc(1, sizeof(int64_t), &p));
          RCHECK_OK(hpshmem::Barrier());
          if (rank == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            RCHECK_OK(hpshmem::Signal(p, SignalType::kInt64, 1, SignalOp::kSet, 0));
          } else {
            RCHECK_OK(hpshmem::SignalWaitUntil(p, SignalType::kInt64, Cmp::kEq, 1, nullptr));
          }
          RCHECK_OK(hpshmem::Barrier());
        },
        [&] {
          JobOptions o;
          o.timeout_sec = timeout;
          return o;
        }());
    EXPECT_TRUE(r.AllOk()) << timeout << ": " << r.Describe();
  }
}

namespace {

// Ranks in `victims` die 300 ms after a barrier; the others wait (rank 1 in
// a barrier, the rest for a signal) and must fail with PeerDead naming one of
// them within 5 s. Returns that status (survivors only); *sig: the word waited on.
hpshmem::Status SurviveKill(int rank, const std::vector<int>& victims, void** sig = nullptr) {
  void* p;
  RCHECK_OK(hpshmem::Calloc(1, sizeof(int64_t), &p));
  RCHECK_OK(hpshmem::Barrier());
  if (std::find(victims.begin(), victims.end(), rank) != victims.end()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raise(SIGKILL);
  }
  auto t0 = std::chrono::steady_clock::now();
  hpshmem::Status s =
      rank == 1 ? hpshmem::Barrier() : hpshmem::SignalWaitUntil(p, SignalType::kInt64, Cmp::kEq, 1, nullptr);
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RCHECK(s.code() == Code::kPeerDead, s.ToString());
  bool named = false;
  for (int v : victims) named |= NamesRank(s.message(), v);
  RCHECK(named, "names none of the killed ranks: " + s.message());
  RCHECK(dt < 5.0, "took " + std::to_string(dt) + " s to notice");
  if (sig) *sig = p;
  return s;
}

}  // namespace

TEST(Failure, KilledRankIsReportedWithinFiveSeconds) {
  auto r = RunJob(
      4,
      [](int rank, int) {
        void* p;
        hpshmem::Status s = SurviveKill(rank, {2}, &p);
        // Ops aimed at the dead rank fail too, instead of writing into a corpse.
        int64_t one = 1;
        s = hpshmem::PutMem(p, &one, sizeof one, 2);
        RCHECK(s.code() == Code::kPeerDead, s.ToString());
        // Finalize still releases everything, and reports the failed barrier.
        s = hpshmem::Finalize();
        RCHECK(s.code() == Code::kPeerDead, s.ToString());
        RCHECK(!hpshmem::IsInitialized(), "finalized");
      },
      [] {
        JobOptions o;
        o.timeout_sec = 60;
        o.finalize = false;
        return o;
      }());
  ASSERT_EQ(r.term_signal.size(), 4u);
  EXPECT_EQ(r.term_signal[2], SIGKILL);
  for (int k : {0, 1, 3}) EXPECT_EQ(r.exit_code[k], 0) << r.Describe();
  EXPECT_FALSE(r.timed_out);
}

// Every survivor in the barrier when rank 2 dies: under the hosts layout
// rank 2 gathers its host's ranks (rank 3 waits on its header) and is the one
// its host's ranks talk to across the network, so each kind of barrier wait
// (a host's own ranks, the ranks across) must notice the loss, not only the
// timeout.
TEST(Failure, KilledRankFailsEveryRanksBarrierWithinFiveSeconds4Ranks) {
  auto r = RunJob(
      4,
      [](int rank, int) {
        RCHECK_OK(hpshmem::Barrier());
        if (rank == 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          raise(SIGKILL);
        }
        auto t0 = std::chrono::steady_clock::now();
        hpshmem::Status s = hpshmem::Barrier();
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        RCHECK(s.code() == Code::kPeerDead, s.ToString());
        RCHECK(NamesRank(s.message(), 2), "does not name rank 2: " + s.message());
        RCHECK(dt < 5.0, "took " + std::to_string(dt) + " s to notice");
        s = hpshmem::Barrier();  // and every later one fails at once
        RCHECK(s.code() == Code::kPeerDead, s.ToString());
        RCHECK(hpshmem::Finalize().code() == Code::kPeerDead, "finalize reports the loss");
      },
      [] {
        JobOptions o;
        o.timeout_sec = 60;
        o.finalize = false;
        return o;
      }());
  ASSERT_EQ(r.term_signal.size(), 4u);
  EXPECT_EQ(r.term_signal[2], SIGKILL);
  for (int k : {0, 1, 3}) EXPECT_EQ(r.exit_code[k], 0) << r.Describe();
  EXPECT_FALSE(r.timed_out);
}

// A rank that is away (here: asleep outside the library, as if stopped) makes
// a barrier time out on its peer. The message names who did not arrive; the
// timed-out rank then refuses every later barrier, so its arrival, which
// still counts on the late rank, can never make two different barriers
// "succeed" together: the late rank's next barrier fails too.
TEST(Failure, BarrierAfterATimeoutFailsInsteadOfPairingWrongly) {
  JobOptions o;
  o.timeout_sec = 1;
  o.finalize = false;
  auto r = RunJob(
      2,
      [](int rank, int) {
        RCHECK_OK(hpshmem::Barrier());
        if (rank == 0) {
          hpshmem::Status s = hpshmem::Barrier();
          RCHECK(s.code() == Code::kTimeout, s.ToString());
          RCHECK(s.message().find("have not entered it: 1") != std::string::npos ||
                     s.message().find("not known: 1") != std::string::npos,
                 s.message());
          s = hpshmem::Barrier();
          RCHECK(s.code() == Code::kCollectiveMismatch && s.message().find("refused") != std::string::npos,
                 s.ToString());
          std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // stay until rank 1 has seen its failure
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          (void)hpshmem::Barrier();  // pairs with rank 0's timed-out arrival: unavoidable, and the last one
          hpshmem::Status s = hpshmem::Barrier();
          RCHECK(s.code() == Code::kTimeout || s.code() == Code::kPeerDead, s.ToString());
        }
        RCHECK(!hpshmem::Finalize().ok(), "finalize after a failed barrier reports it");
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Ranks 2 and 3 die together: under HPSHMEM_TEST_LAYOUT=hosts that is a whole
// host going away. The survivors name a dead rank within the bound, in a
// barrier and in a wait.
TEST(Failure, RanksOfAHostKilledAtOnceAreReportedWithinFiveSeconds) {
  auto r = RunJob(
      4,
      [](int rank, int) {
        hpshmem::Status s = SurviveKill(rank, {2, 3});
        s = hpshmem::Finalize();
        RCHECK(s.code() == Code::kPeerDead, s.ToString());
      },
      [] {
        JobOptions o;
        o.timeout_sec = 60;
        o.finalize = false;
        return o;
      }());
  ASSERT_EQ(r.term_signal.size(), 4u);
  EXPECT_EQ(r.term_signal[2], SIGKILL);
  EXPECT_EQ(r.term_signal[3], SIGKILL);
  for (int k : {0, 1}) EXPECT_EQ(r.exit_code[k], 0) << r.Describe();
  EXPECT_FALSE(r.timed_out);
}

TEST(Failure, NothingIsLeftBehindAfterExitOrKill) {
  std::string job;
  auto r = RunJob(
      3,
      [](int, int) {
        void* p;
        RCHECK_OK(hpshmem::Malloc(1 << 20, &p));
        RCHECK_OK(hpshmem::Barrier());
      },
      RememberJob(&job));
  EXPECT_TRUE(r.AllOk()) << r.Describe();
  ASSERT_EQ(job.size(), 16u);
  EXPECT_EQ(LeftoversAfterGrace(job), std::vector<std::string>{});
  // kill -9 of every rank mid-wait.
  JobOptions o = RememberJob(&job);
  o.job_timeout_sec = 2;
  o.timeout_sec = 60;
  r = RunJob(
      3,
      [](int rank, int) {
        void* p;
        RCHECK_OK(hpshmem::Calloc(1, 8, &p));
        RCHECK_OK(hpshmem::SignalWaitUntil(p, SignalType::kInt64, Cmp::kEq, 1, nullptr));
      },
      o);
  EXPECT_TRUE(r.timed_out);
  for (int s : r.term_signal) EXPECT_EQ(s, SIGKILL);
  EXPECT_EQ(LeftoversAfterGrace(job), std::vector<std::string>{});
}

// Finalize on the main thread while other threads are inside calls of every
// kind: a wait that nothing will satisfy, remote puts and gets in a loop,
// collectives in a loop. Those calls leave with kNotInitialized (the wait
// saying it was interrupted by finalize) or finish; nothing crashes, and
// memory a stale pointer still reaches reads as harmless zeros.
TEST(Failure, FinalizeWhileOtherThreadsAreInsideCalls) {
  auto r = RunJob(
      2,
      [](int rank, int n) {
        void *sig, *buf, *readonly, *out;  // puts and gets on separate buffers: no race of the test's own
        RCHECK_OK(hpshmem::Calloc(1, sizeof(int64_t), &sig));
        RCHECK_OK(hpshmem::Malloc(1 << 16, &buf));
        RCHECK_OK(hpshmem::Malloc(1 << 16, &readonly));
        RCHECK_OK(hpshmem::Malloc(1 << 16, &out));
        RCHECK_OK(hpshmem::Barrier());
        const int peer = (rank + 1) % n;
        std::vector<hpshmem::Status> last(4);
        std::atomic<int> started{0};
        std::vector<std::thread> threads;
        threads.emplace_back([&] {  // waits for a signal nobody sends
          ++started;
          last[0] = hpshmem::SignalWaitUntil(sig, SignalType::kInt64, Cmp::kEq, 1, nullptr);
        });
        threads.emplace_back([&] {  // remote puts until refused
          std::vector<char> src(1 << 16, 1);
          ++started;
          while ((last[1] = hpshmem::PutMem(buf, src.data(), src.size(), peer)).ok()) {
          }
        });
        threads.emplace_back([&] {  // remote gets until refused
          std::vector<char> dst(1 << 16);
          ++started;
          while ((last[2] = hpshmem::GetMem(dst.data(), readonly, dst.size(), peer)).ok()) {
          }
        });
        threads.emplace_back([&] {  // collectives until refused
          std::vector<char> in(1000, static_cast<char>(rank));
          ++started;
          while ((last[3] = hpshmem::ops::Allgather(out, in.data(), in.size(), false)).ok()) {
          }
        });
        while (started.load() < 4) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        hpshmem::Status f = hpshmem::Finalize();
        RCHECK(f.ok() || f.code() == Code::kPeerDead, f.ToString());
        for (auto& t : threads) t.join();
        RCHECK(last[0].code() == Code::kNotInitialized, last[0].ToString());
        RCHECK(last[0].message().find("finalized while waiting") != std::string::npos, last[0].message());
        for (int k = 1; k < 4; ++k) {
          RCHECK(last[k].code() == Code::kNotInitialized || last[k].code() == Code::kPeerDead,
                 "thread " + std::to_string(k) + ": " + last[k].ToString());
        }
        // The heap is gone; what a stale pointer reaches now is zeros, not a fault.
        RCHECK(*static_cast<volatile int64_t*>(sig) == 0, "retired heap reads as zeros");
        *static_cast<volatile int64_t*>(sig) = 5;  // and writing there harms nothing
      },
      [] {
        JobOptions o;
        o.finalize = false;
        return o;
      }());
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Failure, FinalizeThenReinitInOneProcess) {
  auto r = RunJob(
      2,
      [](int rank, int n) {
        void* p;
        RCHECK_OK(hpshmem::Malloc(64, &p));
        RCHECK_OK(hpshmem::Finalize());
        RCHECK(hpshmem::PutMem(p, &n, sizeof n, 0).code() == Code::kNotInitialized, "use after finalize");
        RCHECK(hpshmem::Finalize().code() == Code::kNotInitialized, "double finalize");
      },
      [] {
        JobOptions o;
        o.finalize = false;
        return o;
      }());
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}
