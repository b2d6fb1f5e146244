#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "multirank.h"

using hpshmem::Code;
using hptest::JobOptions;
using hptest::RunJob;

namespace {

size_t RssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace

TEST(Heap, SameOffsetsOnEveryRankAndPtrTranslates) {
  auto r = RunJob(4, [](int rank, int n) {
    void* table;
    RCHECK_OK(hpshmem::Calloc(64 * n, sizeof(uint64_t), &table));
    const size_t sizes[] = {0, 1, 7, 4097, (1 << 20) + 3, 64, 12345};
    const size_t aligns[] = {64, 4096, 256, 1 << 16, 128, 64, 8192};
    uint64_t mine[7];
    for (int i = 0; i < 7; ++i) {
      void* p;
      RCHECK_OK(hpshmem::AlignedAlloc(aligns[i], sizes[i], &p));
      RCHECK(reinterpret_cast<uintptr_t>(p) % aligns[i] == 0, "alignment");
      RCHECK(hpshmem::Ptr(p, rank) == p, "Ptr(p, me) == p");
      RCHECK(hpshmem::IsSymmetric(p, sizes[i]), "IsSymmetric");
      // The peer's copy is at the same distance from the peer's heap base.
      mine[i] = static_cast<char*>(p) - static_cast<char*>(hpshmem::Ptr(table, rank));
    }
    // Everyone writes its offsets into rank 0's table, row = rank.
    RCHECK_OK(hpshmem::PutMem(static_cast<uint64_t*>(table) + 64 * rank, mine, sizeof mine, 0));
    RCHECK_OK(hpshmem::Barrier());
    if (rank == 0) {
      auto* t = static_cast<uint64_t*>(table);
      for (int p = 1; p < n; ++p)
        for (int i = 0; i < 7; ++i)
          RCHECK(t[64 * p + i] == t[i], "rank " + std::to_string(p) + " allocation " + std::to_string(i) + " differs");
    }
    int x;
    RCHECK(!hpshmem::IsSymmetric(&x, sizeof x), "stack is not symmetric");
    RCHECK(hpshmem::Ptr(&x, 0) == nullptr, "Ptr of a non-heap address");
    RCHECK(hpshmem::Ptr(table, n) == nullptr && hpshmem::Ptr(table, -1) == nullptr, "Ptr of a bad rank");
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Heap, AllocationMismatchIsReportedOnEveryRank) {
  auto r = RunJob(3, [](int rank, int n) {
    void* p;
    hpshmem::Status s = hpshmem::Malloc(rank == 2 ? 200 : 100, &p);
    RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
    RCHECK(s.message().find("malloc(200 bytes") != std::string::npos, s.message());
    RCHECK(p == nullptr, "no pointer on failure");
    // A matching call afterwards works and lands at the same offset everywhere.
    RCHECK_OK(hpshmem::Malloc(100, &p));
    void* q;
    s = hpshmem::Malloc(rank == 0 ? 64 : 64, &q);  // matching again
    RCHECK_OK(s);
    // Order mismatch: rank 1 frees before allocating.
    if (rank == 1)
      s = hpshmem::Free(q);
    else
      s = hpshmem::Malloc(64, &p);
    RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Heap, ExhaustionSaysWhatIsLiveAndNamesTheVariable) {
  JobOptions o;
  o.heap_bytes = 1 << 20;
  auto r = RunJob(
      2,
      [](int, int) {
        void *a, *b;
        RCHECK_OK(hpshmem::Malloc(600 << 10, &a));
        hpshmem::Status s = hpshmem::Malloc(600 << 10, &b);
        RCHECK(s.code() == Code::kOutOfMemory, s.ToString());
        RCHECK(s.message().find("614400 of 1048576 bytes live") != std::string::npos, s.message());
        RCHECK(s.message().find("SYMMETRIC_MEMORY_HEAP_SIZE") != std::string::npos, s.message());
        RCHECK_OK(hpshmem::Free(a));
        RCHECK_OK(hpshmem::Malloc(600 << 10, &b));  // room again
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Heap, DoubleFreeAndForeignPointerFailOnEveryRank) {
  auto r = RunJob(3, [](int rank, int) {
    void* p;
    RCHECK_OK(hpshmem::Malloc(1000, &p));
    RCHECK_OK(hpshmem::Free(p));
    hpshmem::Status s = hpshmem::Free(p);
    RCHECK(s.code() == Code::kInvalidFree, s.ToString());
    int x;
    s = hpshmem::Free(&x);
    RCHECK(s.code() == Code::kInvalidFree, s.ToString());
    RCHECK(s.message().find("not in the symmetric heap") != std::string::npos, s.message());
    // Only rank 1 frees garbage: the others see a mismatch instead of hanging.
    RCHECK_OK(hpshmem::Malloc(64, &p));
    s = hpshmem::Free(rank == 1 ? static_cast<char*>(p) + 64 : p);
    RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// A deferred free keeps its bytes out of the heap until every rank released
// them, and the ranks reclaim alike even though they release at different times.
TEST(Heap, DeferredFreeIsReusedOnlyAfterEveryRankReleasedIt) {
  auto r = RunJob(3, [](int rank, int) {
    void *a, *b, *c;
    RCHECK_OK(hpshmem::Malloc(1000, &a));
    uint64_t token = 0;
    RCHECK_OK(hpshmem::FreeDeferred(a, &token));
    RCHECK(token != 0, "a slot");
    // Freed: a second free is a double free, on every rank.
    uint64_t t2 = 0;
    hpshmem::Status s = hpshmem::FreeDeferred(a, &t2);
    RCHECK(s.code() == Code::kInvalidFree, s.ToString());
    RCHECK(s.message().find("double free") != std::string::npos, s.message());
    // Held (by every rank): a new block of the same size lands elsewhere.
    RCHECK_OK(hpshmem::Malloc(1000, &b));
    RCHECK(b != a, "held bytes were handed out again");
    std::string st = hpshmem::DebugState();
    RCHECK(st.find("\"freed_pending\": 1") != std::string::npos, st);
    // Only rank 1 still holds it: still not reused anywhere.
    if (rank != 1) hpshmem::ReleaseDeferred(token);
    RCHECK_OK(hpshmem::Malloc(1000, &c));
    RCHECK(c != a, "reused while rank 1 still holds it");
    RCHECK_OK(hpshmem::Free(c));
    if (rank == 1) hpshmem::ReleaseDeferred(token);
    hpshmem::ReleaseDeferred(token);  // twice, and a stale token: harmless
    hpshmem::ReleaseDeferred(token ^ (uint64_t{1} << 40));
    RCHECK_OK(hpshmem::Malloc(1000, &c));  // this call reclaims it, then allocates
    RCHECK(c == a, "the released block is reused");
    st = hpshmem::DebugState();
    RCHECK(st.find("\"freed_pending\": 0") != std::string::npos, st);
    RCHECK_OK(hpshmem::Free(b));
    RCHECK_OK(hpshmem::Free(c));
    // Mixing the two kinds of free across ranks is a mismatch on every rank.
    RCHECK_OK(hpshmem::Malloc(64, &a));
    s = rank == 2 ? hpshmem::Free(a) : hpshmem::FreeDeferred(a, &token);
    RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// More deferred frees than slots: the extra ones stay out of the heap (never
// aliased), the slotted ones are still reclaimed, and nothing diverges.
TEST(Heap, DeferredFreesBeyondTheSlotsStayRetired) {
  auto r = RunJob(2, [](int, int) {
    std::vector<void*> blocks(70);
    std::vector<uint64_t> tokens(70);
    for (auto& p : blocks) RCHECK_OK(hpshmem::Malloc(128, &p));
    for (int i = 0; i < 70; ++i) RCHECK_OK(hpshmem::FreeDeferred(blocks[i], &tokens[i]));
    for (int i = 0; i < 70; ++i) RCHECK((tokens[i] != 0) == (i < 64), "slot of free " + std::to_string(i));
    for (uint64_t t : tokens) hpshmem::ReleaseDeferred(t);
    void* p;
    RCHECK_OK(hpshmem::Malloc(128, &p));
    RCHECK(p == blocks[0], "the first reclaimed block comes back first");
    for (int i = 64; i < 70; ++i) RCHECK(p != blocks[i], "an unslotted block was reused");
    std::string st = hpshmem::DebugState();
    RCHECK(st.find("\"freed_pending\": 6") != std::string::npos, st);
    RCHECK_OK(hpshmem::Free(p));
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Heap, CallocZeroesReusedMemory) {
  auto r = RunJob(2, [](int, int) {
    void* p;
    RCHECK_OK(hpshmem::Malloc(4096, &p));
    std::memset(p, 0xAB, 4096);
    RCHECK_OK(hpshmem::Free(p));
    void* q;
    RCHECK_OK(hpshmem::Calloc(1021, 4, &q));
    RCHECK(q == p, "reuses the freed block");
    for (int i = 0; i < 1021 * 4; ++i) RCHECK(static_cast<unsigned char*>(q)[i] == 0, "byte " + std::to_string(i));
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Heap, PagesAreTouchedOnlyWhenUsed) {
  JobOptions o;
  o.heap_bytes = size_t{1} << 30;
  auto r = RunJob(
      2,
      [](int rank, int) {
        size_t before = RssBytes();
        void* p;
        RCHECK_OK(hpshmem::Malloc(size_t{512} << 20, &p));
        size_t after_alloc = RssBytes();
        RCHECK(after_alloc < before + (32 << 20), "a 512 MiB allocation must not touch its pages: RSS grew by " +
                                                      std::to_string((after_alloc - before) >> 20) + " MiB");
        std::memset(p, 1, 64 << 20);
        size_t after_touch = RssBytes();
        RCHECK(after_touch >= after_alloc + (60 << 20), "touching 64 MiB must show in RSS (the check itself works)");
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Heap, DebugStateReportsConfigAndLiveAllocations) {
  auto r = RunJob(2, [](int, int) {
    void *a, *b;
    RCHECK_OK(hpshmem::Malloc(1000, &a));
    RCHECK_OK(hpshmem::Malloc(3000, &b));
    RCHECK_OK(hpshmem::Free(a));
    std::string s = hpshmem::DebugState();
    RCHECK(s.find("\"bytes_live\": 3008") != std::string::npos, s);
    RCHECK(s.find("\"bytes_peak\": 4032") != std::string::npos, s);
    RCHECK(s.find("\"heap_bytes\": 67108864") != std::string::npos, s);
    RCHECK(s.find("\"bytes\": 3008") != std::string::npos, s);
    hpshmem::RuntimeInfo info;
    RCHECK_OK(hpshmem::GetRuntimeInfo(&info));
    RCHECK(info.allocations_live == 1 && info.bytes_live == 3008, "info");
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
  EXPECT_EQ(hpshmem::DebugState(), "{\"initialized\": false}");
}

TEST(Heap, CollectiveWorkspaceIsSymmetricZeroedAndApartFromUserMemory) {
  auto r = RunJob(3, [](int rank, int n) {
    void* ws;
    RCHECK_OK(hpshmem::CollectiveWorkspace(&ws));
    auto* w = static_cast<int64_t*>(ws);
    RCHECK(hpshmem::IsSymmetric(ws, hpshmem::kWorkspaceBytes), "workspace is symmetric");
    for (size_t i = 0; i < hpshmem::kWorkspaceBytes / 8; ++i) RCHECK(w[i] == 0, "zero at init");
    void* p;
    RCHECK_OK(hpshmem::Malloc(1 << 20, &p));
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(ws);
    RCHECK(a >= b + hpshmem::kWorkspaceBytes || a + (1 << 20) <= b, "user memory overlaps the workspace");
    // Signals into the workspace reach the same word on the peer.
    RCHECK_OK(
        hpshmem::Signal(w + rank, hpshmem::SignalType::kInt64, rank + 100, hpshmem::SignalOp::kSet, (rank + 1) % n));
    RCHECK_OK(hpshmem::Barrier());
    int from = (rank + n - 1) % n;
    RCHECK(w[from] == from + 100, "signal landed at the wrong place");
    for (int i = 0; i < n; ++i) RCHECK(i == from || w[i] == 0, "stray write in the workspace");
    hpshmem::RuntimeInfo info;
    RCHECK_OK(hpshmem::GetRuntimeInfo(&info));
    RCHECK(info.bytes_live == (1 << 20), "the workspace is not user memory");
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}
