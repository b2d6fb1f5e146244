#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "config.h"
#include "net.h"

using hpshmem::Code;

TEST(ParseByteSize, Suffixes) {
  size_t v;
  struct { const char* in; size_t out; } ok[] = {
      {"0", 0}, {"4096", 4096}, {"64k", 64 << 10}, {"64K", 64 << 10}, {"512m", size_t{512} << 20},
      {"1g", size_t{1} << 30}, {"2GiB", size_t{2} << 30}, {" 3 MB ", size_t{3} << 20}, {"7b", 7}};
  for (auto& c : ok) {
    ASSERT_TRUE(hpshmem::ParseByteSize(c.in, "X", &v).ok()) << c.in;
    EXPECT_EQ(v, c.out) << c.in;
  }
  for (const char* bad : {"", "g", "-1", "1.5g", "12q", "1gg", "99999999999999999999", "17179869184t"}) {
    hpshmem::Status s = hpshmem::ParseByteSize(bad, "SYMMETRIC_MEMORY_HEAP_SIZE", &v);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("SYMMETRIC_MEMORY_HEAP_SIZE"), std::string::npos);
  }
}

TEST(Config, EnvironmentAndOverrides) {
  setenv("SYMMETRIC_MEMORY_HEAP_SIZE", "3m", 1);
  setenv("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "7.5", 1);
  setenv("HYPER_PARALLEL_SHMEM_BLOCK_DIM", "4", 1);
  hpshmem::Config c;
  ASSERT_TRUE(hpshmem::Config::Build({}, &c).ok());
  EXPECT_EQ(c.heap_bytes, size_t{3} << 20);
  EXPECT_EQ(c.timeout_sec, 7.5);
  EXPECT_EQ(c.block_dim, 4);
  hpshmem::InitAttr attr;
  attr.heap_bytes = 8192;
  attr.block_dim = 2;
  ASSERT_TRUE(hpshmem::Config::Build(attr, &c).ok());
  EXPECT_EQ(c.heap_bytes, 8192u);
  EXPECT_EQ(c.block_dim, 2);
  setenv("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "soon", 1);
  hpshmem::Status s = hpshmem::Config::Build({}, &c);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"), std::string::npos);
  // The range: (0, 1e9] seconds or inf (forever). Past it nothing overflows
  // into an instant timeout: it is refused, naming the variable.
  for (const char* bad : {"0", "-1", "nan", "1e10", "1e400", "-inf", "1e9x"}) {
    setenv("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", bad, 1);
    s = hpshmem::Config::Build({}, &c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"), std::string::npos) << bad;
  }
  for (const char* good : {"1e9", "inf", "Infinity", "0.001"}) {
    setenv("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", good, 1);
    EXPECT_TRUE(hpshmem::Config::Build({}, &c).ok()) << good;
    EXPECT_EQ(c.timeout_sec, std::strtod(good, nullptr)) << good;
  }
  unsetenv("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC");
  hpshmem::InitAttr huge;
  huge.timeout_sec = 1e10;
  EXPECT_EQ(hpshmem::Config::Build(huge, &c).code(), Code::kInvalidArgument);
  huge.timeout_sec = -2;
  EXPECT_EQ(hpshmem::Config::Build(huge, &c).code(), Code::kInvalidArgument);
  setenv("HYPER_PARALLEL_SHMEM_BLOCK_DIM", "0", 1);
  EXPECT_EQ(hpshmem::Config::Build({}, &c).code(), Code::kInvalidArgument);
  unsetenv("HYPER_PARALLEL_SHMEM_BLOCK_DIM");
  setenv("SYMMETRIC_MEMORY_HEAP_SIZE", "100", 1);
  EXPECT_EQ(hpshmem::Config::Build({}, &c).code(), Code::kInvalidArgument);  // below the minimum
  unsetenv("SYMMETRIC_MEMORY_HEAP_SIZE");
}

TEST(Deadline, ForeverAndTheLongestFiniteDoNotExpireOrOverflow) {
  for (double sec : {1e9, std::numeric_limits<double>::infinity(), 1e300}) {
    hpshmem::Deadline d(sec);
    EXPECT_FALSE(d.Expired()) << sec;
    EXPECT_EQ(d.RemainingMs(50), 50) << sec;
  }
  EXPECT_TRUE(hpshmem::Deadline(0).Expired());
  EXPECT_TRUE(hpshmem::Deadline(std::nan("")).Expired());
  hpshmem::Deadline soon(0.05);
  EXPECT_FALSE(soon.Expired());
  EXPECT_LE(soon.RemainingMs(), 50);
}

TEST(ParseEndpoint, Forms) {
  std::string h;
  int p;
  ASSERT_TRUE(hpshmem::ParseEndpoint("tcp://127.0.0.1:8662", &h, &p).ok());
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 8662);
  ASSERT_TRUE(hpshmem::ParseEndpoint("tcp://[::1]:9", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  for (const char* bad : {"127.0.0.1:1", "tcp://host", "tcp://:80", "tcp://h:0", "tcp://h:70000", "tcp://h:8a"})
    EXPECT_EQ(hpshmem::ParseEndpoint(bad, &h, &p).code(), Code::kInvalidArgument) << bad;
}
