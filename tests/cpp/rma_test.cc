#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "multirank.h"
#include "ops/ops.h"

using hpshmem::Cmp;
using hpshmem::Code;
using hpshmem::SignalOp;
using hpshmem::SignalType;
using hptest::JobOptions;
using hptest::RunJob;

namespace {

constexpr unsigned char kPoison = 0xCD;
const size_t kSizes[] = {0, 1, 7, 4097, (1 << 20) + 3};

// Deterministic random bytes for (source rank, size, salt).
std::vector<unsigned char> Pattern(int src, size_t n, int salt) {
  std::vector<unsigned char> v(n);
  std::mt19937 rng(static_cast<unsigned>(src * 1000003 + n * 7 + salt));
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  // Keep the poison value out so a missed byte cannot pass by accident.
  for (auto& b : v)
    if (b == kPoison) b = 0x11;
  return v;
}

void RoundTrips(int rank, int n, int block_dim) {
  const size_t slot = (1 << 20) + 64 + 4096;
  void* buf;
  RCHECK_OK(hpshmem::Malloc(slot * 5, &buf));
  auto* base = static_cast<unsigned char*>(buf);
  std::memset(base, kPoison, slot * 5);
  RCHECK_OK(hpshmem::Barrier());
  int to = (rank + 1) % n, from = (rank + n - 1) % n;
  for (int i = 0; i < 5; ++i) {
    auto data = Pattern(rank, kSizes[i], block_dim);
    RCHECK_OK(hpshmem::ops::PutMem(base + slot * i, data.data(), data.size(), to, block_dim));
  }
  RCHECK_OK(hpshmem::Barrier());
  for (int i = 0; i < 5; ++i) {
    auto want = Pattern(from, kSizes[i], block_dim);
    unsigned char* got = base + slot * i;
    RCHECK(want.empty() || std::memcmp(got, want.data(), want.size()) == 0,
           "put data, size " + std::to_string(kSizes[i]));
    for (size_t k = kSizes[i]; k < slot; ++k)
      RCHECK(got[k] == kPoison, "byte past the end written, size " + std::to_string(kSizes[i]));
  }
  // Get: read what `from` received from its own predecessor into poisoned local memory.
  int from2 = (from + n - 1) % n;
  for (int i = 0; i < 5; ++i) {
    std::vector<unsigned char> local(kSizes[i] + 100, kPoison);
    RCHECK_OK(hpshmem::ops::GetMem(local.data(), base + slot * i, kSizes[i], from, block_dim));
    auto want = Pattern(from2, kSizes[i], block_dim);
    RCHECK(want.empty() || std::memcmp(local.data(), want.data(), want.size()) == 0,
           "get data, size " + std::to_string(kSizes[i]));
    for (size_t k = kSizes[i]; k < local.size(); ++k) RCHECK(local[k] == kPoison, "get wrote past the end");
  }
  RCHECK_OK(hpshmem::Barrier());
  RCHECK_OK(hpshmem::Free(buf));
}

}  // namespace

TEST(Rma, PutGetRoundTrips2Ranks) {
  auto r = RunJob(2, [](int rank, int n) { RoundTrips(rank, n, 1); });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Rma, PutGetRoundTrips4RanksBlockDim3) {
  auto r = RunJob(4, [](int rank, int n) {
    RoundTrips(rank, n, 3);
    RoundTrips(rank, n, 1);
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Rma, ToSelfAndFromEveryRank) {
  auto r = RunJob(3, [](int rank, int n) {
    void* buf;
    RCHECK_OK(hpshmem::Malloc(n * 101 * sizeof(int), &buf));
    auto* a = static_cast<int*>(buf);
    std::vector<int> mine(101);
    for (int i = 0; i < 101; ++i) mine[i] = rank * 1000 + i;
    for (int p = 0; p < n; ++p) RCHECK_OK(hpshmem::PutMem(a + rank * 101, mine.data(), 101 * sizeof(int), p));
    RCHECK_OK(hpshmem::Barrier());
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < 101; ++i) RCHECK(a[p * 101 + i] == p * 1000 + i, "value");
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Rma, BadRequestsWriteNothing) {
  JobOptions o;
  o.heap_bytes = 4 << 20;
  auto r = RunJob(
      3,
      [](int rank, int n) {
        const size_t heap = 4 << 20;
        void* buf;
        RCHECK_OK(hpshmem::Malloc(heap - 4096, &buf));  // leave room only for the allocator's rounding
        auto* b = static_cast<unsigned char*>(buf);
        std::memset(b, kPoison, heap - 4096);
        RCHECK_OK(hpshmem::Barrier());
        std::vector<unsigned char> src(heap, 0x42);
        int to = (rank + 1) % n;
        // Runs past the end of the heap, for both single- and multi-threaded puts.
        for (int bd : {1, 4}) {
          hpshmem::Status s = hpshmem::ops::PutMem(b + 100, src.data(), heap, to, bd);
          RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
          RCHECK(s.message().find("not inside the symmetric heap") != std::string::npos, s.message());
          s = hpshmem::ops::GetMem(src.data(), b + 100, heap, to, bd);
          RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
        }
        for (int bad : {-1, n, 1000}) {
          hpshmem::Status s = hpshmem::ops::PutMem(b, src.data(), 10, bad, 1);
          RCHECK(s.code() == Code::kInvalidArgument && s.message().find("out of range") != std::string::npos,
                 s.ToString());
        }
        int stack[4];
        hpshmem::Status s = hpshmem::PutMem(stack, src.data(), sizeof stack, to);
        RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
        s = hpshmem::PutMem(b, nullptr, 16, to);
        RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
        RCHECK_OK(hpshmem::Barrier());
        for (size_t k = 0; k < heap - 4096; ++k) RCHECK(b[k] == kPoison, "byte " + std::to_string(k) + " was written");
        RCHECK(std::all_of(src.begin(), src.end(), [](unsigned char c) { return c == 0x42; }), "get wrote on failure");
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Rma, CopiesSplitAcrossBlockDimThreads) {
  // Large enough that block_dim threads really split the copy (2 MiB per thread at least),
  // with piece boundaries that fall on no round number. Under a sanitizer one size still splits
  // in 2, 3 and 4.
  auto r = RunJob(3, [](int rank, int n) {
    const std::vector<size_t> sizes =
        hptest::kSanitized ? std::vector<size_t>{(8 << 20) + 7} : std::vector<size_t>{(4 << 20) + 5, (13 << 20) + 7};
    const size_t slot = (14 << 20);
    void* buf;
    RCHECK_OK(hpshmem::Malloc(slot, &buf));
    auto* b = static_cast<unsigned char*>(buf);
    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    for (size_t sz : sizes) {
      for (int bd : {2, 3, 4}) {
        std::memset(b, kPoison, slot);
        RCHECK_OK(hpshmem::Barrier());
        auto data = Pattern(rank, sz, bd);
        RCHECK_OK(hpshmem::ops::PutMem(b + 1, data.data(), sz, to, bd));
        RCHECK_OK(hpshmem::Barrier());
        auto want = Pattern(from, sz, bd);
        RCHECK(b[0] == kPoison && std::memcmp(b + 1, want.data(), sz) == 0,
               "split put, block_dim " + std::to_string(bd));
        for (size_t k = sz + 1; k < slot; ++k) RCHECK(b[k] == kPoison, "split put wrote past the end");
        std::vector<unsigned char> local(sz + 2, kPoison);
        RCHECK_OK(hpshmem::ops::GetMem(local.data() + 1, b + 1, sz, to, bd));
        RCHECK(std::memcmp(local.data() + 1, data.data(), sz) == 0, "split get, block_dim " + std::to_string(bd));
        RCHECK(local[0] == kPoison && local[sz + 1] == kPoison, "split get wrote outside");
        RCHECK_OK(hpshmem::Barrier());
      }
    }
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// Copies past the streaming threshold (non-temporal stores) at unaligned
// offsets, whole and split over block_dim threads, land byte for byte and
// write nothing outside their range.
TEST(Rma, StreamingSizedCopiesAtOddOffsets) {
  // Past the streaming threshold (8 MiB at least); under a sanitizer the first size only.
  const size_t kBig[] = {(9u << 20) + 13, (20u << 20) + 1};
  const int kSizes = hptest::kSanitized ? 1 : 2;
  JobOptions opt;
  opt.heap_bytes = 96u << 20;
  auto r = RunJob(
      3,
      [&](int rank, int n) {
        const size_t slot = (20u << 20) + 4096;
        void* buf;
        RCHECK_OK(hpshmem::Malloc(slot * 2, &buf));
        auto* base = static_cast<unsigned char*>(buf);
        int to = (rank + 1) % n, from = (rank + n - 1) % n;
        for (int block_dim : {1, 2}) {
          std::memset(base, kPoison, slot * 2);
          RCHECK_OK(hpshmem::Barrier());
          for (int i = 0; i < kSizes; ++i) {
            auto data = Pattern(rank, kBig[i] + 3, block_dim);
            RCHECK_OK(hpshmem::ops::PutMem(base + slot * i + 5, data.data() + 3, kBig[i], to, block_dim));
          }
          RCHECK_OK(hpshmem::Barrier());
          for (int i = 0; i < kSizes; ++i) {
            auto want = Pattern(from, kBig[i] + 3, block_dim);
            unsigned char* got = base + slot * i;
            RCHECK(std::memcmp(got + 5, want.data() + 3, kBig[i]) == 0,
                   "streamed put, size " + std::to_string(kBig[i]));
            for (size_t k = 0; k < 5; ++k) RCHECK(got[k] == kPoison, "streamed put wrote before its range");
            for (size_t k = 5 + kBig[i]; k < slot; ++k) RCHECK(got[k] == kPoison, "streamed put wrote past its end");
            std::vector<unsigned char> local(kBig[i] + 64, kPoison);
            RCHECK_OK(hpshmem::ops::GetMem(local.data() + 7, base + slot * i + 5, kBig[i], to, block_dim));
            auto mine = Pattern(rank, kBig[i] + 3, block_dim);  // what `to` received came from this rank
            RCHECK(std::memcmp(local.data() + 7, mine.data() + 3, kBig[i]) == 0, "streamed get");
            for (size_t k = 0; k < 7; ++k) RCHECK(local[k] == kPoison, "streamed get wrote before its range");
            for (size_t k = 7 + kBig[i]; k < local.size(); ++k) RCHECK(local[k] == kPoison, "streamed get wrote past");
          }
          RCHECK_OK(hpshmem::Barrier());
        }
        RCHECK_OK(hpshmem::Free(buf));
      },
      opt);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// PutMemNbi: the source is reusable on return (overwritten at once here),
// puts to one rank land in order (the second of two to the same bytes wins),
// a signal sent after them is seen only with them, and Quiet plus a barrier
// completes the rest. Sizes around and past the transport's message piece.
TEST(Rma, NonBlockingPutsLandInOrderBeforeALaterSignal4Ranks) {
  auto r = RunJob(4, [](int rank, int n) {
    const size_t sizes[] = {0, 1, 13, 4099, 65537, (1 << 18) + 3};
    const size_t slot = (1 << 18) + 64;
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    void* buf;
    RCHECK_OK(hpshmem::Malloc(slot * nsizes * n + 64, &buf));
    auto* base = static_cast<unsigned char*>(buf);
    std::memset(base, kPoison, slot * nsizes * n);
    auto* sig = reinterpret_cast<int64_t*>(base + slot * nsizes * n);
    *sig = 0;
    RCHECK_OK(hpshmem::Barrier());
    // Slot (i, from): where rank `from` puts its piece of size i.
    auto at = [&](size_t i, int from) { return base + (i * n + from) * slot; };
    std::vector<unsigned char> src(slot);
    for (int k = 1; k < n; ++k) {
      int to = (rank + k) % n;
      for (size_t i = 0; i < nsizes; ++i) {
        auto first = Pattern(rank, sizes[i], 100 + to);
        std::copy(first.begin(), first.end(), src.begin());
        RCHECK_OK(hpshmem::PutMemNbi(at(i, rank), src.data(), sizes[i], to));
        std::memset(src.data(), 0x5A, sizes[i]);  // reused at once: the put must not see this
        auto second = Pattern(rank, sizes[i], to);
        std::copy(second.begin(), second.end(), src.begin());
        RCHECK_OK(hpshmem::PutMemNbi(at(i, rank), src.data(), sizes[i], to));
        std::memset(src.data(), 0x5A, sizes[i]);
      }
      // No quiet: the signal travels behind the puts.
      RCHECK_OK(hpshmem::Signal(sig, SignalType::kInt64, 1, SignalOp::kAdd, to));
    }
    RCHECK_OK(hpshmem::SignalWaitUntil(sig, SignalType::kInt64, Cmp::kEq, n - 1, nullptr));
    for (int from = 0; from < n; ++from) {
      if (from == rank) continue;
      for (size_t i = 0; i < nsizes; ++i) {
        auto want = Pattern(from, sizes[i], rank);
        unsigned char* got = at(i, from);
        RCHECK(want.empty() || std::memcmp(got, want.data(), want.size()) == 0,
               "put of " + std::to_string(sizes[i]) + " B from rank " + std::to_string(from));
        for (size_t b = sizes[i]; b < slot; ++b)
          RCHECK(got[b] == kPoison, "written past the end, size " + std::to_string(sizes[i]));
      }
    }
    // Without a signal: Quiet, then a barrier, completes them.
    RCHECK_OK(hpshmem::Barrier());
    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    auto data = Pattern(rank, 1009, 7);
    for (size_t b = 0; b < data.size(); ++b) RCHECK_OK(hpshmem::PutMemNbi(at(0, rank) + b, &data[b], 1, to));
    RCHECK_OK(hpshmem::Quiet());
    RCHECK_OK(hpshmem::Barrier());
    auto want = Pattern(from, 1009, 7);
    RCHECK(std::memcmp(at(0, from), want.data(), want.size()) == 0, "byte-wise puts after quiet");
    // Bad calls fail before sending anything.
    int stack[4];
    hpshmem::Status s = hpshmem::PutMemNbi(stack, data.data(), sizeof stack, to);
    RCHECK(s.code() == Code::kInvalidArgument && s.message().find("PutMemNbi") != std::string::npos, s.ToString());
    s = hpshmem::PutMemNbi(at(1, rank), nullptr, 16, to);
    RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
    s = hpshmem::PutMemNbi(at(1, rank), data.data(), 16, n);
    RCHECK(s.code() == Code::kInvalidArgument && s.message().find("out of range") != std::string::npos, s.ToString());
    RCHECK_OK(hpshmem::Quiet());
    RCHECK_OK(hpshmem::Barrier());
    // The 1-byte piece `from` put earlier is all there is in that slot.
    RCHECK(at(1, from)[0] == Pattern(from, 1, rank)[0], "the 1-byte put");
    for (size_t b = 1; b < slot; ++b)
      RCHECK(at(1, from)[b] == kPoison, "a refused put wrote byte " + std::to_string(b));
    RCHECK_OK(hpshmem::Free(buf));
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// The barrier lets nobody out before every rank has arrived with its writes
// complete: each round every rank puts the round's number into its word at
// every peer (non-blocking; the barrier completes them), one rank comes late
// now and then, and after the barrier every word must hold this round. Words
// alternate by round parity, so a rank already in the next round cannot spoil
// the check. Odd counts split unevenly over the hosts of the hosts layout
// (which then meet one rank per host).
namespace {
void BarrierRounds(int rank, int n) {
  void* p;
  RCHECK_OK(hpshmem::Calloc(2 * n, sizeof(int64_t), &p));
  auto* words = static_cast<int64_t*>(p);
  RCHECK_OK(hpshmem::Barrier());
  for (int64_t round = 1; round <= 400; ++round) {
    if (round % 37 == 0 && rank == (round / 37) % n) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    int64_t* mine = words + (round & 1) * n + rank;
    for (int k = 1; k < n; ++k) RCHECK_OK(hpshmem::PutMemNbi(mine, &round, sizeof round, (rank + k) % n));
    RCHECK_OK(hpshmem::Barrier());
    for (int q = 0; q < n; ++q) {
      int64_t got = std::atomic_ref<int64_t>(words[(round & 1) * n + q]).load(std::memory_order_acquire);
      RCHECK(q == rank || got == round, "round " + std::to_string(round) + ": rank " + std::to_string(q) +
                                            "'s word holds " + std::to_string(got) + " after the barrier");
    }
  }
  RCHECK_OK(hpshmem::Barrier());
  RCHECK_OK(hpshmem::Free(p));
}
}  // namespace

TEST(Rma, BarrierHoldsEveryRankAndCompletesItsPuts4Ranks) {
  auto r = RunJob(4, BarrierRounds);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Rma, BarrierHoldsEveryRankAndCompletesItsPuts5Ranks) {
  auto r = RunJob(5, BarrierRounds);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}
