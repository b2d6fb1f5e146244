// The collective copies (ops/collective_copy): allgather and alltoall in
// both modes, back to back, with odd sizes, uneven and empty pieces, and a
// size mismatch that must fail on both sides without hanging anyone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "multirank.h"
#include "ops/ops.h"

using hpshmem::Code;
using hptest::RunJob;

namespace {

unsigned char Byte(int src, size_t i, int call) { return static_cast<unsigned char>(src * 31 + i * 7 + call * 13 + 1); }

// Elements rank `src` sends to rank `dst` in call `call` (uneven; some empty).
int64_t Count(int src, int dst, int call) { return (src + dst + call) % 4 == 0 ? 0 : (src * 5 + dst * 3 + call) % 7 + 1; }

}  // namespace

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

// Peers on other hosts send allgather data before this rank enters the call
// (held at the target until it does, see hpshmem::PutMemSignalGated): a rank
// that is late must still find its previous results untouched when it enters,
// and the new ones complete after. Sizes cross the message piece (256 KiB) and
// the largest held size (1 MiB), so held pieces queue and the bigger sizes
// take the announced path.
TEST(Collective, AllgatherEarlyPeersNeverTouchALateRanksOutput4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    const size_t sizes[] = {1, 4099, 300007, (1 << 20) + 8, 8};
    const size_t max_bytes = (1 << 20) + 8;
    void* out;
    RCHECK_OK(hpshmem::Malloc(max_bytes * n, &out));
    auto* o = static_cast<unsigned char*>(out);
    auto check = [&](size_t bytes, int call, const std::string& when) {
      for (int src = 0; src < n; ++src)
        for (size_t i = 0; i < bytes; ++i)
          RCHECK(o[src * bytes + i] == Byte(src, i, call), when + " call " + std::to_string(call) + " from rank " +
                                                               std::to_string(src) + " byte " + std::to_string(i));
    };
    for (int call = 0; call < 10; ++call) {
      size_t bytes = sizes[call % 5];
      if (call > 0 && rank == call % n) {  // late: peers have sent this call's data by now
        usleep(40 * 1000);
        check(sizes[(call - 1) % 5], call - 1, "before entering");
      }
      std::vector<unsigned char> in(bytes);
      for (size_t i = 0; i < bytes; ++i) in[i] = Byte(rank, i, call);
      RCHECK_OK(hpshmem::ops::Allgather(out, in.data(), bytes, /*pull=*/false));
      check(bytes, call, "after");
    }
    // Gated puts exist for peers that can hold them, and only for those.
    for (int p = 0; p < n; ++p) {
      int64_t* sig = static_cast<int64_t*>(out);
      hpshmem::Status s = hpshmem::PutMemSignalGated(o, o, 0, sig, hpshmem::SignalType::kInt64, 0,
                                                     hpshmem::SignalOp::kAdd, p, sig, 0);
      RCHECK(s.ok() == hpshmem::CanHoldGated(p), "gated put to rank " + std::to_string(p) + ": " + s.ToString());
      if (!s.ok()) RCHECK(s.code() == Code::kUnsupported, s.ToString());
    }
    RCHECK_OK(hpshmem::Barrier());
  });
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
          RCHECK(got[k] == q * 1000 + rank * 100 + static_cast<int>(i) + call, "alltoall piece from " + std::to_string(q));
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
