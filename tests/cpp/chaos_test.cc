// Chaos: a rank killed or stopped at a random point of a random mix of
// collectives, allocation, puts and waits; every survivor must name it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

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
