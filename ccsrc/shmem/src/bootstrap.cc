#include "bootstrap.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>

#include "log.h"
#include "segment.h"
#include "siphash.h"

namespace hpshmem {
namespace {

constexpr uint32_t kChallengeMagic = 0x31435048;  // "HPC1"
constexpr uint32_t kHelloMagic = 0x31485048;      // "HPH1"
constexpr uint32_t kWelcomeMagic = 0x31575048;    // "HPW1"
constexpr uint32_t kFailMagic = 0x31465048;       // "HPF1": a hello that says this rank failed
constexpr uint32_t kAbortMagic = 0x31415048;      // "HPA1": a welcome that says the job failed
constexpr uint16_t kProtocolVersion = kBootstrapProtocolVersion;
constexpr double kHandshakeSec = 5.0;    // a silent stranger is dropped after this
constexpr double kAbortGraceSec = 10.0;  // how long a failed start is told to the ranks still to come
constexpr uint32_t kMaxFailureText = 2048;

#pragma pack(push, 1)
struct Challenge {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint8_t nonce[16];
};
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  int32_t rank;
  int32_t nranks;
  uint64_t job_id;
  uint8_t nonce[16];
  uint64_t mac;
};
struct Welcome {
  uint32_t magic;
  uint32_t reserved;
  uint64_t mac;
};
struct MacInput {
  char label;
  uint64_t job_id;
  int32_t rank;
  int32_t nranks;
  uint8_t server_nonce[16];
  uint8_t client_nonce[16];
};
#pragma pack(pop)

uint64_t Mac(const uint8_t secret[16], char label, uint64_t job, int rank, int nranks, const uint8_t sn[16],
             const uint8_t cn[16]) {
  MacInput in{};
  in.label = label;
  in.job_id = job;
  in.rank = rank;
  in.nranks = nranks;
  std::memcpy(in.server_nonce, sn, 16);
  std::memcpy(in.client_nonce, cn, 16);
  return SipHash24(secret, &in, sizeof in);
}

constexpr size_t kMaxPending = 64;  // handshakes in progress at once on the listener
constexpr int kAcceptPauseMs = 50;  // accept pauses this long when out of file descriptors

// Refused connections, logged without flooding: the first few one per line,
// then a count every few seconds and once at the end.
class RefusalLog {
 public:
  void Add(const std::string& why) {
    ++total_;
    if (total_ <= kLines) {
      HP_WARN("bootstrap: refused a connection: %s; still waiting for the job's ranks", why.c_str());
      return;
    }
    ++unlogged_;
    last_ = why;
    if (!next_.Expired()) return;
    Flush();
  }
  void Summary() {
    if (unlogged_) Flush();
    if (total_ > kLines) HP_WARN("bootstrap: %llu connections refused in all", static_cast<unsigned long long>(total_));
  }

 private:
  static constexpr uint64_t kLines = 3;
  void Flush() {
    HP_WARN("bootstrap: refused %llu more connection(s) (last: %s); still waiting for the job's ranks",
            static_cast<unsigned long long>(unlogged_), last_.c_str());
    unlogged_ = 0;
    next_ = Deadline(5.0);
  }
  uint64_t total_ = 0, unlogged_ = 0;
  std::string last_;
  Deadline next_{0};
};

}  // namespace

Bootstrap::Bootstrap(const BootstrapParams& p)
    : rank_(p.rank), nranks_(p.nranks), job_id_(p.job_id), has_secret_(p.has_secret), timeout_sec_(p.timeout_sec) {
  std::memcpy(secret_, p.secret, 16);
}

Status Bootstrap::Create(BootstrapParams p, std::unique_ptr<Bootstrap>* out) {
  std::unique_ptr<Bootstrap> b(new Bootstrap(p));
  if (!p.has_secret) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      HP_WARN(
          "bootstrap is unauthenticated: set HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET on every rank "
          "(the unique-id path always authenticates)");
    });
  }
  Status s = p.rank == 0 ? b->RunRoot(p) : b->RunClient(p);
  if (!s.ok()) return s;
  *out = std::move(b);
  return Status::OK();
}

Status Bootstrap::RunRoot(BootstrapParams& p, const std::string& own_failure) {
  conns_.resize(nranks_);
  if (nranks_ == 1) return Status::OK();
  struct Pending {
    Fd fd;
    Challenge ch;
    Hello hello;
    size_t got = 0;
    Deadline dl{kHandshakeSec};
  };
  // A rank that said hello waits for its welcome until every rank has.
  struct Waiting {
    Fd fd;
    uint8_t server_nonce[16], client_nonce[16];
  };
  std::vector<std::unique_ptr<Pending>> pending;
  std::vector<std::unique_ptr<Waiting>> waiting(nranks_);
  std::vector<bool> heard(nranks_, false);  // said hello, or that it failed
  int heard_count = 0;
  std::string abort_text = own_failure;  // set: the job failed; every rank is told so
  Deadline dl(timeout_sec_);
  std::optional<Deadline> grace;
  if (!abort_text.empty()) grace.emplace(std::min(kAbortGraceSec, timeout_sec_));
  RefusalLog refused;
  auto tell_abort = [&](int fd, int rank, const uint8_t* server_nonce, const uint8_t* client_nonce) {
    Welcome w{kAbortMagic, static_cast<uint32_t>(abort_text.size()),
              has_secret_ ? Mac(secret_, 'A', job_id_, rank, nranks_, server_nonce, client_nonce) : 0};
    Deadline d(1.0);
    if (SendAll(fd, &w, sizeof w, d, "rank " + std::to_string(rank)).ok())
      (void)SendAll(fd, abort_text.data(), abort_text.size(), d, "rank " + std::to_string(rank));
  };
  auto start_abort = [&](const std::string& text) {
    abort_text = text;
    grace.emplace(std::min(kAbortGraceSec, dl.RemainingMs() / 1000.0));
    for (int r = 1; r < nranks_; ++r) {
      if (!waiting[r]) continue;
      tell_abort(waiting[r]->fd.get(), r, waiting[r]->server_nonce, waiting[r]->client_nonce);
      waiting[r].reset();
    }
  };
  // Out of file descriptors: the listener stays readable while accept fails,
  // so it is left out of the poll for a while instead of spinning on it.
  std::optional<Deadline> accept_paused;
  while (heard_count < nranks_ - 1) {
    if (grace && grace->Expired()) break;
    std::vector<pollfd> pfds;
    if (accept_paused && accept_paused->Expired()) accept_paused.reset();
    pfds.push_back({accept_paused ? -1 : p.listener.get(), POLLIN, 0});
    for (auto& c : pending) pfds.push_back({c->fd.get(), POLLIN, 0});
    int ms = dl.RemainingMs(accept_paused ? kAcceptPauseMs : 200);
    if (dl.Expired()) {
      if (!abort_text.empty()) break;
      std::string missing;
      for (int r = 1; r < nranks_; ++r)
        if (!heard[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      return Status::Timeout("rank(s) " + missing + " did not join the job within " + Seconds(timeout_sec_) + " s (" +
                             std::to_string(heard_count + 1) + " of " + std::to_string(nranks_) + " ranks present)");
    }
    int r = ::poll(pfds.data(), pfds.size(), std::min(ms, 200));
    if (r < 0 && errno != EINTR) return Status::FromErrno("poll on bootstrap listener");
    if (pfds[0].revents & POLLIN) {
      for (;;) {
        int fd = ::accept4(p.listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            accept_paused.emplace(kAcceptPauseMs / 1000.0);
            refused.Add("this process is out of file descriptors (accept paused)");
          }
          break;
        }
        // A flood of silent connections must not crowd out the ranks: past the
        // cap the oldest handshake (the longest silent) makes room.
        if (pending.size() >= kMaxPending) {
          refused.Add("too many handshakes at once (the oldest was dropped)");
          pending.erase(pending.begin());
        }
        auto c = std::make_unique<Pending>();
        c->fd.Reset(fd);
        SetNoDelay(fd);
        c->ch = Challenge{kChallengeMagic, kProtocolVersion, 0, {}};
        HPSHMEM_RETURN_IF_ERROR(RandomBytes(c->ch.nonce, 16));
        if (!SendAll(fd, &c->ch, sizeof c->ch, Deadline(0.5), "a connecting process").ok()) continue;
        pending.push_back(std::move(c));
      }
    }
    // Advance each pending handshake; drop strangers.
    for (size_t i = 0; i < pending.size();) {
      Pending& c = *pending[i];
      bool drop = false;
      std::string why;
      ssize_t n = ::recv(c.fd.get(), reinterpret_cast<char*>(&c.hello) + c.got, sizeof(Hello) - c.got, MSG_DONTWAIT);
      if (n > 0)
        c.got += static_cast<size_t>(n);
      else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop = true;
        why = "closed during the handshake";
      }
      if (!drop && c.got == sizeof(Hello)) {
        const Hello& h = c.hello;
        const bool failed = h.magic == kFailMagic;
        if (h.magic != kHelloMagic && !failed)
          why = "bad magic";
        else if (h.version != kProtocolVersion)
          why = "protocol version " + std::to_string(h.version);
        else if (h.job_id != job_id_)
          why = "another job's id";
        else if (h.nranks != nranks_)
          why = "world size " + std::to_string(h.nranks) + " (this job has " + std::to_string(nranks_) + ")";
        else if (h.rank <= 0 || h.rank >= nranks_)
          why = "rank " + std::to_string(h.rank) + " out of range";
        else if (heard[h.rank])
          why = "rank " + std::to_string(h.rank) + " already joined";
        else if (has_secret_ &&
                 !MacEqual(h.mac, Mac(secret_, failed ? 'F' : 'C', job_id_, h.rank, nranks_, c.ch.nonce, h.nonce)))
          why = "a wrong secret";
        if (why.empty() && failed) {
          uint32_t len = 0;
          std::string text;
          Deadline d(1.0);
          Status st = RecvAll(c.fd.get(), &len, sizeof len, d, "rank " + std::to_string(h.rank));
          if (st.ok() && len <= kMaxFailureText) {
            text.resize(len);
            st = RecvAll(c.fd.get(), text.data(), len, d, "rank " + std::to_string(h.rank));
          }
          if (!st.ok() || len > kMaxFailureText) text = "(its message was lost)";
          heard[h.rank] = true;
          ++heard_count;
          HP_DEBUG("bootstrap: rank %d failed to start: %s", h.rank, text.c_str());
          if (abort_text.empty()) start_abort("rank " + std::to_string(h.rank) + " failed to start: " + text);
          pending.erase(pending.begin() + static_cast<long>(i));
          continue;
        }
        if (why.empty()) {
          heard[h.rank] = true;
          ++heard_count;
          if (!abort_text.empty()) {
            tell_abort(c.fd.get(), h.rank, c.ch.nonce, h.nonce);
          } else {
            auto w = std::make_unique<Waiting>();
            w->fd = std::move(c.fd);
            std::memcpy(w->server_nonce, c.ch.nonce, 16);
            std::memcpy(w->client_nonce, h.nonce, 16);
            waiting[h.rank] = std::move(w);
            HP_DEBUG("bootstrap: rank %d said hello (%d of %d)", h.rank, heard_count + 1, nranks_);
          }
          pending.erase(pending.begin() + static_cast<long>(i));
          continue;
        }
        drop = true;
      }
      if (!drop && c.dl.Expired()) {
        drop = true;
        why = "no complete hello within " + Seconds(kHandshakeSec) + " s";
      }
      if (drop) {
        refused.Add(why);
        pending.erase(pending.begin() + static_cast<long>(i));
        continue;
      }
      ++i;
    }
  }
  refused.Summary();
  p.listener.Reset();  // the port is closed as soon as the job is complete (or has failed)
  if (!abort_text.empty()) return Status::Bootstrap(abort_text);
  for (int r = 1; r < nranks_; ++r) {
    Waiting& w = *waiting[r];
    Welcome msg{kWelcomeMagic, 0,
                has_secret_ ? Mac(secret_, 'S', job_id_, r, nranks_, w.server_nonce, w.client_nonce) : 0};
    HPSHMEM_RETURN_IF_ERROR(SendAll(w.fd.get(), &msg, sizeof msg, Deadline(1.0), "rank " + std::to_string(r)));
    conns_[r] = std::move(w.fd);
  }
  return Status::OK();
}

Status Bootstrap::ReportFailure(BootstrapParams p, const std::string& message) {
  std::unique_ptr<Bootstrap> b(new Bootstrap(p));
  const std::string text = message.substr(0, kMaxFailureText);
  if (p.rank == 0) return b->RunRoot(p, "rank 0 failed to start: " + text);
  Deadline dl(std::min(kAbortGraceSec, p.timeout_sec));
  const std::string root = "rank 0 (bootstrap " + p.host + ":" + std::to_string(p.port) + ")";
  Fd fd;
  HPSHMEM_RETURN_IF_ERROR(ConnectTcp(p.host, p.port, dl, &fd));
  Challenge ch;
  HPSHMEM_RETURN_IF_ERROR(RecvAll(fd.get(), &ch, sizeof ch, dl, root));
  if (ch.magic != kChallengeMagic || ch.version != kProtocolVersion)
    return Status::Bootstrap(root + " does not speak this bootstrap protocol");
  Hello h{kFailMagic, kProtocolVersion, 0, p.rank, p.nranks, p.job_id, {}, 0};
  HPSHMEM_RETURN_IF_ERROR(RandomBytes(h.nonce, 16));
  if (p.has_secret) h.mac = Mac(p.secret, 'F', p.job_id, p.rank, p.nranks, ch.nonce, h.nonce);
  const uint32_t len = static_cast<uint32_t>(text.size());
  HPSHMEM_RETURN_IF_ERROR(SendAll(fd.get(), &h, sizeof h, dl, root));
  HPSHMEM_RETURN_IF_ERROR(SendAll(fd.get(), &len, sizeof len, dl, root));
  return SendAll(fd.get(), text.data(), text.size(), dl, root);
}

Status Bootstrap::RunClient(const BootstrapParams& p) {
  Deadline dl(timeout_sec_);
  conns_.resize(1);
  std::string root = "rank 0 (bootstrap " + p.host + ":" + std::to_string(p.port) + ")";
  if (p.root_machine && IsLoopbackHost(p.host) && p.root_machine != MachineHash()) {
    // Its loopback is not ours: connecting would reach nobody, or a stranger.
    return Status::Bootstrap("rank " + std::to_string(rank_) +
                             ": rank 0 runs on another machine but advertised "
                             "the loopback address " +
                             p.host +
                             "; set HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST on rank 0 "
                             "to an address the other hosts can reach (or MASTER_ADDR / MS_SCHED_HOST to the "
                             "rendezvous host, whose route picks it)");
  }
  Fd fd;
  HPSHMEM_RETURN_IF_ERROR(ConnectTcp(p.host, p.port, dl, &fd));
  Challenge ch;
  Status s = RecvAll(fd.get(), &ch, sizeof ch, dl, root);
  if (!s.ok()) return Status::Bootstrap("no challenge from " + root + ": " + s.message());
  if (ch.magic != kChallengeMagic || ch.version != kProtocolVersion)
    return Status::Bootstrap(root + " does not speak this bootstrap protocol (bad magic or version)");
  Hello h{kHelloMagic, kProtocolVersion, 0, rank_, nranks_, job_id_, {}, 0};
  HPSHMEM_RETURN_IF_ERROR(RandomBytes(h.nonce, 16));
  if (has_secret_) h.mac = Mac(secret_, 'C', job_id_, rank_, nranks_, ch.nonce, h.nonce);
  HPSHMEM_RETURN_IF_ERROR(SendAll(fd.get(), &h, sizeof h, dl, root));
  Welcome w;
  s = RecvAll(fd.get(), &w, sizeof w, dl, root);
  if (!s.ok()) {
    return Status::Bootstrap(root + " refused rank " + std::to_string(rank_) +
                             " (wrong secret, job id or world size, or the rank is taken): " + s.message());
  }
  if (w.magic == kAbortMagic &&
      (!has_secret_ || MacEqual(w.mac, Mac(secret_, 'A', job_id_, rank_, nranks_, ch.nonce, h.nonce)))) {
    std::string text(std::min<uint32_t>(w.reserved, kMaxFailureText), '\0');
    if (!RecvAll(fd.get(), text.data(), text.size(), Deadline(1.0), root).ok()) text = "(its message was lost)";
    return Status::Bootstrap("the job failed to start: " + text);
  }
  if (w.magic != kWelcomeMagic ||
      (has_secret_ && !MacEqual(w.mac, Mac(secret_, 'S', job_id_, rank_, nranks_, ch.nonce, h.nonce)))) {
    return Status::Bootstrap(root + " could not prove it knows the job secret");
  }
  conns_[0] = std::move(fd);
  return Status::OK();
}

Status Bootstrap::Allgather(const void* mine, size_t len, void* all) {
  auto* out = static_cast<uint8_t*>(all);
  Deadline dl(timeout_sec_);
  if (rank_ == 0) {
    if (len) std::memcpy(out, mine, len);
    for (int r = 1; r < nranks_; ++r) {
      HPSHMEM_RETURN_IF_ERROR(RecvAll(conns_[r].get(), out + r * len, len, dl, "rank " + std::to_string(r)));
    }
    for (int r = 1; r < nranks_; ++r) {
      HPSHMEM_RETURN_IF_ERROR(SendAll(conns_[r].get(), out, len * nranks_, dl, "rank " + std::to_string(r)));
    }
    return Status::OK();
  }
  HPSHMEM_RETURN_IF_ERROR(SendAll(conns_[0].get(), mine, len, dl, "rank 0"));
  return RecvAll(conns_[0].get(), out, len * nranks_, dl, "rank 0");
}

Status Bootstrap::AllgatherChecked(const void* mine, size_t len, void* all, const char* what) {
  uint64_t n = len;
  std::vector<uint64_t> lens(nranks_);
  HPSHMEM_RETURN_IF_ERROR(Allgather(&n, sizeof n, lens.data()));
  for (int r = 0; r < nranks_; ++r) {
    if (lens[r] != n) {
      return Status::CollectiveMismatch(std::string(what) + ": rank " + std::to_string(r) + " contributes " +
                                        std::to_string(lens[r]) + " bytes, rank " + std::to_string(rank_) + " " +
                                        std::to_string(n));
    }
  }
  return Allgather(mine, len, all);
}

Status Bootstrap::AllgatherV(const void* mine, size_t len, std::vector<std::string>* all) {
  uint64_t n = len;
  std::vector<uint64_t> lens(nranks_);
  HPSHMEM_RETURN_IF_ERROR(Allgather(&n, sizeof n, lens.data()));
  size_t max = 0;
  for (uint64_t l : lens) max = std::max<size_t>(max, l);
  std::string padded(max, '\0');
  if (len) std::memcpy(padded.data(), mine, len);
  std::string flat(max * nranks_, '\0');
  HPSHMEM_RETURN_IF_ERROR(Allgather(padded.data(), max, flat.data()));
  all->resize(nranks_);
  for (int r = 0; r < nranks_; ++r) (*all)[r] = flat.substr(r * max, lens[r]);
  return Status::OK();
}

Status Bootstrap::Barrier() {
  uint8_t b = 1;
  std::vector<uint8_t> all(nranks_);
  return Allgather(&b, 1, all.data());
}

}  // namespace hpshmem
