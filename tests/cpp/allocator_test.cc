#include <gtest/gtest.h>

#include <random>
#include <set>

#include "allocator.h"

using hpshmem::Code;
using hpshmem::OffsetAllocator;

TEST(OffsetAllocator, AlignsAndDoesNotOverlap) {
  OffsetAllocator a(1 << 20);
  std::vector<std::pair<size_t, size_t>> got;
  const size_t sizes[] = {0, 1, 7, 64, 65, 4097, 12345};
  const size_t aligns[] = {1, 64, 128, 4096};
  for (size_t s : sizes)
    for (size_t al : aligns) {
      size_t off;
      ASSERT_TRUE(a.Allocate(s, al, &off).ok());
      EXPECT_EQ(off % std::max<size_t>(al, 64), 0u) << s << " " << al;
      got.push_back({off, std::max<size_t>(s, 1)});
    }
  std::sort(got.begin(), got.end());
  for (size_t i = 1; i < got.size(); ++i) EXPECT_LE(got[i - 1].first + got[i - 1].second, got[i].first);
}

TEST(OffsetAllocator, ExhaustionThenReuseAfterCoalescing) {
  OffsetAllocator a(64 * 1024);
  std::vector<size_t> offs;
  size_t off;
  while (a.Allocate(1000, 64, &off).ok()) offs.push_back(off);
  EXPECT_EQ(offs.size(), 64u);  // 1000 rounds up to 1024
  hpshmem::Status s = a.Allocate(1000, 64, &off);
  EXPECT_EQ(s.code(), Code::kOutOfMemory);
  // Free every other block: no 2 KiB hole until neighbours coalesce.
  for (size_t i = 0; i < offs.size(); i += 2) ASSERT_TRUE(a.Release(offs[i]).ok());
  EXPECT_EQ(a.Allocate(2048, 64, &off).code(), Code::kOutOfMemory);
  ASSERT_TRUE(a.Release(offs[1]).ok());
  ASSERT_TRUE(a.Allocate(3 * 1024, 64, &off).ok());
  EXPECT_EQ(off, offs[0]);
  EXPECT_EQ(a.largest_free(), 1024u);
}

TEST(OffsetAllocator, InvalidFrees) {
  OffsetAllocator a(1 << 16);
  size_t off;
  ASSERT_TRUE(a.Allocate(100, 64, &off).ok());
  EXPECT_EQ(a.Release(off + 64).code(), Code::kInvalidFree);
  ASSERT_TRUE(a.Release(off).ok());
  EXPECT_EQ(a.Release(off).code(), Code::kInvalidFree);
  EXPECT_EQ(a.bytes_live(), 0u);
}

TEST(OffsetAllocator, RandomSequenceIsDeterministicAndConsistent) {
  // Two allocators fed the same sequence give the same offsets (the
  // property the symmetric heap rests on), and live bytes add up.
  OffsetAllocator a(1 << 22), b(1 << 22);
  std::mt19937_64 rng(42);
  std::vector<size_t> live;
  size_t expect_live = 0;
  for (int i = 0; i < 5000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t k = rng() % live.size();
      expect_live -= a.LiveSize(live[k]);
      ASSERT_TRUE(a.Release(live[k]).ok());
      ASSERT_TRUE(b.Release(live[k]).ok());
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      size_t sz = rng() % 20000, al = size_t{1} << (rng() % 13);
      size_t oa, ob;
      hpshmem::Status sa = a.Allocate(sz, al, &oa), sb = b.Allocate(sz, al, &ob);
      ASSERT_EQ(sa.code(), sb.code());
      if (!sa.ok()) continue;
      ASSERT_EQ(oa, ob);
      live.push_back(oa);
      expect_live += a.LiveSize(oa);
    }
    ASSERT_EQ(a.bytes_live(), expect_live);
  }
}
