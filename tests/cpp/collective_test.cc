// The collective copies (ops/allgather, ops/alltoall): allgather and alltoall in
// both modes, back to back, with odd sizes, uneven and empty pieces, and a
// size mismatch that must fail on both sides without hanging anyone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "multirank.h"
#include "ops/collective/team_block.h"
#include "ops/ops.h"

using hpshmem::Code;
using hptest::RunJob;

namespace {

unsigned char Byte(int src, size_t i, int call) { return static_cast<unsigned char>(src * 31 + i * 7 + call * 13 + 1); }

// Elements rank `src` sends to rank `dst` in call `call` (uneven; some empty).
int64_t Count(int src, int dst, int call) {
  return (src + dst + call) % 4 == 0 ? 0 : (src * 5 + dst * 3 + call) % 7 + 1;
}

// Bytes the world's calls send eagerly (hpshmem::ops::EagerLimit): the slot across hosts, less on one host.
size_t Eager() {
  size_t bytes = 0;
  EXPECT_TRUE(hpshmem::ops::EagerLimit(hpshmem::kTeamWorld, &bytes).ok());
  return bytes;
}

}  // namespace

// The runtime reserves per team member exactly the block the collectives lay out.
TEST(Collective, TeamBlockLayoutFillsTheRuntimesBlock) {
  for (int n = 1; n <= 4096; ++n)
    ASSERT_EQ(hpshmem::ops::TeamBlockWords(n) * sizeof(int64_t), hpshmem::TeamBlockBytes(n)) << n << " members";
}

TEST(Collective, AllgatherPushAndPullBackToBack3Ranks) {
  auto r = RunJob(3, [](int rank, int n) {
    const size_t bytes = 4099;
    void* out;
    RCHECK_OK(hpshmem::Malloc(bytes * n, &out));
    auto* o = static_cast<unsigned char*>(out);
    for (int call = 0; call < 50; ++call) {
      std::vector<unsigned char> in(bytes);
      for (size_t i = 0; i < bytes; ++i) in[i] = Byte(rank, i, call);
      RCHECK_OK(hpshmem::ops::Allgather(out, in.data(), bytes, /*pull=*/call % 3 == 0));
      // No barrier: a faster peer must not have started overwriting this call's output.
      for (int src = 0; src < n; ++src)
        for (size_t i = 0; i < bytes; ++i)
          RCHECK(o[src * bytes + i] == Byte(src, i, call), "allgather call " + std::to_string(call));
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Options for a job whose calls move pieces past the largest that go in steps across hosts (16 MiB).
hptest::JobOptions HeapOf(size_t bytes) {
  hptest::JobOptions o;
  o.heap_bytes = bytes;
  return o;
}

// Peers send allgather data before this rank enters the call (into its eager
// slots, a slot at a time across hosts): a rank that is late must still find
// its previous results untouched when it enters, and the new ones complete
// after. Sizes cross the eager slot, the message piece (240 KiB) and, across
// hosts, the largest size that goes in steps (16 MiB), past which the call is
// announced.
TEST(Collective, AllgatherEarlyPeersNeverTouchALateRanksOutput4Ranks) {
  auto r = RunJob(
      4,
      [](int rank, int n) {
        const size_t sizes[] = {1, 4099, 300007, (1 << 20) + 8, 8, (16 << 20) + 8};
        const size_t max_bytes = (16 << 20) + 8;
        void* out;
        RCHECK_OK(hpshmem::Malloc(max_bytes * n, &out));
        auto* o = static_cast<unsigned char*>(out);
        auto check = [&](size_t bytes, int call, const std::string& when) {
          for (int src = 0; src < n; ++src)
            for (size_t i = 0; i < bytes; ++i)
              RCHECK(o[src * bytes + i] == Byte(src, i, call), when + " call " + std::to_string(call) + " from rank " +
                                                                   std::to_string(src) + " byte " + std::to_string(i));
        };
        for (int call = 0; call < 12; ++call) {
          size_t bytes = sizes[call % 6];
          if (call > 0 && rank == call % n) {  // late: peers have sent this call's data by now
            usleep(40 * 1000);
            check(sizes[(call - 1) % 6], call - 1, "before entering");
          }
          std::vector<unsigned char> in(bytes);
          for (size_t i = 0; i < bytes; ++i) in[i] = Byte(rank, i, call);
          RCHECK_OK(hpshmem::ops::Allgather(out, in.data(), bytes, /*pull=*/false));
          check(bytes, call, "after");
        }
        RCHECK_OK(hpshmem::Barrier());
      },
      HeapOf(96 << 20));
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Collective, AlltoallUnevenPiecesAndMismatch4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    const size_t item = 4;
    void* recv;
    void* sendbuf;
    RCHECK_OK(hpshmem::Malloc(64 * item, &recv));
    RCHECK_OK(hpshmem::Malloc(n * 8 * item, &sendbuf));  // symmetric pieces for pull mode
    auto* s = static_cast<int32_t*>(sendbuf);
    for (int call = 0; call < 20; ++call) {
      std::vector<const void*> sends(n);
      std::vector<int64_t> send_n(n), recv_n(n);
      for (int p = 0; p < n; ++p) {
        send_n[p] = Count(rank, p, call);
        recv_n[p] = Count(p, rank, call);
        for (int64_t i = 0; i < send_n[p]; ++i) s[p * 8 + i] = rank * 1000 + p * 100 + static_cast<int>(i) + call;
        sends[p] = s + p * 8;
      }
      std::memset(recv, 0xEE, 64 * item);
      RCHECK_OK(hpshmem::ops::Alltoall(sends.data(), send_n.data(), recv, recv_n.data(), item, call % 2 == 1));
      auto* got = static_cast<int32_t*>(recv);
      int64_t k = 0;
      for (int q = 0; q < n; ++q)
        for (int64_t i = 0; i < recv_n[q]; ++i, ++k)
          RCHECK(got[k] == q * 1000 + rank * 100 + static_cast<int>(i) + call,
                 "alltoall piece from " + std::to_string(q));
      RCHECK(static_cast<uint32_t>(got[k]) == 0xEEEEEEEEu, "alltoall wrote past its pieces");
      RCHECK_OK(hpshmem::Barrier());  // the next call rewrites the send pieces
    }
    // Rank 0 sends one element more to rank 1 than rank 1 expects: both fail, nobody hangs.
    for (bool pull : {false, true}) {
      std::vector<const void*> sends(n, s);
      std::vector<int64_t> send_n(n, 2), recv_n(n, 2);
      if (rank == 0) send_n[1] = 3;
      hpshmem::Status st = hpshmem::ops::Alltoall(sends.data(), send_n.data(), recv, recv_n.data(), item, pull);
      if (rank == 0 || rank == 1) {
        RCHECK(st.code() == Code::kCollectiveMismatch, "rank " + std::to_string(rank) + ": " + st.ToString());
      } else {
        RCHECK_OK(st);
      }
      RCHECK_OK(hpshmem::Barrier());
    }
    // ...and the next correct call works and raises nothing stale.
    std::vector<const void*> sends(n, s);
    std::vector<int64_t> ones(n, 1);
    RCHECK_OK(hpshmem::ops::Alltoall(sends.data(), ones.data(), recv, ones.data(), item, false));
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

namespace {

// Rank `src`'s input element i in call `call`: small integers, exact in every dtype.
int64_t Input(int src, size_t i, int call) { return static_cast<int64_t>((src * 7 + i * 3 + call * 5) % 23) - 11; }

}  // namespace

// Every op on int64 and float32, both algorithms, sizes around the blocks of
// the two-shot split; back to back with no barrier (a faster peer must not
// disturb a slower rank's call), against the reduction computed here.
TEST(Collective, AllreduceEveryOpBothAlgorithmsBackToBack4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    using hpshmem::ops::AllreduceAlgorithm;
    using hpshmem::ops::DType;
    using hpshmem::ops::ReduceOp;
    // Across hosts with 4 ranks (auto): float32 4099 in one eager step; int64 4099 and 13001 in two, 70001 in
    // five chunks of two (float32: three), 140001 in nine (float32: five); the named algorithms announced.
    const size_t sizes[] = {0, 1, 7, 4099, 13001, 70001, 140001};
    void* buf;
    RCHECK_OK(hpshmem::Malloc(140001 * 8, &buf));
    int call = 0;
    for (size_t count : sizes) {
      for (int op = 0; op < 5; ++op) {
        for (auto algo : {AllreduceAlgorithm::kOneShot, AllreduceAlgorithm::kTwoShot, AllreduceAlgorithm::kAuto}) {
          ++call;
          auto* i64 = static_cast<int64_t*>(buf);
          for (size_t i = 0; i < count; ++i) i64[i] = Input(rank, i, call) + (op == 4 ? 14 : 0);
          RCHECK_OK(hpshmem::ops::Allreduce(buf, count, DType::kInt64, static_cast<ReduceOp>(op), algo));
          for (size_t i = 0; i < count; ++i) {
            int64_t want = Input(0, i, call) + (op == 4 ? 14 : 0);
            for (int p = 1; p < n; ++p) {
              int64_t v = Input(p, i, call) + (op == 4 ? 14 : 0);
              want = op <= 1 ? want + v : op == 2 ? std::max(want, v) : op == 3 ? std::min(want, v) : want * v;
            }
            if (op == 1) want /= n;
            RCHECK(i64[i] == want, "int64 op " + std::to_string(op) + " n=" + std::to_string(count) +
                                       " i=" + std::to_string(i) + ": " + std::to_string(i64[i]) +
                                       " != " + std::to_string(want));
          }
          ++call;
          auto* f = static_cast<float*>(buf);
          for (size_t i = 0; i < count; ++i) f[i] = static_cast<float>(Input(rank, i, call)) / 8;
          RCHECK_OK(hpshmem::ops::Allreduce(buf, count, DType::kFloat32, static_cast<ReduceOp>(op), algo));
          for (size_t i = 0; i < count; ++i) {
            float want = static_cast<float>(Input(0, i, call)) / 8;
            for (int p = 1; p < n; ++p) {
              float v = static_cast<float>(Input(p, i, call)) / 8;
              want = op <= 1 ? want + v : op == 2 ? std::max(want, v) : op == 3 ? std::min(want, v) : want * v;
            }
            if (op == 1) want /= static_cast<float>(n);
            RCHECK(std::memcmp(&f[i], &want, 4) == 0, "float32 op " + std::to_string(op) + " i=" + std::to_string(i));
          }
        }
      }
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Half precision is summed in float32 in rank order and rounded once: with
// values that lose bits when rounded at every step, the result tells.
TEST(Collective, AllreduceHalfPrecisionRoundsOnce3Ranks) {
  auto r = RunJob(3, [](int rank, int n) {
    // Within one eager slot, then, across hosts, one chunk of steps and three (on 3 ranks a chunk holds
    // 1.5 x Eager() float16 values).
    for (size_t count : {size_t{1001}, Eager() + 3, 3 * Eager() + 1}) {
      void* buf;
      RCHECK_OK(hpshmem::Malloc(count * 2, &buf));
      auto* h = static_cast<_Float16*>(buf);
      auto value = [](int p, size_t i) { return static_cast<float>(p == 0 ? 2048 : 0.5 + 0.25 * (i % 3)); };
      for (size_t i = 0; i < count; ++i) h[i] = static_cast<_Float16>(value(rank, i));
      RCHECK_OK(hpshmem::ops::Allreduce(buf, count, hpshmem::ops::DType::kFloat16, hpshmem::ops::ReduceOp::kSum));
      for (size_t i = 0; i < count; ++i) {
        float acc = 0;
        for (int p = 0; p < n; ++p) acc += value(p, i);
        RCHECK(h[i] == static_cast<_Float16>(acc),
               "float16 sum i=" + std::to_string(i) + " of " + std::to_string(count));
      }
      RCHECK_OK(hpshmem::Free(buf));
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

namespace {

uint64_t Mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return x;
}

// A float of global rank `src` at element i of call `call` whose sums depend
// on their order: a sign, 12 random mantissa bits and an exponent in [-8, 8).
float Spread(int src, size_t i, int call) {
  const uint64_t x = Mix(i + (static_cast<uint64_t>(call) << 40) + (static_cast<uint64_t>(src) << 56));
  const float m = 1.0f + static_cast<float>(x & 0xFFF) / 4096.0f;
  return std::ldexp((x >> 12) & 1 ? -m : m, static_cast<int>((x >> 13) % 16) - 8);
}

}  // namespace

namespace {

// Allreduces of float32 values whose sums depend on their order over team
// `team` (members `pes`, this rank among them) must come out bit for bit as a
// sum over the members in team-rank order: every op, in place and from a
// separate source, each of `counts` elements; every element of `buf` and the
// one past it are checked, and the source must be left as it was. Then an
// int32 sum over the whole range (integers wrap alike on every path).
void CheckAllreduceInRankOrder(int rank, const std::vector<int>& pes, int team, int call, void* buf,
                               std::initializer_list<size_t> counts) {
  using hpshmem::ops::DType;
  using hpshmem::ops::ReduceOp;
  auto* f = static_cast<float*>(buf);
  std::string name = "team [";
  for (int p : pes) name += std::to_string(p) + (p == pes.back() ? "]" : ", ");
  for (size_t count : counts) {
    for (int op = 0; op < 5; ++op, ++call) {
      const bool separate = call % 2 == 1;
      // Products of values near 1, so that they neither overflow nor vanish.
      auto value = [&](int src, size_t i) {
        const float v = Spread(src, i, call);
        return op == 4 ? 1.0f + v / 512.0f : v;
      };
      std::vector<float> src(count);
      for (size_t i = 0; i < count; ++i) src[i] = value(rank, i);
      for (size_t i = 0; i <= count; ++i) f[i] = separate || i == count ? -777.0f : src[i];
      RCHECK_OK(hpshmem::ops::Allreduce(buf, count, DType::kFloat32, static_cast<ReduceOp>(op),
                                        hpshmem::ops::AllreduceAlgorithm::kAuto, team,
                                        separate ? src.data() : nullptr));
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < count; ++i) {
        float want = value(pes[0], i);
        for (size_t p = 1; p < pes.size(); ++p) {
          const float v = value(pes[p], i);
          want = op <= 1 ? want + v : op == 2 ? std::max(want, v) : op == 3 ? std::min(want, v) : want * v;
        }
        if (op == 1) want /= static_cast<float>(pes.size());
        if (std::memcmp(&f[i], &want, 4) != 0 && wrong++ == 0) first = i;
      }
      const std::string what = name + ", op " + std::to_string(op) + ", " + std::to_string(count) + " floats" +
                               (separate ? " from a separate source" : "");
      RCHECK(wrong == 0, what + ": " + std::to_string(wrong) + " wrong, the first at " + std::to_string(first));
      RCHECK(f[count] == -777.0f, what + " wrote past its size");
      for (size_t i = 0; i < count; ++i) RCHECK(src[i] == value(rank, i), what + " changed its source");
    }
  }
  auto* i32 = static_cast<int32_t*>(buf);
  const size_t count = 65536 + 7;
  for (size_t i = 0; i < count; ++i) i32[i] = static_cast<int32_t>(Mix(i * 5 + rank));
  RCHECK_OK(hpshmem::ops::Allreduce(buf, count, DType::kInt32, ReduceOp::kSum, hpshmem::ops::AllreduceAlgorithm::kAuto,
                                    team));
  for (size_t i = 0; i < count; ++i) {
    uint32_t want = 0;
    for (int p : pes) want += static_cast<uint32_t>(static_cast<int32_t>(Mix(i * 5 + p)));
    RCHECK(static_cast<uint32_t>(i32[i]) == want, name + ": int32 sum at " + std::to_string(i));
  }
}

// Runs CheckAllreduceInRankOrder over each team of `teams` this rank is in
// (the world where the list is 0..n-1), creating and destroying the others.
void CheckAllreduceTeams(int rank, int n, const std::vector<std::vector<int>>& teams, void* buf,
                         std::initializer_list<size_t> counts) {
  for (size_t t = 0; t < teams.size(); ++t) {
    const std::vector<int>& pes = teams[t];
    if (std::find(pes.begin(), pes.end(), rank) == pes.end()) continue;
    std::vector<int> world(n);
    std::iota(world.begin(), world.end(), 0);
    int team = hpshmem::kTeamWorld;
    if (pes != world) RCHECK_OK(hpshmem::TeamCreate(pes.data(), static_cast<int>(pes.size()), &team));
    // The same call numbers on every member, whichever teams it skipped.
    CheckAllreduceInRankOrder(rank, pes, team, static_cast<int>(t) * 100, buf, counts);
    if (team != hpshmem::kTeamWorld) RCHECK_OK(hpshmem::TeamDestroy(team));
  }
}

}  // namespace

// Allreduce on two hosts whose members are consecutive team ranks, one host
// holding several (across simulated hosts: from 256 KiB each host's partial
// goes on to the other and the result comes back; elsewhere the usual paths):
// sizes on both sides of the threshold and over several chunks with an odd
// tail; the world, a team whose first host holds one member ([3, 0, 1]) and
// one whose hosts interleave ([0, 2, 1, 3]: the usual paths).
TEST(Collective, AllreduceByHostKeepsTheRankOrder4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    const size_t most = (3 << 20) / 4 + 2;
    void* buf;
    RCHECK_OK(hpshmem::Malloc(most * 4, &buf));
    CheckAllreduceTeams(rank, n, {{0, 1, 2, 3}, {3, 0, 1}, {0, 2, 1, 3}, {2, 1}, {3, 0}}, buf,
                        {size_t{65535}, size_t{65539}, size_t{262147}, most - 1});
    RCHECK_OK(hpshmem::Free(buf));
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Allreduce along three hosts ({0, 1}, {2, 3, 4}, {5}): partials go on from
// host to host and the result comes back through a middle host; teams whose
// middle host holds one member ([2, 3, 4, 5, 0, 1]) and whose first does
// ([5, 0, 1, 2]).
TEST(Collective, AllreduceByHostAlongThreeHosts6Ranks) {
  hptest::JobOptions opts;
  opts.heap_bytes = 16 << 20;
  opts.before_init = [](int rank, int) {
    setenv("HYPER_PARALLEL_SHMEM_HOST_ID", rank < 2 ? "hostA" : rank < 5 ? "hostB" : "hostC", 1);
    setenv("UCX_TLS", "tcp,self", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
  };
  auto r = RunJob(
      6,
      [](int rank, int n) {
        void* buf;
        RCHECK_OK(hpshmem::Malloc((1 << 20) + 64, &buf));
        CheckAllreduceTeams(rank, n, {{0, 1, 2, 3, 4, 5}, {2, 3, 4, 5, 0, 1}, {5, 0, 1, 2}}, buf,
                            {size_t{65539}, size_t{262147}});
        RCHECK_OK(hpshmem::Free(buf));
        RCHECK_OK(hpshmem::Barrier());
      },
      opts);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Sizes on both sides of the eager slot (across hosts, calls up to a slot go
// eager, up to a slot per rank in two eager steps, larger ones are announced),
// back to back; every third broadcast from a separate source, which leaves the
// root's own buffer as it was.
TEST(Collective, ReduceScatterAndBroadcastBackToBack3Ranks) {
  auto r = RunJob(3, [](int rank, int n) {
    const size_t slot = Eager();
    // int32 elements per block; across hosts (3 ranks): one eager step, two or four steps of a slot per
    // block, or (past 16 MiB of input) announced.
    const size_t counts[] = {1, 7, slot / 4, slot / 4 + 1, slot / 4 * 3 + 7, 0, (1 << 22) / 3 + 5};
    // Broadcast bytes; across hosts (3 ranks): one eager step, chunks of 3 slots in two steps each, or
    // (past 4 MiB) announced.
    const size_t sizes[] = {1001, 0, slot, slot + 1, 1, 3 * slot + 11, 3 * slot - 1, (1 << 20) + 3, (4 << 20) + 1};
    void* in;
    RCHECK_OK(hpshmem::Malloc(((1 << 22) / 3 + 5) * n * 4 + 64, &in));
    for (int call = 0; call < 63; ++call) {  // every pair of the two lists
      const size_t count = counts[call % 7];
      std::vector<int32_t> out(count + 1, -7);
      auto* v = static_cast<int32_t*>(in);
      for (size_t i = 0; i < count * n; ++i) v[i] = static_cast<int32_t>(Input(rank, i, call));
      RCHECK_OK(hpshmem::ops::ReduceScatter(out.data(), in, count, hpshmem::ops::DType::kInt32,
                                            hpshmem::ops::ReduceOp::kSum));
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 0;
        for (int p = 0; p < n; ++p) want += Input(p, rank * count + i, call);
        RCHECK(out[i] == want, "reduce_scatter call " + std::to_string(call));
      }
      RCHECK(out[count] == -7, "reduce_scatter wrote past its output");
      for (size_t i = 0; i < count * n; ++i) RCHECK(v[i] == Input(rank, i, call), "reduce_scatter changed its input");
      const int root = call % n;
      const size_t bytes = sizes[call % 9];
      const bool separate = call % 3 == 1;
      std::vector<unsigned char> src(bytes + 1);
      for (size_t i = 0; i <= bytes; ++i) src[i] = Byte(root, i, call);
      auto* b = static_cast<unsigned char*>(in);
      for (size_t i = 0; i <= bytes; ++i) b[i] = rank == root && !separate ? src[i] : 0xEE;
      RCHECK_OK(hpshmem::ops::Broadcast(in, bytes, root, hpshmem::kTeamWorld,
                                        separate && rank == root ? src.data() : nullptr));
      const std::string what = "broadcast of " + std::to_string(bytes) + " B, call " + std::to_string(call);
      for (size_t i = 0; i < bytes; ++i) RCHECK(b[i] == (rank == root && separate ? 0xEE : src[i]), what);
      RCHECK(b[bytes] == (rank == root && !separate ? src[bytes] : 0xEE), what + " wrote past its size");
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// A byte that differs between any two offsets of a broadcast (Byte repeats
// every 256 bytes, so a chunk landing at another chunk's offset would pass).
unsigned char Mixed(int root, size_t i, int call) {
  uint64_t x = i + (static_cast<uint64_t>(call) << 40) + (static_cast<uint64_t>(root) << 56);
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return static_cast<unsigned char>(x >> 24);
}

// Broadcasts from every root with two ranks per host (across hosts: the data
// crosses to each host once, in chunks, and its first member's host-mates
// copy it from there; on one host the usual paths): sizes on both sides of
// the by-host threshold and of the eager slot, and past several chunks, with
// the root's own buffer or a separate source. Every byte of every member is
// checked, and the byte past the size.
TEST(Collective, BroadcastFromEveryRootTwoPerHost4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    const size_t slot = Eager();
    const size_t sizes[] = {(16 << 10) - 1, 16 << 10, slot, slot + 1, (1 << 20) + 3, (5 << 20) + 7};
    const size_t most = (5 << 20) + 8;
    void* buf;
    RCHECK_OK(hpshmem::Malloc(most, &buf));
    auto* b = static_cast<unsigned char*>(buf);
    int call = 0;
    for (size_t bytes : sizes) {
      for (int root = 0; root < n; ++root, ++call) {
        const bool separate = call % 2 == 1;
        std::vector<unsigned char> src(bytes + 1);
        for (size_t i = 0; i <= bytes; ++i) src[i] = Mixed(root, i, call);
        for (size_t i = 0; i <= bytes; ++i) b[i] = rank == root && !separate ? src[i] : 0xEE;
        RCHECK_OK(hpshmem::ops::Broadcast(buf, bytes, root, hpshmem::kTeamWorld,
                                          separate && rank == root ? src.data() : nullptr));
        const std::string what = "broadcast of " + std::to_string(bytes) + " B from rank " + std::to_string(root) +
                                 (separate ? " (separate source)" : "");
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < bytes; ++i) {
          const unsigned char want = rank == root && separate ? 0xEE : src[i];
          if (b[i] != want && wrong++ == 0) first = i;
        }
        RCHECK(wrong == 0, what + ": " + std::to_string(wrong) + " bytes wrong, the first at " + std::to_string(first));
        RCHECK(b[bytes] == (rank == root && !separate ? src[bytes] : 0xEE), what + " wrote past its size");
      }
    }
    RCHECK_OK(hpshmem::Free(buf));
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Ranks that pass different sizes, ops or roots all fail, nothing is written,
// and the next call works.
TEST(Collective, ReducingCollectiveMismatchFailsOnEveryRank3Ranks) {
  auto r = RunJob(3, [](int rank, int n) {
    using hpshmem::ops::DType;
    using hpshmem::ops::ReduceOp;
    void* buf;
    RCHECK_OK(hpshmem::Malloc(64 * 8, &buf));
    auto* v = static_cast<int64_t*>(buf);
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 64; ++i) v[i] = rank + 1;
      hpshmem::Status s =
          round == 0   ? hpshmem::ops::Allreduce(buf, rank == 2 ? 63 : 64, DType::kInt64, ReduceOp::kSum)
          : round == 1 ? hpshmem::ops::Allreduce(buf, 64, DType::kInt64, rank == 1 ? ReduceOp::kMax : ReduceOp::kSum)
                       : hpshmem::ops::Broadcast(buf, 64, rank == 0 ? 1 : 0);
      RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
      RCHECK(s.message().find("ranks disagree") != std::string::npos, s.message());
      for (int i = 0; i < 64; ++i) RCHECK(v[i] == rank + 1, "a mismatched call wrote");
      RCHECK_OK(hpshmem::ops::Allreduce(buf, 64, DType::kInt64, ReduceOp::kSum));
      for (int i = 0; i < 64; ++i) RCHECK(v[i] == n * (n + 1) / 2, "the call after a mismatch");
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Small calls go eager (into per-sender slots of each peer, two per sender by
// call parity, written before the peer enters the call); larger ones are
// announced first. Eight ranks (more than this host's cores) run a fixed random
// mix of both, back to back with no barrier in between, so fast ranks write
// the next call's slots while slow ones still copy out of the last: every
// value is checked, and nothing is written past a call's output.
TEST(Collective, EagerAndAnnouncedCallsBackToBackWithoutBarriers8Ranks) {
  auto r = RunJob(8, [](int rank, int n) {
    const size_t slot = Eager();
    RCHECK(slot == 4096 || slot == 16384, "eager limit of 8 ranks: " + std::to_string(slot));
    const size_t gather_sizes[] = {0, 1, 7, slot - 1, slot, slot + 1, 7 * slot + 11};
    const int64_t fill = static_cast<int64_t>(slot / 4);  // int32 elements that fill a slot
    const int64_t piece_sizes[] = {0, 1, fill - 1, fill, fill + 1, 3 * fill - 71};
    const size_t max_out = (7 * slot + 11) * n + 64;
    void *out, *recv;
    RCHECK_OK(hpshmem::Malloc(max_out, &out));
    RCHECK_OK(hpshmem::Malloc((3 * fill - 71) * 4 * n + 64, &recv));
    auto* o = static_cast<unsigned char*>(out);
    uint64_t seed = 12345;  // the same sequence of calls on every rank
    auto next = [&] {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<size_t>(seed >> 33);
    };
    for (int call = 0; call < 60; ++call) {
      if (next() % 2 == 0) {
        size_t bytes = gather_sizes[next() % 7];
        bool pull = next() % 4 == 0;
        std::memset(o, 0xEE, max_out);
        std::vector<unsigned char> in(bytes + 1);
        for (size_t i = 0; i < bytes; ++i) in[i] = Byte(rank, i, call);
        RCHECK_OK(hpshmem::ops::Allgather(out, in.data(), bytes, pull));
        for (int src = 0; src < n; ++src)
          for (size_t i = 0; i < bytes; ++i)
            RCHECK(o[src * bytes + i] == Byte(src, i, call),
                   "allgather of " + std::to_string(bytes) + " B, call " + std::to_string(call));
        RCHECK(o[n * bytes] == 0xEE, "allgather wrote past its output");
        if (pull) RCHECK_OK(hpshmem::Barrier());  // pull peers read our buffer until their own call ends
      } else {
        // Piece sizes per (sender, receiver) pair, known to both: each pair picks its own.
        auto count = [&](int src, int dst) { return piece_sizes[(src * 7 + dst * 3 + call) % 6]; };
        std::vector<std::vector<int32_t>> pieces(n);
        std::vector<const void*> sends(n);
        std::vector<int64_t> send_n(n), recv_n(n);
        for (int p = 0; p < n; ++p) {
          send_n[p] = count(rank, p);
          recv_n[p] = count(p, rank);
          pieces[p].resize(send_n[p] + 1);
          for (int64_t i = 0; i < send_n[p]; ++i) pieces[p][i] = rank * 100000 + p * 10000 + static_cast<int>(i) + call;
          sends[p] = pieces[p].data();
        }
        auto* got = static_cast<int32_t*>(recv);
        int64_t total = std::accumulate(recv_n.begin(), recv_n.end(), int64_t{0});
        std::fill(got, got + total + 1, static_cast<int32_t>(0xEEEEEEEE));
        RCHECK_OK(hpshmem::ops::Alltoall(sends.data(), send_n.data(), recv, recv_n.data(), 4, /*pull=*/false));
        int64_t k = 0;
        for (int q = 0; q < n; ++q)
          for (int64_t i = 0; i < recv_n[q]; ++i, ++k)
            RCHECK(got[k] == q * 100000 + rank * 10000 + static_cast<int>(i) + call,
                   "alltoall piece of " + std::to_string(recv_n[q]) + " from rank " + std::to_string(q) + ", call " +
                       std::to_string(call));
        RCHECK(static_cast<uint32_t>(got[total]) == 0xEEEEEEEEu, "alltoall wrote past its pieces");
      }
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Across hosts a small allreduce or reduce-scatter goes eager (every rank's
// values into every peer's slot, no announcement); a rank whose count sends it
// down the announced path instead must still meet the others' disagreement,
// and all fail alike, writing nothing, then agree on the next call.
TEST(Collective, ReducingMismatchAcrossTheEagerSlotFailsEveryRank4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    using hpshmem::ops::DType;
    using hpshmem::ops::ReduceOp;
    const size_t slot_elems = Eager() / 8;
    const size_t cap = 2097173 + 4 * (2 * slot_elems + 5);
    void* buf;
    RCHECK_OK(hpshmem::Malloc(cap * 8, &buf));
    auto* v = static_cast<int64_t*>(buf);
    // Rank 3's count against the others': past the slot against within it, within against past, both within.
    // (For reduce-scatter, a quarter of each per block: 4 ranks.)
    // Across hosts an allreduce of one slot goes in one eager step, of up to 16 MiB in chunks of two, past it
    // announced; a reduce-scatter too, a broadcast past one slot in steps up to 4 MiB, then announced, and
    // with two ranks per host by host from 16 KiB (eager up to a slot): 16 KiB + 40 B against 8000 B.
    const std::pair<size_t, size_t> cases[] = {{4 * slot_elems + 4, 28},
                                               {2048 + 5, 1000},
                                               {52, 4 * slot_elems + 8},
                                               {4, 8},
                                               {slot_elems + 1, 7},
                                               {2 * slot_elems + 3, 4 * slot_elems + 8},
                                               {2 * slot_elems + 3, slot_elems + 2},
                                               {140001, 2 * slot_elems + 3},
                                               {524308, 2 * slot_elems + 3},
                                               {2097172, 2 * slot_elems + 3}};
    for (auto [odd, usual] : cases) {
      for (size_t i = 0; i < cap; ++i) v[i] = rank * 1000 + static_cast<int64_t>(i);
      hpshmem::Status s = hpshmem::ops::Allreduce(buf, rank == 3 ? odd : usual, DType::kInt64, ReduceOp::kSum);
      RCHECK(s.code() == Code::kCollectiveMismatch, "rank " + std::to_string(rank) + ": " + s.ToString());
      for (size_t i = 0; i < cap; ++i)
        RCHECK(v[i] == rank * 1000 + static_cast<int64_t>(i), "element " + std::to_string(i) + " written");
      // Reduce-scatter of odd / usual elements per block (its input holds n blocks).
      std::vector<int64_t> out(cap, -7);
      s = hpshmem::ops::ReduceScatter(out.data(), buf, (rank == 3 ? odd : usual) / n, DType::kInt64, ReduceOp::kSum);
      RCHECK(s.code() == Code::kCollectiveMismatch,
             "reduce_scatter, rank " + std::to_string(rank) + ": " + s.ToString());
      for (size_t i = 0; i < cap; ++i) RCHECK(out[i] == -7, "reduce_scatter wrote element " + std::to_string(i));
      // Broadcast of odd / usual int64 elements from rank 1: every rank fails, no member's buffer changes.
      s = hpshmem::ops::Broadcast(buf, (rank == 3 ? odd : usual) * 8, 1);
      RCHECK(s.code() == Code::kCollectiveMismatch, "broadcast, rank " + std::to_string(rank) + ": " + s.ToString());
      for (size_t i = 0; i < cap; ++i)
        RCHECK(v[i] == rank * 1000 + static_cast<int64_t>(i), "broadcast wrote element " + std::to_string(i));
      for (size_t count : {size_t{1}, slot_elems, slot_elems + 1, 3 * slot_elems + 5}) {
        for (size_t i = 0; i < count; ++i) v[i] = rank + 1 + static_cast<int64_t>(i);
        RCHECK_OK(hpshmem::ops::Allreduce(buf, count, DType::kInt64, ReduceOp::kSum));
        for (size_t i = 0; i < count; ++i)
          RCHECK(v[i] == n * (n + 1) / 2 + n * static_cast<int64_t>(i), "the call after a mismatch");
        for (size_t i = 0; i < count; ++i) v[i] = rank + 1 + static_cast<int64_t>(i);
        RCHECK_OK(hpshmem::ops::ReduceScatter(out.data(), buf, count / n, DType::kInt64, ReduceOp::kSum));
        for (size_t i = 0; i < count / n; ++i) {
          int64_t want = n * (n + 1) / 2 + n * static_cast<int64_t>(rank * (count / n) + i);
          RCHECK(out[i] == want, "the reduce-scatter after a mismatch");
        }
      }
    }
    // The same bytes as another dtype: across hosts the others' int64 allreduce goes by host, rank 3's
    // bfloat16 (never by host) in eager steps; then a dtype that also goes by host (float64).
    for (DType odd : {DType::kBFloat16, DType::kFloat64}) {
      for (size_t i = 0; i < cap; ++i) v[i] = rank * 1000 + static_cast<int64_t>(i);
      const size_t count = rank == 3 && odd == DType::kBFloat16 ? 4 * 140001 : 140001;
      hpshmem::Status s = hpshmem::ops::Allreduce(buf, count, rank == 3 ? odd : DType::kInt64, ReduceOp::kMax);
      RCHECK(s.code() == Code::kCollectiveMismatch, "dtype, rank " + std::to_string(rank) + ": " + s.ToString());
      for (size_t i = 0; i < cap; ++i)
        RCHECK(v[i] == rank * 1000 + static_cast<int64_t>(i), "dtype mismatch wrote element " + std::to_string(i));
    }
    RCHECK_OK(hpshmem::Barrier());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Allgather with each piece crossing to the other host once (across simulated
// hosts from 64 KiB, two hosts of equal size; elsewhere the usual paths):
// sizes on both sides of the threshold and over several chunks with an odd
// tail, for the world and a team whose hosts interleave in team-rank order
// ([1, 2, 0, 3]); the piece from a private buffer, from its own place in the
// output, or from a place in the output where another member's piece goes.
// Every byte of every output and the byte past it are checked.
TEST(Collective, AllgatherByHostEverySizeAndPlace4Ranks) {
  auto r = RunJob(
      4,
      [](int rank, int n) {
        const size_t sizes[] = {(64 << 10) - 1, 64 << 10, (256 << 10) - 1, 300007, (3 << 20) + 5};
        const size_t most = (3 << 20) + 5;
        void* out;
        RCHECK_OK(hpshmem::Malloc(most * n + 1, &out));
        auto* o = static_cast<unsigned char*>(out);
        const std::vector<std::vector<int>> teams = {{0, 1, 2, 3}, {1, 2, 0, 3}, {2, 1}, {3, 0}};
        for (size_t t = 0; t < teams.size(); ++t) {
          const std::vector<int>& pes = teams[t];
          const int me = static_cast<int>(std::find(pes.begin(), pes.end(), rank) - pes.begin());
          if (me == static_cast<int>(pes.size())) continue;
          const int w = static_cast<int>(pes.size());
          int call = static_cast<int>(t) * 100;  // the same on every member, whichever teams it skipped
          int team = hpshmem::kTeamWorld;
          if (t > 0) RCHECK_OK(hpshmem::TeamCreate(pes.data(), w, &team));
          std::string name = "team [";
          for (int p : pes) name += std::to_string(p) + (p == pes.back() ? "], " : ", ");
          for (size_t bytes : sizes) {
            for (int where = 0; where < 3; ++where, ++call) {
              std::vector<unsigned char> mine(bytes);
              for (size_t i = 0; i < bytes; ++i) mine[i] = Mixed(rank, i, call);
              std::memset(o, 0xEE, bytes * w + 1);
              // 0: a private buffer; 1: our own place in the output; 2: the place of the next member's piece.
              const int place = where == 1 ? me : (me + 1) % w;
              const void* in = mine.data();
              if (where > 0) {
                std::memcpy(o + place * bytes, mine.data(), bytes);
                in = o + place * bytes;
              }
              RCHECK_OK(hpshmem::ops::Allgather(out, in, bytes, /*pull=*/false, 0, team));
              const std::string what = name + std::to_string(bytes) + " B, piece " +
                                       (where == 0   ? "private"
                                        : where == 1 ? "in place"
                                                     : "elsewhere");
              for (int p = 0; p < w; ++p) {
                size_t wrong = 0, first = 0;
                for (size_t i = 0; i < bytes; ++i)
                  if (o[p * bytes + i] != Mixed(pes[p], i, call) && wrong++ == 0) first = i;
                RCHECK(wrong == 0, what + ": member " + std::to_string(p) + "'s piece: " + std::to_string(wrong) +
                                       " bytes wrong, the first at " + std::to_string(first));
              }
              RCHECK(o[bytes * w] == 0xEE, what + " wrote past the output");
            }
          }
          if (team != hpshmem::kTeamWorld) RCHECK_OK(hpshmem::TeamDestroy(team));
        }
        RCHECK_OK(hpshmem::Free(out));
        RCHECK_OK(hpshmem::Barrier());
      },
      HeapOf(32 << 20));
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Allgather by host on three hosts of 3, 1 and 2 members ({0, 1, 2}, {3},
// {4, 5}): receivers that take pieces from no member, one (they pass each
// chunk on as it arrives) or several (they pass them on once all are in), a
// host with no host-mate to pass to. Every byte of every output is checked.
TEST(Collective, AllgatherByHostOnThreeUnevenHosts6Ranks) {
  hptest::JobOptions opts;
  opts.heap_bytes = 16 << 20;
  opts.before_init = [](int rank, int) {
    setenv("HYPER_PARALLEL_SHMEM_HOST_ID", rank < 3 ? "hostA" : rank == 3 ? "hostB" : "hostC", 1);
    setenv("UCX_TLS", "tcp,self", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
  };
  auto r = RunJob(
      6,
      [](int rank, int n) {
        const size_t sizes[] = {64 << 10, 300007, (1 << 20) + 3};
        void* out;
        RCHECK_OK(hpshmem::Malloc(((1 << 20) + 3) * n + 1, &out));
        auto* o = static_cast<unsigned char*>(out);
        int call = 0;
        for (size_t bytes : sizes) {
          for (int in_place = 0; in_place < 2; ++in_place, ++call) {
            std::vector<unsigned char> mine(bytes);
            for (size_t i = 0; i < bytes; ++i) mine[i] = Mixed(rank, i, call);
            std::memset(o, 0xEE, bytes * n + 1);
            if (in_place) std::memcpy(o + rank * bytes, mine.data(), bytes);
            RCHECK_OK(hpshmem::ops::Allgather(out, in_place ? o + rank * bytes : mine.data(), bytes, false));
            for (int p = 0; p < n; ++p) {
              size_t wrong = 0, first = 0;
              for (size_t i = 0; i < bytes; ++i)
                if (o[p * bytes + i] != Mixed(p, i, call) && wrong++ == 0) first = i;
              RCHECK(wrong == 0, std::to_string(bytes) + " B: rank " + std::to_string(p) + "'s piece: " +
                                     std::to_string(wrong) + " bytes wrong, the first at " + std::to_string(first));
            }
            RCHECK(o[bytes * n] == 0xEE, std::to_string(bytes) + " B: wrote past the output");
          }
        }
        RCHECK_OK(hpshmem::Free(out));
        RCHECK_OK(hpshmem::Barrier());
      },
      opts);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Ranks that pass different allgather sizes, on both sides of the eager slot,
// both within it or both past it: every rank fails (each sees a peer that differs), nothing
// of a rank whose size differs reaches anyone's output (eager outputs stay untouched), and
// the next correct calls (eager and announced) work. Across hosts a piece past the slot goes in steps
// (up to 16 MiB, then announced); the first step compares the sizes.
TEST(Collective, AllgatherSizeMismatchAcrossTheEagerSlotFailsEveryRank4Ranks) {
  auto r = RunJob(
      4,
      [](int rank, int n) {
        const size_t slot = Eager();
        const size_t big = (16 << 20) + 1;
        const size_t cap = big * n + 64;
        void* out;
        RCHECK_OK(hpshmem::Malloc(cap, &out));
        auto* o = static_cast<unsigned char*>(out);
        std::vector<unsigned char> in(big, static_cast<unsigned char>(rank + 1));
        // Rank 1's size against the others': past the slot against within it, both within it, both past it,
        // past the largest size in steps against within it.
        const std::pair<size_t, size_t> cases[] = {
            {slot + 1, 64}, {100, 64}, {2 * slot + 3, slot + 1}, {big, slot + 1}};
        for (auto [odd, usual] : cases) {
          size_t bytes = rank == 1 ? odd : usual;
          std::memset(o, 0xEE, cap);
          hpshmem::Status st = hpshmem::ops::Allgather(out, in.data(), bytes, false);
          RCHECK(st.code() == Code::kCollectiveMismatch, "rank " + std::to_string(rank) + ": " + st.ToString());
          RCHECK(st.message().find("different sizes") != std::string::npos, st.message());
          for (size_t i = 0; i < cap; ++i) {
            bool own = i >= rank * bytes && i < (rank + 1) * bytes;
            // Announced pieces of ranks that agree with each other still land (both sizes past the slot).
            size_t q = i / bytes;
            bool agreed = usual > slot && rank != 1 && q < static_cast<size_t>(n) && q != 1;
            RCHECK(own || agreed || o[i] == 0xEE, "byte " + std::to_string(i) + " written by a mismatched allgather");
          }
          RCHECK_OK(hpshmem::Barrier());
        }
        for (size_t bytes : {slot, slot + 1}) {
          RCHECK_OK(hpshmem::ops::Allgather(out, in.data(), bytes, false));
          for (int src = 0; src < n; ++src)
            RCHECK(o[src * bytes] == src + 1 && o[src * bytes + bytes - 1] == src + 1, "allgather after the mismatch");
        }
        RCHECK_OK(hpshmem::Barrier());
      },
      HeapOf(96 << 20));
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// An alltoall piece the sender sends past the slot while its receiver expects
// one that fits (and the other way round): that pair fails, the rest of the
// call completes, and the receiver's buffer holds nothing of the piece.
TEST(Collective, AlltoallMismatchAcrossTheEagerSlotFailsThePair4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    const int64_t fit = static_cast<int64_t>(Eager() / 4);  // int32 elements
    void* recv;
    RCHECK_OK(hpshmem::Malloc((fit + 1) * 4 * n + 64, &recv));
    std::vector<int32_t> piece(fit + 1, rank);
    for (int flip = 0; flip < 2; ++flip) {
      std::vector<const void*> sends(n, piece.data());
      std::vector<int64_t> send_n(n, 2), recv_n(n, 2);
      // flip 0: rank 0 sends fit + 1 to rank 1, which expects fit; flip 1: sends fit, expected fit + 1.
      if (rank == 0) send_n[1] = fit + (flip ? 0 : 1);
      if (rank == 1) recv_n[0] = fit + (flip ? 1 : 0);
      auto* got = static_cast<int32_t*>(recv);
      std::fill(got, got + (fit + 1) * n, static_cast<int32_t>(0xEEEEEEEE));
      hpshmem::Status st = hpshmem::ops::Alltoall(sends.data(), send_n.data(), recv, recv_n.data(), 4, false);
      if (rank == 0 || rank == 1) {
        RCHECK(st.code() == Code::kCollectiveMismatch, "rank " + std::to_string(rank) + ": " + st.ToString());
      } else {
        RCHECK_OK(st);
      }
      if (rank == 1)
        for (int64_t i = 0; i < recv_n[0]; ++i)
          RCHECK(static_cast<uint32_t>(got[i]) == 0xEEEEEEEEu, "the mismatched piece was written");
      RCHECK_OK(hpshmem::Barrier());
    }
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// A collective's own signals are left out of Quiet (CollectiveScope), the
// user's puts, signals and atomics around it are not: Quiet pays a round
// trip to exactly the peers across hosts that the user wrote to, and after
// it a peer told only out of band (the bootstrap, not the transport) finds
// every byte and the update there.
TEST(Collective, QuietAfterACollectiveCompletesTheUsersWritesOnly4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    auto round_trips = [] {
      std::string st = hpshmem::DebugState();
      size_t at = st.find("\"quiet_round_trips\": ");
      RCHECK(at != std::string::npos, st);
      return std::stoll(st.substr(at + 21));
    };
    const size_t bytes = (1 << 20) + 3, slot = bytes + 61;
    void* buf;
    RCHECK_OK(hpshmem::Calloc(1, slot + 64, &buf));
    auto* data = static_cast<unsigned char*>(buf);
    auto* counter = reinterpret_cast<int64_t*>(data + slot);
    std::memset(data, 0xCD, slot);
    void* out;
    RCHECK_OK(hpshmem::Malloc(n * 8, &out));
    RCHECK_OK(hpshmem::Barrier());
    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    const int64_t remote = hpshmem::DirectlyReachable(to) ? 0 : 1;  // round trips a write to `to` costs Quiet
    for (int round = 1; round <= 3; ++round) {
      int64_t mine = rank * 100 + round, q0 = round_trips();
      RCHECK_OK(hpshmem::ops::Allgather(out, &mine, sizeof mine, false));
      for (int p = 0; p < n; ++p) RCHECK(static_cast<int64_t*>(out)[p] == p * 100 + round, "allgather value");
      RCHECK_OK(hpshmem::Quiet());
      RCHECK(round_trips() == q0, "Quiet after a collective alone paid " + std::to_string(round_trips() - q0));
      std::vector<unsigned char> src(bytes);
      for (size_t i = 0; i < bytes; ++i) src[i] = Byte(rank, i, round) == 0xCD ? 1 : Byte(rank, i, round);
      RCHECK_OK(hpshmem::PutMemNbi(data, src.data(), bytes, to));
      RCHECK_OK(hpshmem::AmoNbi(counter, hpshmem::SignalType::kInt64, hpshmem::AmoOp::kAdd, rank + 1, to));
      RCHECK_OK(hpshmem::ops::Allgather(out, &mine, sizeof mine, false));
      RCHECK_OK(hpshmem::Quiet());
      RCHECK(round_trips() == q0 + remote, "Quiet after the user's writes and a collective paid " +
                                               std::to_string(round_trips() - q0) + ", not " + std::to_string(remote));
      int64_t token = round, all[64];
      RCHECK_OK(hpshmem::BootstrapAllgather(&token, sizeof token, all));
      for (size_t i = 0; i < bytes; ++i) {
        unsigned char want = Byte(from, i, round) == 0xCD ? 1 : Byte(from, i, round);
        RCHECK(data[i] == want, "round " + std::to_string(round) + ": byte " + std::to_string(i) + " not there");
      }
      for (size_t i = bytes; i < slot; ++i) RCHECK(data[i] == 0xCD, "written past the end");
      RCHECK(*counter == int64_t{round} * (from + 1), "the atomic: " + std::to_string(*counter));
      RCHECK_OK(hpshmem::BootstrapAllgather(&token, sizeof token, all));  // nobody overwrites before all checked
    }
    RCHECK_OK(hpshmem::Free(out));
    RCHECK_OK(hpshmem::Free(buf));
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}
