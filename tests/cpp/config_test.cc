#include <gtest/gtest.h>

#include <sched.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "config.h"
#include "wait.h"
#include "net.h"

using hpshmem::Code;

TEST(ParseByteSize, Suffixes) {
  size_t v;
  struct {
    const char* in;
    size_t out;
  } ok[] = {{"0", 0},
            {"4096", 4096},
            {"64k", 64 << 10},
            {"64K", 64 << 10},
            {"512m", size_t{512} << 20},
            {"1g", size_t{1} << 30},
            {"2GiB", size_t{2} << 30},
            {" 3 MB ", size_t{3} << 20},
            {"7b", 7}};
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

// The silence after which a peer on another host is lost: [1, 1e6] s, or 0
// (never); anything else is refused naming the variable.
TEST(Config, PeerTimeout) {
  hpshmem::Config c;
  ASSERT_TRUE(hpshmem::Config::Build({}, &c).ok());
  EXPECT_EQ(c.peer_timeout_sec, 10.0);
  for (const char* good : {"0", "1", "2.5", "1e6"}) {
    setenv("HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC", good, 1);
    ASSERT_TRUE(hpshmem::Config::Build({}, &c).ok()) << good;
    EXPECT_EQ(c.peer_timeout_sec, std::strtod(good, nullptr)) << good;
  }
  for (const char* bad : {"-1", "0.5", "nan", "inf", "1e7", "3s"}) {
    setenv("HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC", bad, 1);
    hpshmem::Status s = hpshmem::Config::Build({}, &c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC='"), std::string::npos) << bad;
  }
  unsetenv("HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC");
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

TEST(Config, WaitModes) {
  hpshmem::Config c;
  using Mode = hpshmem::Config::WaitMode;
  const std::pair<const char*, Mode> modes[] = {{"auto", Mode::kAuto},
                                                {"SPIN", Mode::kSpin},
                                                {"yield", Mode::kYield},
                                                {"5,100", Mode::kCustom},
                                                {"0,0", Mode::kCustom}};
  for (auto [text, mode] : modes) {
    setenv("HYPER_PARALLEL_SHMEM_WAIT", text, 1);
    ASSERT_TRUE(hpshmem::Config::Build({}, &c).ok()) << text;
    EXPECT_EQ(c.wait_mode, mode) << text;
  }
  setenv("HYPER_PARALLEL_SHMEM_WAIT", "2.5,300", 1);
  ASSERT_TRUE(hpshmem::Config::Build({}, &c).ok());
  EXPECT_EQ(c.wait_spin_us, 2.5);
  EXPECT_EQ(c.wait_yield_us, 300);
  for (const char* bad : {"fast", "5", "5,", ",5", "-1,5", "5,-1", "2e6,0", "nan,1", "1,2,3", "5;100"}) {
    setenv("HYPER_PARALLEL_SHMEM_WAIT", bad, 1);
    hpshmem::Status s = hpshmem::Config::Build({}, &c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("HYPER_PARALLEL_SHMEM_WAIT"), std::string::npos) << bad;
  }
  unsetenv("HYPER_PARALLEL_SHMEM_WAIT");
}

TEST(WaitPolicy, ChosenByCpusAndTheRanksSharingThem) {
  hpshmem::WaitPolicy own = hpshmem::ChooseWaitPolicy("auto", 0, 0, 2, 2);
  EXPECT_EQ(own.mode, "spin");
  EXPECT_FALSE(own.oversubscribed);
  EXPECT_GT(own.spin_ns, 0);
  hpshmem::WaitPolicy shared = hpshmem::ChooseWaitPolicy("auto", 0, 0, 2, 4);
  EXPECT_EQ(shared.mode, "yield");
  EXPECT_TRUE(shared.oversubscribed);
  EXPECT_EQ(shared.spin_ns, 0);
  EXPECT_GT(shared.yield_ns, 0);
  EXPECT_EQ(hpshmem::ChooseWaitPolicy("spin", 0, 0, 1, 8).mode, "spin");  // forced: kept, still reported
  EXPECT_TRUE(hpshmem::ChooseWaitPolicy("spin", 0, 0, 1, 8).oversubscribed);
  hpshmem::WaitPolicy custom = hpshmem::ChooseWaitPolicy("custom", 2.5, 300, 4, 1);
  EXPECT_EQ(custom.spin_ns, 2500);
  EXPECT_EQ(custom.yield_ns, 300000);
  // The affinity mask counts: pinned to one CPU, this process has one.
  cpu_set_t saved, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &saved)) ++first;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  uint64_t mask[16];
  int pinned = hpshmem::UsableCpus(mask);
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(pinned, 1);
  EXPECT_EQ(mask[first / 64], uint64_t{1} << (first % 64));
  int all = hpshmem::UsableCpus(mask);
  EXPECT_GE(all, 1);
  EXPECT_LE(all, CPU_COUNT(&saved));
}
