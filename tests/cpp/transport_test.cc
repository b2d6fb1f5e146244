// The per-peer transports: which peer goes through what, and what only UCX
// paths exercise (the one-message put-with-signal threshold, very large
// copies, fetching atomics applied by the target, an idle progress thread).
// These tests set their layout themselves; the rest of the suite also runs
// under every layout (see multirank.h).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "multirank.h"
#include "ops/ops.h"
#include "ucx_transport.h"

using hpshmem::Cmp;
using hpshmem::Code;
using hpshmem::SignalOp;
using hpshmem::SignalType;
using hptest::JobOptions;
using hptest::RunJob;

namespace {

// Ranks [0, n/2) on host "a", the rest on "b"; UCX over TCP on loopback between them.
JobOptions TwoHosts(size_t heap = 64 << 20) {
  JobOptions o;
  o.heap_bytes = heap;
  o.env = {{"UCX_TLS", "tcp,self"}, {"UCX_NET_DEVICES", "lo"}};
  o.before_init = [](int rank, int n) { setenv("HYPER_PARALLEL_SHMEM_HOST_ID", rank < n / 2 ? "a" : "b", 1); };
  return o;
}

// memcmp/memcpy are undefined for null pointers even at length 0 (an empty vector's data()).
bool Same(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

std::vector<unsigned char> Random(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<unsigned char>(rng() % 255);  // never 0xFF, the poison
  return v;
}

}  // namespace

TEST(Transport, PeersAreRoutedByHostAndDebugStateNamesThem) {
  auto r = RunJob(
      4,
      [](int rank, int n) {
        for (int p = 0; p < n; ++p) {
          std::string want = p == rank ? "self" : (p / 2 == rank / 2 ? "shm" : "ucx");
          RCHECK(hpshmem::PeerTransport(p) == want, "rank " + std::to_string(p) + ": " + hpshmem::PeerTransport(p));
        }
        RCHECK(hpshmem::PeerTransport(n) == nullptr && hpshmem::PeerTransport(-1) == nullptr, "out of range");
        void* p;
        RCHECK_OK(hpshmem::Malloc(64, &p));
        RCHECK(hpshmem::Ptr(p, rank ^ 1) != nullptr, "a same-host peer is mapped");
        RCHECK(hpshmem::Ptr(p, (rank + 2) % n) == nullptr, "a peer on another host is not");
        std::string js = hpshmem::DebugState();
        RCHECK(js.find("\"transport\": \"shm+ucx\"") != std::string::npos, js);
        std::string peers = "\"peer_transports\": [";
        for (int q = 0; q < n; ++q) peers += std::string(q ? ", " : "") + "\"" + hpshmem::PeerTransport(q) + "\"";
        RCHECK(js.find(peers + "]") != std::string::npos, js);
        RCHECK_OK(hpshmem::Free(p));
      },
      TwoHosts());
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Transport, ForcedUcxReachesEveryPeerThroughUcx) {
  JobOptions o;
  o.env = {{"UCX_TLS", "tcp,self"}, {"UCX_NET_DEVICES", "lo"}, {"HYPER_PARALLEL_SHMEM_TRANSPORT", "ucx"}};
  auto r = RunJob(
      3,
      [](int rank, int n) {
        void* p;
        RCHECK_OK(hpshmem::Malloc(64, &p));
        for (int q = 0; q < n; ++q) {
          RCHECK(std::string(hpshmem::PeerTransport(q)) == (q == rank ? "self" : "ucx"), hpshmem::PeerTransport(q));
          RCHECK((hpshmem::Ptr(p, q) != nullptr) == (q == rank), "only this rank's own heap is mapped");
        }
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Transport, BadTransportVariablesAreNamed) {
  for (auto [var, value] :
       std::vector<std::pair<std::string, std::string>>{{"HYPER_PARALLEL_SHMEM_TRANSPORT", "rdma"},
                                                        {"HYPER_PARALLEL_SHMEM_HOST_ID", std::string(61, 'h')},
                                                        {"HYPER_PARALLEL_SHMEM_UCX_RMA", "yes"}}) {
    JobOptions o;
    o.env = {{var, value}};
    o.on_init_status = [var](int, const hpshmem::Status& s) {
      RCHECK(s.code() == Code::kInvalidArgument && s.message().find(var) != std::string::npos, s.ToString());
    };
    auto r = RunJob(2, [](int, int) { hptest::FailRank(__FILE__, __LINE__, "Init should have failed"); }, o);
    EXPECT_TRUE(r.AllOk()) << var << ": " << r.Describe();
  }
}

class TransportSizes : public ::testing::TestWithParam<const char*> {};

TEST_P(TransportSizes, AroundThePieceSizeAndAbove64MiB) {
  // 1 rank per host. Every size goes out as put, put-with-signal and get, with
  // random data into poisoned memory; each element is checked. Run with the
  // data as messages (default) and as UCX RMA (HYPER_PARALLEL_SHMEM_UCX_RMA=1). Under a sanitizer
  // the largest size is 9 MiB (still many pieces).
  const size_t big = (size_t{hptest::kSanitized ? 9 : 64} << 20) + 13;
  const size_t lim = hpshmem::kAmChunk;
  const std::vector<size_t> sizes = {0, 1, 7, lim - 1, lim, lim + 1, 3 * lim, 1000003, big};
  auto r = RunJob(
      2,
      [&](int rank, int) {
        const int peer = 1 - rank;
        void *buf, *sig;
        RCHECK_OK(hpshmem::Malloc(big, &buf));
        RCHECK_OK(hpshmem::Calloc(1, sizeof(int64_t), &sig));
        auto* b = static_cast<unsigned char*>(buf);
        for (size_t i = 0; i < sizes.size(); ++i) {
          size_t n = sizes[i];
          for (int mode = 0; mode < 3; ++mode) {  // put, put-with-signal, get
            std::memset(b, 0xFF, n + 1 <= big ? n + 1 : n);
            RCHECK_OK(hpshmem::Barrier());
            int64_t step = static_cast<int64_t>(i * 3 + mode + 1);
            auto data = Random(n, static_cast<unsigned>(step * 7 + rank));
            if (mode == 0) {
              RCHECK_OK(hpshmem::ops::PutMem(b, data.data(), n, peer));
              RCHECK_OK(hpshmem::Signal(sig, SignalType::kInt64, step, SignalOp::kSet, peer));
            } else if (mode == 1) {
              RCHECK_OK(
                  hpshmem::ops::PutMemSignal(b, data.data(), n, sig, SignalType::kInt64, step, SignalOp::kSet, peer));
            }
            if (mode < 2) {
              RCHECK_OK(hpshmem::SignalWaitUntil(sig, SignalType::kInt64, Cmp::kEq, step, nullptr));
              auto want = Random(n, static_cast<unsigned>(step * 7 + peer));
              RCHECK(Same(b, want.data(), n), "mode " + std::to_string(mode) + " size " + std::to_string(n));
              if (n + 1 <= big) RCHECK(b[n] == 0xFF, "wrote past the end at size " + std::to_string(n));
            } else {
              if (n) std::memcpy(b, data.data(), n);  // this rank's own copy is what the peer reads
              RCHECK_OK(hpshmem::Barrier());
              std::vector<unsigned char> got(n + 1, 0xFF);
              RCHECK_OK(hpshmem::ops::GetMem(got.data(), b, n, peer));
              auto want = Random(n, static_cast<unsigned>(step * 7 + peer));
              RCHECK(Same(got.data(), want.data(), n) && got[n] == 0xFF, "get size " + std::to_string(n));
              RCHECK_OK(hpshmem::Barrier());  // the peer's get of our copy is done before we poison it again
            }
          }
        }
        RCHECK_OK(hpshmem::Barrier());
      },
      [] {
        JobOptions o = TwoHosts(big + (1 << 20));
        o.env.emplace_back("HYPER_PARALLEL_SHMEM_UCX_RMA", GetParam());
        return o;
      }());
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

INSTANTIATE_TEST_SUITE_P(Transport, TransportSizes, ::testing::Values("0", "1"),
                         [](const auto& info) { return std::string(*info.param == '1' ? "Rma" : "Messages"); });

TEST(Transport, FetchingAtomicsFromEveryRankAreAppliedOnce) {
  // 4 ranks on 2 hosts fetch-add into rank 0's word, same-host ones by load/store,
  // the others through UCX: every old value is seen exactly once.
  constexpr int kAdds = 300;
  auto r = RunJob(
      4,
      [](int rank, int n) {
        void* w;
        RCHECK_OK(hpshmem::Calloc(2, sizeof(int64_t), &w));
        auto* word = static_cast<int64_t*>(w);
        std::vector<int64_t> olds;
        for (int i = 0; i < kAdds; ++i) {
          int64_t old = -1;
          RCHECK_OK(hpshmem::AtomicFetch(word, SignalType::kInt64, 1, SignalOp::kAdd, 0, &old));
          olds.push_back(old);
          // Plain signals land in the same word too; they must not be lost either.
          RCHECK_OK(hpshmem::Signal(word + 1, SignalType::kInt64, 1, SignalOp::kAdd, 0));
        }
        int64_t swapped = -1;
        RCHECK_OK(hpshmem::Barrier());
        if (rank == n - 1) {
          RCHECK_OK(hpshmem::AtomicFetch(word + 1, SignalType::kInt64, -5, SignalOp::kSet, 0, &swapped));
          RCHECK(swapped == int64_t{kAdds} * n, "swap returned " + std::to_string(swapped));
        }
        RCHECK_OK(hpshmem::Barrier());
        std::vector<int64_t> all(static_cast<size_t>(kAdds) * n);
        RCHECK_OK(hpshmem::BootstrapAllgather(olds.data(), olds.size() * sizeof(int64_t), all.data()));
        std::set<int64_t> seen(all.begin(), all.end());
        RCHECK(seen.size() == all.size() && *seen.begin() == 0 && *seen.rbegin() == int64_t{kAdds} * n - 1,
               "fetched values are not a permutation");
        if (rank == 0) {
          RCHECK(word[0] == int64_t{kAdds} * n && word[1] == -5, "final values");
        }
        int64_t dummy;
        auto s = hpshmem::AtomicFetch(word, SignalType::kInt64, 1, SignalOp::kAdd, n, &dummy);
        RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
        s = hpshmem::AtomicFetch(word, SignalType::kInt64, 1, SignalOp::kAdd, 0, nullptr);
        RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
        RCHECK_OK(hpshmem::Barrier());
      },
      TwoHosts());
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Transport, IdleRanksAcrossHostsCostNoCpuAndWakeOnRemoteSignals) {
  // Rank 0 (host a) signals rank 1 (host b) after 1 s; the whole waiting
  // process (its UCX progress thread included) must stay nearly idle.
  auto r = RunJob(
      2,
      [](int rank, int) {
        void* sig;
        RCHECK_OK(hpshmem::Calloc(1, sizeof(int32_t), &sig));
        RCHECK_OK(hpshmem::Barrier());
        if (rank == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1000));
          RCHECK_OK(hpshmem::Signal(sig, SignalType::kInt32, 7, SignalOp::kSet, 1));
        } else {
          double cpu0 = hptest::ProcessCpuSeconds();
          auto t0 = std::chrono::steady_clock::now();
          int64_t seen = 0;
          RCHECK_OK(hpshmem::SignalWaitUntil(sig, SignalType::kInt32, Cmp::kEq, 7, &seen));
          double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          double cpu = hptest::ProcessCpuSeconds() - cpu0;
          RCHECK(seen == 7 && wall > 0.8, "woken by the signal after " + std::to_string(wall) + " s");
          RCHECK(wall < 1.5, "the remote signal took " + std::to_string(wall - 1) + " s too long to wake the waiter");
          RCHECK(cpu < 0.15 * wall,
                 "the process burned " + std::to_string(cpu) + " s of CPU in " + std::to_string(wall) + " s");
        }
        RCHECK_OK(hpshmem::Barrier());
      },
      TwoHosts());
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Transport, RepeatedSetUpAcrossHostsConnectsEveryTime) {
  // Connection set-up races (a peer's first message arriving before this
  // rank's endpoint back to it exists) struck about one job in 250: run 200.
  constexpr int kJobs = 200;
  JobOptions o = TwoHosts(1 << 20);
  o.finalize = false;
  o.timeout_sec = 10;
  auto r = RunJob(
      4,
      [](int rank, int n) {
        for (int job = 0; job < kJobs; ++job) {
          hpshmem::UniqueId mine{}, all[4];
          if (rank == 0) RCHECK_OK(hpshmem::GetUniqueId(&mine));
          RCHECK_OK(hpshmem::BootstrapAllgather(&mine, sizeof mine, all));  // the next job's id, through this job
          RCHECK_OK(hpshmem::Finalize());
          hpshmem::InitAttr a;
          a.rank = rank;
          a.nranks = n;
          a.unique_id = &all[0];
          a.heap_bytes = 1 << 20;
          a.timeout_sec = 10;
          hpshmem::Status s = hpshmem::Init(a);
          RCHECK(s.ok(), "job " + std::to_string(job) + ": " + s.ToString());
          RCHECK_OK(hpshmem::Barrier());
        }
        RCHECK_OK(hpshmem::Finalize());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}
