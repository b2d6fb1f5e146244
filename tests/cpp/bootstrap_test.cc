#include <gtest/gtest.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bootstrap.h"
#include "multirank.h"
#include "net.h"

using hpshmem::Code;
using hptest::JobOptions;
using hptest::RunJob;

namespace {

// True when the other side closes `fd` within `sec` seconds.
bool ClosedByPeer(int fd, double sec) {
  hpshmem::Deadline dl(sec);
  char buf[256];
  while (!dl.Expired()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, dl.RemainingMs()) <= 0) return false;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;  // EOF or reset
  }
  return false;
}

int FreePort() {
  hpshmem::Fd fd;
  int port = 0;
  EXPECT_TRUE(hpshmem::ListenTcp("127.0.0.1", 0, &fd, &port).ok());
  return port;
}

// A job whose ranks call Init themselves, meeting at a fresh loopback endpoint.
JobOptions EndpointJob(std::vector<std::pair<std::string, std::string>> extra_env) {
  JobOptions o;
  o.init = false;
  o.env = {{"HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT", "tcp://127.0.0.1:" + std::to_string(FreePort())},
           {"SYMMETRIC_MEMORY_HEAP_SIZE", "1m"}};
  o.env.insert(o.env.end(), extra_env.begin(), extra_env.end());
  return o;
}

// Init from the environment alone, as rank `rank` of `nranks`.
hpshmem::Status InitFromEnv(int rank, int nranks) {
  hpshmem::InitAttr a;
  a.rank = rank;
  a.nranks = nranks;
  return hpshmem::Init(a);
}

}  // namespace

TEST(Bootstrap, StrangersAreRefusedAndTheJobGoesOn) {
  bool garbage_closed = false, impostor_closed = false, silent_closed = false;
  JobOptions o;
  o.on_unique_id = [&](const hpshmem::UniqueId& uid) {
    hpshmem::UniqueIdFields f;
    ASSERT_TRUE(hpshmem::DecodeUniqueId(uid, &f).ok());
    hpshmem::Deadline dl(5);
    hpshmem::Fd garbage, impostor, silent;
    ASSERT_TRUE(hpshmem::ConnectTcp(f.host, f.port, dl, &garbage).ok());
    ASSERT_TRUE(hpshmem::ConnectTcp(f.host, f.port, dl, &impostor).ok());
    ASSERT_TRUE(hpshmem::ConnectTcp(f.host, f.port, dl, &silent).ok());
    char junk[200];
    memset(junk, 0x5a, sizeof junk);
    ASSERT_EQ(send(garbage.get(), junk, sizeof junk, MSG_NOSIGNAL), (ssize_t)sizeof junk);
    // A well-formed hello for rank 1 of this job, but without the secret.
    char challenge[24];
    ASSERT_TRUE(hpshmem::RecvAll(impostor.get(), challenge, sizeof challenge, dl, "root").ok());
#pragma pack(push, 1)
    struct {
      uint32_t magic;
      uint16_t version, reserved;
      int32_t rank, nranks;
      uint64_t job;
      uint8_t nonce[16];
      uint64_t mac;
    } hello{0x31485048, 1, 0, 1, 3, f.job_id, {}, 0x1234};
#pragma pack(pop)
    ASSERT_TRUE(hpshmem::SendAll(impostor.get(), &hello, sizeof hello, dl, "root").ok());
    impostor_closed = ClosedByPeer(impostor.get(), 5);
    garbage_closed = ClosedByPeer(garbage.get(), 5);
    silent_closed = ClosedByPeer(silent.get(), 10);  // dropped after the 5 s handshake limit
  };
  auto r = RunJob(
      3,
      [](int rank, int n) {
        RCHECK(hpshmem::NPes() == 3, "world size");
        RCHECK_OK(hpshmem::Barrier());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
  EXPECT_TRUE(garbage_closed);
  EXPECT_TRUE(impostor_closed);
  EXPECT_TRUE(silent_closed);
}

// A flood of silent connections: the listener holds at most 64 handshakes,
// dropping the oldest (the longest silent) to make room, so the flood costs
// neither unbounded descriptors nor the ranks their place. Without the cap all
// of them would stay open until the 5 s handshake limit.
TEST(Bootstrap, SilentFloodIsCappedAtSixtyFourHandshakes) {
  constexpr int kFlood = 150, kCap = 64;
  std::vector<int> state(kFlood, -1);  // 1: dropped by the listener, 0: still held
  JobOptions o;
  o.on_unique_id = [&](const hpshmem::UniqueId& uid) {
    hpshmem::UniqueIdFields f;
    ASSERT_TRUE(hpshmem::DecodeUniqueId(uid, &f).ok());
    std::vector<hpshmem::Fd> flood(kFlood);
    for (auto& fd : flood) {
      hpshmem::Deadline dl(5);
      ASSERT_TRUE(hpshmem::ConnectTcp(f.host, f.port, dl, &fd).ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // well inside the handshake limit
    for (int i = 0; i < kFlood; ++i) {
      char buf[64];
      ssize_t n;
      while ((n = recv(flood[i].get(), buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }  // the challenge
      state[i] = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ? 1 : 0;
    }
  };
  auto r = RunJob(3, [](int, int) { RCHECK_OK(hpshmem::Barrier()); }, o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
  for (int i = 0; i < kFlood; ++i)
    EXPECT_EQ(state[i], i < kFlood - kCap ? 1 : 0) << "connection " << i << " of the flood";
}

// Rank 0 runs out of file descriptors while the other ranks connect: accept
// fails with EMFILE while the listener stays readable. The listener must back
// off (not spin a core) and take the ranks once descriptors are free again.
TEST(Bootstrap, ListenerOutOfDescriptorsBacksOffAndTheJobGoesOn) {
  JobOptions o = EndpointJob({});
  auto r = RunJob(
      3,
      [](int rank, int n) {
        if (rank != 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));  // connect while rank 0 has no fds
          RCHECK_OK(InitFromEnv(rank, n));
        } else {
          std::atomic<double> cpu_share{-1};
          std::thread hog([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Init has bound its listener
            rlimit old{};
            getrlimit(RLIMIT_NOFILE, &old);
            rlimit low = old;
            low.rlim_cur = 256;
            setrlimit(RLIMIT_NOFILE, &low);
            std::vector<int> fds;
            for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fds.push_back(fd);
            double c0 = hptest::ProcessCpuSeconds();
            auto t0 = std::chrono::steady_clock::now();
            std::this_thread::sleep_for(std::chrono::milliseconds(1000));
            double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            cpu_share = (hptest::ProcessCpuSeconds() - c0) / wall;
            for (int fd : fds) close(fd);
            setrlimit(RLIMIT_NOFILE, &old);
          });
          hpshmem::Status s = InitFromEnv(rank, n);
          hog.join();
          RCHECK_OK(s);
          RCHECK(cpu_share.load() >= 0 && cpu_share.load() < 0.3,
                 "the listener used " + std::to_string(cpu_share.load()) + " of a core while out of descriptors");
        }
        RCHECK_OK(hpshmem::Barrier());
        RCHECK_OK(hpshmem::Finalize());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Bootstrap, MissingRankFailsInitInsteadOfHanging) {
  JobOptions o;
  o.spawn = 2;  // rank 2 of 3 never starts
  o.timeout_sec = 2;
  o.on_init_status = [](int rank, const hpshmem::Status& s) {
    RCHECK(!s.ok(), "init must fail");
    if (rank == 0) {
      RCHECK(s.code() == Code::kTimeout, s.ToString());
      RCHECK(s.message().find("rank(s) 2 did not join") != std::string::npos, s.message());
    }
  };
  auto r = RunJob(3, [](int, int) { hptest::FailRank(__FILE__, __LINE__, "init succeeded"); }, o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
  EXPECT_LT(r.seconds, 30);
}

// A rank whose own start fails tells the job: every other rank fails within
// seconds naming it and its reason, not after the bootstrap timeout.
void ExpectStartFailureTold(int bad_rank) {
  JobOptions o;
  o.timeout_sec = 60;  // the bootstrap timeout this must not wait out
  o.before_init = [bad_rank](int rank, int) {
    if (rank == bad_rank) setenv("SYMMETRIC_MEMORY_HEAP_SIZE", "lots", 1);
  };
  o.on_init_status = [bad_rank](int rank, const hpshmem::Status& s) {
    RCHECK(!s.ok(), "init must fail");
    RCHECK(s.message().find("SYMMETRIC_MEMORY_HEAP_SIZE") != std::string::npos, s.message());
    if (rank != bad_rank) {
      RCHECK(s.code() == Code::kBootstrap, s.ToString());
      const std::string who = "rank " + std::to_string(bad_rank) + " failed to start";
      RCHECK(s.message().find(who) != std::string::npos, s.message());
    }
  };
  auto r = RunJob(3, [](int, int) { hptest::FailRank(__FILE__, __LINE__, "init succeeded"); }, o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
  EXPECT_LT(r.seconds, 20);
}

TEST(Bootstrap, ARankThatFailsToStartIsNamedByTheOthersAtOnce) { ExpectStartFailureTold(2); }

TEST(Bootstrap, ARootThatFailsToStartIsNamedByTheOthersAtOnce) { ExpectStartFailureTold(0); }

TEST(Bootstrap, EndpointWithSecret) {
  JobOptions o = EndpointJob({{"HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET", "correct horse"}});
  auto r = RunJob(
      3,
      [](int rank, int n) {
        RCHECK_OK(InitFromEnv(rank, n));
        RCHECK(hpshmem::DebugState().find("\"authenticated\": true") != std::string::npos, hpshmem::DebugState());
        RCHECK_OK(hpshmem::Barrier());
        RCHECK_OK(hpshmem::Finalize());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Bootstrap, EndpointWrongSecretIsRefused) {
  JobOptions o = EndpointJob({{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "3"}});
  auto r = RunJob(
      2,
      [](int rank, int n) {
        setenv("HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET", rank == 0 ? "right" : "wrong", 1);
        hpshmem::Status s = InitFromEnv(rank, n);
        RCHECK(!s.ok(), "a rank with the wrong secret must not join");
        if (rank == 1)
          RCHECK(s.code() == Code::kBootstrap && s.message().find("refused") != std::string::npos, s.ToString());
        if (rank == 0) RCHECK(s.code() == Code::kTimeout, s.ToString());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Bootstrap, EndpointWithoutSecretStillChecksWorldSize) {
  JobOptions o = EndpointJob({{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "3"}});
  auto r = RunJob(
      2,
      [](int rank, int n) {
        hpshmem::Status s = InitFromEnv(rank, rank == 1 ? 5 : 2);  // rank 1 believes in another world size
        RCHECK(!s.ok(), "mismatched world size must not join");
        if (rank == 1) RCHECK(s.code() == Code::kBootstrap, s.ToString());
      },
      o);
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Bootstrap, InitArgumentErrors) {
  hpshmem::InitAttr a;
  a.rank = 2;
  a.nranks = 2;
  EXPECT_EQ(hpshmem::Init(a).code(), Code::kInvalidArgument);
  a.rank = 0;
  a.nranks = 0;
  EXPECT_EQ(hpshmem::Init(a).code(), Code::kInvalidArgument);
  a.nranks = 1;
  unsetenv("HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT");
  hpshmem::Status s = hpshmem::Init(a);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT"), std::string::npos);
  EXPECT_FALSE(hpshmem::IsInitialized());
  void* p;
  EXPECT_EQ(hpshmem::Malloc(8, &p).code(), Code::kNotInitialized);
  EXPECT_EQ(hpshmem::Barrier().code(), Code::kNotInitialized);
}

TEST(Bootstrap, AllgatherAndBarrierOfSmallBlobs) {
  auto r = RunJob(4, [](int rank, int n) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{13}, size_t{4099}}) {
      std::vector<unsigned char> mine(bytes), all(bytes * n, 0xEE);
      for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<unsigned char>(rank * 31 + i);
      RCHECK_OK(hpshmem::BootstrapAllgather(mine.data(), bytes, all.data()));
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < bytes; ++i)
          RCHECK(all[p * bytes + i] == static_cast<unsigned char>(p * 31 + i), "blob from rank " + std::to_string(p));
      RCHECK_OK(hpshmem::BootstrapBarrier());
    }
    // Ranks that disagree on the size fail on every rank rather than misreading.
    std::vector<unsigned char> mine(8 + (rank == 2)), all(9 * n);
    hpshmem::Status s = hpshmem::BootstrapAllgather(mine.data(), mine.size(), all.data());
    RCHECK(s.code() == Code::kCollectiveMismatch, s.ToString());
    s = hpshmem::BootstrapAllgather(mine.data(), (2 << 20), all.data());
    RCHECK(s.code() == Code::kInvalidArgument, s.ToString());
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

TEST(Bootstrap, LoopbackIdFromAnotherMachineFailsAtOnce) {
  // Rank 0 "ran elsewhere" (another machine hash) yet advertised 127.0.0.1: a rank here must
  // not dial its own loopback and wait out the timeout.
  hpshmem::UniqueIdFields f;
  f.host = "127.0.0.1";
  f.port = 9;
  f.job_id = 42;
  f.root_machine = hpshmem::MachineHash() + 1;
  hpshmem::UniqueId id;
  hpshmem::EncodeUniqueId(f, &id);
  hpshmem::InitAttr a;
  a.rank = 1;
  a.nranks = 2;
  a.unique_id = &id;
  a.timeout_sec = 30;
  auto t0 = std::chrono::steady_clock::now();
  hpshmem::Status s = hpshmem::Init(a);
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.code(), Code::kBootstrap) << s.ToString();
  EXPECT_NE(s.message().find("HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST"), std::string::npos) << s.message();
  EXPECT_LT(dt, 1.0);
  EXPECT_FALSE(hpshmem::IsInitialized());
}

TEST(Bootstrap, AdvertisedAddressFollowsTheRouteToTheRendezvousHost) {
  std::string a;
  ASSERT_TRUE(hpshmem::LocalAddressToward("127.0.0.1", &a).ok());
  EXPECT_EQ(a, "127.0.0.1");
  ASSERT_TRUE(hpshmem::LocalAddressToward("localhost", &a).ok());
  EXPECT_TRUE(hpshmem::IsLoopbackHost(a)) << a;
  EXPECT_EQ(hpshmem::LocalAddressToward("no-such-host.invalid", &a).code(), Code::kInvalidArgument);
}
