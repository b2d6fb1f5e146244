// Teams (hpshmem.h "teams", ops.h): collectives on subsets of the ranks,
// concurrently and back to back, their creation protocol and its mismatches,
// and a killed member that fails its own team only.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "multirank.h"
#include "ops/ops.h"

using hpshmem::Code;
using hpshmem::ops::DType;
using hpshmem::ops::ReduceOp;
using hptest::JobOptions;
using hptest::RunJob;

namespace {

int64_t Val(int global, int call, size_t i) {
  return global * 1000003 + call * 7919 + static_cast<int64_t>(i) * 31 + 1;
}

}  // namespace

// Teams {0, 2} and {3, 1} (team order differs from rank order) run different
// collectives at the same time, back to back, interleaved with world calls;
// then are destroyed and made again (their words reused).
TEST(Team, TwoTeamsRunDifferentCollectivesConcurrently4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    const std::vector<int> a = {0, 2}, b = {3, 1};
    const bool in_a = rank == 0 || rank == 2;
    const std::vector<int>& mine = in_a ? a : b;
    const size_t count = 1009;  // prime
    void *buf, *gather, *world;
    RCHECK_OK(hpshmem::Malloc(count * 2 * sizeof(int64_t), &buf));
    RCHECK_OK(hpshmem::Malloc((count + 3) * 2 * sizeof(int64_t), &gather));
    RCHECK_OK(hpshmem::Malloc(sizeof(int64_t), &world));
    auto* v = static_cast<int64_t*>(buf);
    auto* g = static_cast<int64_t*>(gather);
    for (int round = 0; round < 2; ++round) {
      int team;
      RCHECK_OK(hpshmem::TeamCreate(mine.data(), 2, &team));
      hpshmem::TeamView tv;
      RCHECK_OK(hpshmem::GetTeam(team, &tv));
      RCHECK(tv.size == 2 && tv.pes[tv.me] == rank, "team view");
      const int me = tv.me, other = mine[1 - me];
      for (int call = 0; call < 40; ++call) {
        if (in_a) {  // all-reduce (both algorithms) and allgather
          for (size_t i = 0; i < count; ++i) v[i] = Val(rank, call, i);
          auto algo =
              call % 2 ? hpshmem::ops::AllreduceAlgorithm::kTwoShot : hpshmem::ops::AllreduceAlgorithm::kOneShot;
          RCHECK_OK(hpshmem::ops::Allreduce(buf, count, DType::kInt64, ReduceOp::kSum, algo, team));
          for (size_t i = 0; i < count; ++i)
            RCHECK(v[i] == Val(0, call, i) + Val(2, call, i), "team allreduce call " + std::to_string(call));
          std::vector<int64_t> in(count);
          for (size_t i = 0; i < count; ++i) in[i] = Val(rank, call, i) ^ 0x55;
          RCHECK_OK(hpshmem::ops::Allgather(gather, in.data(), count * 8, call % 3 == 0, 0, team));
          for (int m = 0; m < 2; ++m)
            for (size_t i = 0; i < count; ++i)
              RCHECK(g[m * count + i] == (Val(mine[m], call, i) ^ 0x55), "team allgather");
        } else {  // alltoall, broadcast, reduce-scatter
          std::vector<int64_t> s0(count), s1(count + 3);
          for (size_t i = 0; i < s0.size(); ++i) s0[i] = Val(rank, call, i);
          for (size_t i = 0; i < s1.size(); ++i) s1[i] = -Val(rank, call, i);
          // Team rank 0 receives `count` elements from each member, team rank 1 count + 3.
          const void* sends[2];
          int64_t send_n[2], recv_n[2];
          sends[0] = s0.data();
          send_n[0] = static_cast<int64_t>(count);
          sends[1] = s1.data();
          send_n[1] = static_cast<int64_t>(count + 3);
          recv_n[0] = recv_n[1] = me == 0 ? count : count + 3;
          std::fill(g, g + 2 * count + 6, -7);
          RCHECK_OK(hpshmem::ops::Alltoall(sends, send_n, gather, recv_n, 8, false, 0, team));
          size_t at = 0;
          for (int src = 0; src < 2; ++src)
            for (int64_t i = 0; i < recv_n[src]; ++i, ++at)
              RCHECK(g[at] == (me == 0 ? 1 : -1) * Val(mine[src], call, i), "team alltoall");
          for (size_t i = 0; i < count; ++i) v[i] = Val(rank, call, i);
          RCHECK_OK(hpshmem::ops::Broadcast(buf, count * 8, call % 2, team));
          for (size_t i = 0; i < count; ++i) RCHECK(v[i] == Val(mine[call % 2], call, i), "team broadcast");
          for (size_t i = 0; i < 2 * count; ++i) v[i] = Val(rank, call, i);
          std::vector<int64_t> out(count, -7);
          RCHECK_OK(hpshmem::ops::ReduceScatter(out.data(), buf, count, DType::kInt64, ReduceOp::kMax, team));
          for (size_t i = 0; i < count; ++i)
            RCHECK(out[i] == std::max(Val(rank, call, me * count + i), Val(other, call, me * count + i)),
                   "team reduce-scatter");
        }
        if (call % 10 == 9) {  // the world in between, on its own epochs
          *static_cast<int64_t*>(world) = rank + 1;
          RCHECK_OK(hpshmem::ops::Allreduce(world, 1, DType::kInt64, ReduceOp::kSum));
          RCHECK(*static_cast<int64_t*>(world) == n * (n + 1) / 2, "world allreduce between team calls");
        }
      }
      RCHECK_OK(hpshmem::ops::TeamBarrier(team));
      RCHECK_OK(hpshmem::TeamDestroy(team));
      RCHECK(hpshmem::GetTeam(team, &tv).code() == Code::kInvalidArgument, "a destroyed team is gone");
    }
    // A team of one, and a team of everyone in reverse order.
    int solo, rev;
    RCHECK_OK(hpshmem::TeamCreate(&rank, 1, &solo));
    v[0] = 5;
    RCHECK_OK(
        hpshmem::ops::Allreduce(buf, 1, DType::kInt64, ReduceOp::kAvg, hpshmem::ops::AllreduceAlgorithm::kAuto, solo));
    RCHECK(v[0] == 5, "team of one");
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = n - 1 - i;
    RCHECK_OK(hpshmem::TeamCreate(all.data(), n, &rev));
    int64_t mine_v = rank;
    RCHECK_OK(hpshmem::ops::Allgather(gather, &mine_v, 8, false, 0, rev));
    for (int i = 0; i < n; ++i) RCHECK(g[i] == n - 1 - i, "gathered in team order");
    RCHECK_OK(hpshmem::TeamDestroy(solo));
    RCHECK_OK(hpshmem::TeamDestroy(rev));
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Bad member lists fail at once on the caller; members passing different
// lists (here the same ranks in another order) fail on both; a good creation
// afterwards works.
TEST(Team, CreationErrorsAndMismatches3Ranks) {
  auto r = RunJob(3, [](int rank, int n) {
    int t = -1;
    const int out_of_range[] = {0, n};
    const int twice[] = {rank, rank};
    const int other = (rank + 1) % n;
    RCHECK(hpshmem::TeamCreate(out_of_range, 2, &t).code() == Code::kInvalidArgument, "rank out of range");
    RCHECK(hpshmem::TeamCreate(twice, 2, &t).code() == Code::kInvalidArgument, "listed twice");
    hpshmem::Status s = hpshmem::TeamCreate(&other, 1, &t);
    RCHECK(s.code() == Code::kInvalidArgument && s.message().find("not in the member list") != std::string::npos,
           s.ToString());
    RCHECK(hpshmem::TeamDestroy(hpshmem::kTeamWorld).code() == Code::kInvalidArgument, "world destroyed");
    RCHECK(hpshmem::TeamDestroy(77).code() == Code::kInvalidArgument, "unknown team destroyed");
    RCHECK(hpshmem::ops::TeamBarrier(77).code() == Code::kInvalidArgument, "unknown team used");
    if (rank < 2) {
      const int ab[] = {0, 1}, ba[] = {1, 0};
      s = hpshmem::TeamCreate(rank == 0 ? ab : ba, 2, &t);
      RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
      RCHECK(s.message().find("different") != std::string::npos || s.message().find("disagree") != std::string::npos,
             s.message());
      RCHECK_OK(hpshmem::TeamCreate(ab, 2, &t));
      RCHECK_OK(hpshmem::ops::TeamBarrier(t));
      RCHECK_OK(hpshmem::TeamDestroy(t));
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Rank 1 of team {0, 1} is killed: rank 0's team call fails with PeerDead
// naming it within 5 s, while team {2, 3} goes on with its collectives.
TEST(Team, KilledMemberFailsItsTeamOnly4Ranks) {
  auto r = RunJob(
      4,
      [](int rank, int) {
        const int pairs[2][2] = {{0, 1}, {2, 3}};
        const int* mine = pairs[rank / 2];
        int team;
        RCHECK_OK(hpshmem::TeamCreate(mine, 2, &team));
        void* buf;
        RCHECK_OK(hpshmem::Malloc(64 * 8, &buf));
        auto* v = static_cast<int64_t*>(buf);
        RCHECK_OK(hpshmem::Barrier());
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          raise(SIGKILL);
        }
        auto t0 = std::chrono::steady_clock::now();
        auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        if (rank == 0) {
          hpshmem::Status s;
          for (int call = 0; s.ok() && call < 1000000; ++call)
            s = hpshmem::ops::Allreduce(buf, 64, DType::kInt64, ReduceOp::kSum, hpshmem::ops::AllreduceAlgorithm::kAuto,
                                        team);
          RCHECK(s.code() == Code::kPeerDead && s.message().find("rank(s) 1 ") != std::string::npos, s.ToString());
          RCHECK(elapsed() < 5.3, "took " + std::to_string(elapsed()) + " s to notice");
        } else {
          // Well past the death: every call of the other team must still succeed.
          // v[63] says "go on" (both members decide alike: the sum is 2).
          for (int call = 0;; ++call) {
            for (int i = 0; i < 63; ++i) v[i] = rank * 10 + call;
            v[63] = elapsed() < 2.5 ? 1 : 0;
            RCHECK_OK(hpshmem::ops::Allreduce(buf, 64, DType::kInt64, ReduceOp::kSum,
                                              hpshmem::ops::AllreduceAlgorithm::kAuto, team));
            for (int i = 0; i < 63; ++i) RCHECK(v[i] == 50 + 2 * call, "the other team's allreduce");
            if (v[63] != 2) break;
          }
          RCHECK_OK(hpshmem::ops::TeamBarrier(team));
        }
        hpshmem::Status s = hpshmem::Finalize();  // the world barrier cannot complete
        RCHECK(s.code() == Code::kPeerDead, s.ToString());
      },
      [] {
        JobOptions o;
        o.timeout_sec = 60;
        o.finalize = false;
        return o;
      }());
  ASSERT_EQ(r.term_signal.size(), 4u);
  EXPECT_EQ(r.term_signal[1], SIGKILL);
  for (int k : {0, 2, 3}) EXPECT_EQ(r.exit_code[k], 0) << r.Describe();
  EXPECT_FALSE(r.timed_out);
}

// Ranks that enter the collectives of two teams in opposite orders would wait
// for each other forever: both find out from each other's wait notes and fail
// with kCollectiveMismatch long before the timeout. Ranks 2 and 3, in neither
// team's call, are not involved.
TEST(Team, CollectivesOfDifferentTeamsInOppositeOrdersFailBothRanks4Ranks) {
  auto r = RunJob(4, [](int rank, int) {
    void* buf;
    RCHECK_OK(hpshmem::Malloc(64 * 8, &buf));
    auto* v = static_cast<int64_t*>(buf);
    if (rank < 2) {
      const int ab[] = {0, 1}, ba[] = {1, 0};
      int t1, t2;
      RCHECK_OK(hpshmem::TeamCreate(ab, 2, &t1));
      RCHECK_OK(hpshmem::TeamCreate(ba, 2, &t2));
      for (int i = 0; i < 64; ++i) v[i] = rank + 1;
      auto t0 = std::chrono::steady_clock::now();
      hpshmem::Status s = hpshmem::ops::Allreduce(buf, 64, DType::kInt64, ReduceOp::kSum,
                                                  hpshmem::ops::AllreduceAlgorithm::kAuto, rank == 0 ? t1 : t2);
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
      RCHECK(s.message().find("different orders") != std::string::npos, s.message());
      RCHECK(dt < 5.0, "took " + std::to_string(dt) + " s");
      for (int i = 0; i < 64; ++i) RCHECK(v[i] == rank + 1, "a deadlocked call wrote");
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}
