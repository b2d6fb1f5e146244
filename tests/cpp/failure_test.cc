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
#include "multirank.h"
#include "ops/ops.h"

using hpshmem::Cmp;
using hpshmem::Code;
using hpshmem::SignalOp;
using hpshmem::SignalType;
using hptest::JobOptions;
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

// Whether a PeerDead message names `rank` among the dead: "rank(s) 1, 3 exited
// ...", "rank 3 has exited ..." or "... to rank 3: the rank exited ...".
bool NamesRank(const std::string& m, int rank) {
  const std::string r = std::to_string(rank);
  size_t at = m.find("rank(s) ");
  if (at != std::string::npos) {
    std::string list = ", " + m.substr(at + 8, m.find(" exited", at) - at - 8) + ",";
    return list.find(", " + r + ",") != std::string::npos;
  }
  return m.find("rank " + r + " has exited") != std::string::npos ||
         m.find("to rank " + r + ": the rank exited") != std::string::npos;
}

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

namespace {

// Names that belong to the job with this unique id: its abstract sockets carry the job id;
// the library never creates anything in /dev/shm, so any "hpshmem" name there counts too.
// (Other jobs running on the host at the same time must not make this test fail.)
std::vector<std::string> LeftoversOf(const std::string& job_hex) {
  std::vector<std::string> out;
  for (const std::string& n : hptest::LeftoverNames())
    if (n.find("@hpshmem/" + job_hex + "/") != std::string::npos ||
        (n.rfind("/dev/shm/", 0) == 0 && n.find("hpshmem") != std::string::npos))
      out.push_back(n);
  return out;
}

// The kernel tears sockets down shortly after their processes are reaped, not at once:
// wait up to 3 s for the names to go, then report what is still there.
std::vector<std::string> LeftoversAfterGrace(const std::string& job_hex) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<std::string> left;
  while (!(left = LeftoversOf(job_hex)).empty() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return left;
}

JobOptions RememberJob(std::string* job_hex) {
  JobOptions o;
  o.on_unique_id = [job_hex](const hpshmem::UniqueId& id) {
    hpshmem::UniqueIdFields f;
    ASSERT_TRUE(hpshmem::DecodeUniqueId(id, &f).ok());
    char b[32];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(f.job_id));
    *job_hex = b;
  };
  return o;
}

}  // namespace

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

namespace {

// One step of the chaos mix; every rank draws the same kind (collectives must
// match), sizes differ per step. Returns the first failure.
hpshmem::Status ChaosStep(std::mt19937_64& rng, int rank, int n, void* out, void* ring_sig, int64_t* ring_round) {
  size_t bytes = 1 + rng() % 70000;
  switch (rng() % 6) {
    case 0:
    case 1: {
      std::vector<char> in(bytes, static_cast<char>(rank));
      return hpshmem::ops::Allgather(out, in.data(), bytes, rng() % 2 == 0);
    }
    case 2: {
      std::vector<char> in(bytes);
      std::vector<const void*> sends(n, in.data());
      std::vector<int64_t> cnt(n, static_cast<int64_t>(bytes / n));
      return hpshmem::ops::Alltoall(sends.data(), cnt.data(), out, cnt.data(), 1, false);
    }
    case 3:
      return hpshmem::Barrier();
    case 4: {
      void* p = nullptr;
      HPSHMEM_RETURN_IF_ERROR(hpshmem::Malloc(bytes, &p));
      return hpshmem::Free(p);
    }
    default: {  // a ring: put with a signal to the next rank, wait for the previous one's
      // Into the upper half of `out`, which no collective here reaches: the next rank may
      // still be finishing the previous collective (as with MPI, returning from one does not
      // mean every peer has).
      int64_t r = ++*ring_round;
      std::vector<char> in(bytes, 7);
      void* ring = static_cast<char*>(out) + (size_t{1} << 19);
      HPSHMEM_RETURN_IF_ERROR(hpshmem::ops::PutMemSignal(ring, in.data(), bytes, ring_sig, SignalType::kInt64, r,
                                                         SignalOp::kSet, (rank + 1) % n));
      return hpshmem::SignalWaitUntil(ring_sig, SignalType::kInt64, Cmp::kGe, r, nullptr);
    }
  }
}

// One chaos job: n ranks run the random mix of `seed`; rank `victim` raises
// `victim_signal` on itself before step `at`. Each survivor passes its first
// failure (the status, how long that call took, the step) to `check`, then runs
// `after` (given every rank's pid). The victim must end by SIGKILL, every
// survivor exit cleanly, and nothing of the job survive it.
void RunChaos(uint64_t seed, int n, int victim, int at, int victim_signal, double timeout_sec,
              const std::function<void(const hpshmem::Status&, double, int)>& check,
              const std::function<void(int, const int64_t*)>& after) {
  std::string job;
  JobOptions o = RememberJob(&job);
  o.timeout_sec = timeout_sec;
  o.finalize = false;
  auto r = RunJob(
      n,
      [&](int rank, int nranks) {
        void *out, *sig, *pids;
        RCHECK_OK(hpshmem::Malloc(size_t{1} << 20, &out));
        RCHECK_OK(hpshmem::Calloc(1, sizeof(int64_t), &sig));
        RCHECK_OK(hpshmem::Malloc(sizeof(int64_t) * nranks, &pids));
        const int64_t me = getpid();
        RCHECK_OK(hpshmem::ops::Allgather(pids, &me, sizeof me, false));
        RCHECK_OK(hpshmem::Barrier());
        std::mt19937_64 rng(seed);
        int64_t ring = 0;
        for (int step = 0;; ++step) {
          if (rank == victim && step == at) raise(victim_signal);
          auto t0 = std::chrono::steady_clock::now();
          hpshmem::Status s = ChaosStep(rng, rank, nranks, out, sig, &ring);
          double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (s.ok()) continue;
          check(s, dt, step);
          break;
        }
        after(rank, static_cast<const int64_t*>(pids));
      },
      o);
  ASSERT_EQ(r.term_signal.size(), static_cast<size_t>(n));
  EXPECT_EQ(r.term_signal[victim], SIGKILL) << "seed " << seed;
  for (int k = 0; k < n; ++k) {
    if (k == victim) continue;
    EXPECT_EQ(r.exit_code[k], 0) << "seed " << seed << ": " << r.Describe();
  }
  EXPECT_FALSE(r.timed_out) << "seed " << seed;
  EXPECT_EQ(LeftoversAfterGrace(job), std::vector<std::string>{}) << "seed " << seed;
}

}  // namespace

// kill -9 of a random rank at a random point of a random mix of collectives,
// allocation, puts and waits, for several seeds: every survivor's failing call
// is PeerDead naming the victim within 5 s of its start, and nothing of the
// job is left behind.
TEST(Failure, ChaosKillAtRandomPointsIsReportedByEverySurvivor) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const int n = 3 + static_cast<int>(seed % 2);
    const int victim = static_cast<int>(seed * 7 % n);
    auto check = [&](const hpshmem::Status& s, double dt, int step) {
      RCHECK(s.code() == Code::kPeerDead,
             "seed " + std::to_string(seed) + " step " + std::to_string(step) + ": " + s.ToString());
      RCHECK(NamesRank(s.message(), victim), "does not name rank " + std::to_string(victim) + ": " + s.message());
      RCHECK(dt < 5.0, "noticed after " + std::to_string(dt) + " s");
    };
    // Survivors leave only once every one of them has seen the death (a survivor
    // that exits early is a second death for the others to report).
    auto after = [](int, const int64_t*) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      (void)hpshmem::Finalize();
    };
    RunChaos(seed, n, victim, static_cast<int>(seed * 13 % 40), SIGKILL, 60, check, after);
  }
}

// SIGSTOP of a random rank at a random point of the same mix: a stopped rank
// is indistinguishable from a slow one, so no survivor may report it dead or
// hang. Each survivor's first failure is kTimeout from a wait that waited its
// full deadline and not much more (a wait that succeeded before it in the same
// call was not blocked). Every survivor has failed within one deadline per rank
// in the longest chain of waits; then one survivor kills the stopped rank, and
// nothing of the job is left behind.
TEST(Failure, ChaosStopAtRandomPointsTimesOutEverySurvivor) {
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    const int n = 3 + static_cast<int>(seed % 2);
    const int victim = static_cast<int>(seed * 5 % n);
    const int killer = victim == 0 ? 1 : 0;
    auto check = [&](const hpshmem::Status& s, double dt, int step) {
      RCHECK(s.code() == Code::kTimeout,
             "seed " + std::to_string(seed) + " step " + std::to_string(step) + ": " + s.ToString());
      RCHECK(s.message().find(" 1 s") != std::string::npos &&
                 s.message().find("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC") != std::string::npos,
             "the message names the deadline and its variable: " + s.message());
      RCHECK(dt >= 0.95 && dt < 3.5, "a 1 s deadline failed after " + std::to_string(dt) + " s: " + s.message());
    };
    // Every survivor has failed once the longest chain of deadlines has run out.
    auto after = [&](int rank, const int64_t* pids) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000 * n + 1000));
      if (rank == killer) kill(static_cast<pid_t>(pids[victim]), SIGKILL);
    };
    RunChaos(seed, n, victim, static_cast<int>(seed * 11 % 30), SIGSTOP, 1, check, after);
  }
}
