#include "shm_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "copy.h"
#include "log.h"
#include "wait.h"
#include "siphash.h"

namespace hpshmem {
namespace {

constexpr uint32_t kLinkHelloMagic = 0x314c5048;  // "HPL1"
constexpr uint32_t kLinkAckMagic = 0x31415048;    // "HPA1"
constexpr uint32_t kLinkFdMagic = 0x31465048;     // "HPF1"
constexpr double kLinkHandshakeSec = 5.0;

#pragma pack(push, 1)
struct LinkHello {
  uint32_t magic;
  int32_t from, to;
  uint64_t job_id;
  uint8_t nonce[16];
  uint64_t mac;
};
struct LinkMsg {  // carries a segment fd
  uint32_t magic;
  int32_t rank;
  uint64_t mac;
};
#pragma pack(pop)

uint64_t LinkMac(const Bootstrap* b, char label, int from, int to, const uint8_t nonce[16]) {
  if (!b->has_secret()) return 0;
  struct {
    char label;
    uint64_t job;
    int32_t from, to;
    uint8_t nonce[16];
  } __attribute__((packed)) in{label, b->job_id(), from, to, {}};
  std::memcpy(in.nonce, nonce, 16);
  return SipHash24(b->secret(), &in, sizeof in);
}

sockaddr_un AbstractAddr(const char* name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  size_t n = std::strlen(name);
  std::memcpy(a.sun_path + 1, name, n);  // leading NUL: abstract namespace, no file
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// A one-buffer message with room for one file descriptor (SCM_RIGHTS).
struct FdMessage {
  iovec iov;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage(void* buf, size_t len) : iov{buf, len} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
  }
};

Status SendWithFd(int sock, const void* buf, size_t len, int fd_to_send, const std::string& peer) {
  FdMessage m(const_cast<void*>(buf), len);
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd_to_send, sizeof(int));
  for (;;) {
    ssize_t n = ::sendmsg(sock, &m.msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(len)) return Status::OK();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return Status::PeerDead(peer + " closed the connection");
    return Status::FromErrno("sendmsg(segment) to " + peer);
  }
}

Status RecvWithFd(int sock, void* buf, size_t len, Fd* fd_out, const Deadline& dl, const std::string& peer) {
  for (;;) {
    pollfd p{sock, POLLIN, 0};
    int r = ::poll(&p, 1, dl.RemainingMs());
    if (r == 0) return Status::Timeout("timed out waiting for the heap segment of " + peer);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("poll");
    }
    FdMessage m(buf, len);
    ssize_t n = ::recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n == 0) return Status::PeerDead(peer + " closed the connection before sending its heap");
    if (n < 0) return Status::FromErrno("recvmsg from " + peer);
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      fd_out->Reset(fd);
    }
    if (n != static_cast<ssize_t>(len) || !fd_out->valid())
      return Status::Bootstrap(peer + " sent a malformed heap message");
    return Status::OK();
  }
}

}  // namespace

ShmTransport::ShmTransport(Bootstrap* boot, LocalSegment* seg, bool no_sharing)
    : boot_(boot), seg_(seg), rank_(boot->rank()), nranks_(boot->nranks()), no_sharing_(no_sharing) {
  segments_.assign(nranks_, nullptr);
  segments_[rank_] = seg->base();
  links_.resize(nranks_);
}

bool ShmTransport::CanReach(const std::vector<PeerCard>& cards, int a, int b) const {
  if (a == b) return true;
  return !cards[a].force_ucx && !cards[b].force_ucx && std::strcmp(cards[a].host_key, cards[b].host_key) == 0;
}

Status ShmTransport::Prepare(PeerCard* card) {
  card->force_ucx = no_sharing_ ? 1 : 0;
  uint8_t rnd[8];
  HPSHMEM_RETURN_IF_ERROR(RandomBytes(rnd, sizeof rnd));
  uint64_t r64;
  std::memcpy(&r64, rnd, 8);
  std::snprintf(card->sock_name, sizeof card->sock_name, "hpshmem/%016llx/%d/%016llx",
                static_cast<unsigned long long>(boot_->job_id()), rank_, static_cast<unsigned long long>(r64));
  listener_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener_.valid()) return Status::FromErrno("socket(AF_UNIX)");
  socklen_t alen;
  sockaddr_un addr = AbstractAddr(card->sock_name, &alen);
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), alen) != 0)
    return Status::FromErrno("bind abstract socket");
  if (::listen(listener_.get(), nranks_ + 64) != 0) return Status::FromErrno("listen(AF_UNIX)");
  return Status::OK();
}

Status ShmTransport::Connect(const std::vector<PeerCard>& all, const std::vector<bool>& local, double timeout_sec) {
  Bootstrap* boot = boot_;
  const size_t segment_bytes = seg_->bytes();
  socklen_t alen;
  Deadline dl(timeout_sec);
  // 1. Dial every lower rank and introduce ourselves (buffered, never blocks).
  std::vector<LinkHello> sent(nranks_);
  for (int j = 0; j < rank_; ++j) {
    if (!local[j]) continue;
    Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_un pa = AbstractAddr(all[j].sock_name, &alen);
    while (::connect(s.get(), reinterpret_cast<sockaddr*>(&pa), alen) != 0) {
      if (errno != EAGAIN || dl.Expired())
        return Status::FromErrno("connect to rank " + std::to_string(j) + "'s heap socket");
      usleep(1000);
    }
    LinkHello& hl = sent[j];
    hl = LinkHello{kLinkHelloMagic, rank_, j, boot->job_id(), {}, 0};
    HPSHMEM_RETURN_IF_ERROR(RandomBytes(hl.nonce, 16));
    hl.mac = LinkMac(boot, 'L', rank_, j, hl.nonce);
    HPSHMEM_RETURN_IF_ERROR(SendAll(s.get(), &hl, sizeof hl, dl, "rank " + std::to_string(j)));
    links_[j] = std::move(s);
  }
  // 2. Accept every higher rank; answer with our segment.
  int expected = 0;
  for (int i = rank_ + 1; i < nranks_; ++i) expected += local[i] ? 1 : 0;
  while (expected > 0) {
    pollfd pf{listener_.get(), POLLIN, 0};
    int pr = ::poll(&pf, 1, dl.RemainingMs());
    if (pr == 0) {
      std::string missing;
      for (int i = rank_ + 1; i < nranks_; ++i)
        if (local[i] && !links_[i].valid()) missing += " " + std::to_string(i);
      return Status::Timeout("rank(s)" + missing + " never connected to rank " + std::to_string(rank_) +
                             "'s heap socket");
    }
    if (pr < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("poll(AF_UNIX listener)");
    }
    Fd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!c.valid()) continue;
    ucred cred{};
    socklen_t cl = sizeof cred;
    ::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cl);
    LinkHello hl{};
    std::string why;
    if (cred.uid != ::getuid())
      why = "uid " + std::to_string(cred.uid) + " is not this job's user";
    else if (!RecvAll(c.get(), &hl, sizeof hl, Deadline(kLinkHandshakeSec), "a local process").ok())
      why = "no hello";
    else if (hl.magic != kLinkHelloMagic || hl.job_id != boot->job_id() || hl.to != rank_ || hl.from <= rank_ ||
             hl.from >= nranks_ || !local[hl.from] || links_[hl.from].valid() ||
             !MacEqual(hl.mac, LinkMac(boot, 'L', hl.from, rank_, hl.nonce)) || cred.pid != all[hl.from].pid)
      why = "bad hello";
    if (!why.empty()) {
      HP_WARN("heap socket: refused a local connection (%s)", why.c_str());
      continue;
    }
    LinkMsg ack{kLinkAckMagic, rank_, LinkMac(boot, 'A', rank_, hl.from, hl.nonce)};
    HPSHMEM_RETURN_IF_ERROR(SendWithFd(c.get(), &ack, sizeof ack, seg_->fd(), "rank " + std::to_string(hl.from)));
    links_[hl.from] = std::move(c);
    --expected;
  }
  listener_.Reset();  // the abstract name disappears with the socket

  auto map_peer = [&](int j, Fd fd) -> Status {
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("fstat of rank " + std::to_string(j) + "'s heap");
    if (static_cast<size_t>(st.st_size) != segment_bytes)
      return Status::Bootstrap("rank " + std::to_string(j) + "'s heap segment has the wrong size");
    void* q = MapAligned(fd.get(), segment_bytes);
    if (q == MAP_FAILED) return Status::FromErrno("mmap of rank " + std::to_string(j) + "'s heap");
    segments_[j] = static_cast<uint8_t*>(q);
    auto* hdr = reinterpret_cast<PeHeader*>(segments_[j]);
    if (hdr->magic != kHeaderMagic || hdr->rank != j)
      return Status::Bootstrap("rank " + std::to_string(j) + "'s heap segment has a bad header");
    return Status::OK();
  };
  // 3. Collect the lower ranks' segments; send ours back.
  for (int j = 0; j < rank_; ++j) {
    if (!local[j]) continue;
    std::string peer = "rank " + std::to_string(j);
    LinkMsg ack{};
    Fd fd;
    HPSHMEM_RETURN_IF_ERROR(RecvWithFd(links_[j].get(), &ack, sizeof ack, &fd, dl, peer));
    if (ack.magic != kLinkAckMagic || ack.rank != j || !MacEqual(ack.mac, LinkMac(boot, 'A', j, rank_, sent[j].nonce)))
      return Status::Bootstrap(peer + " could not prove it belongs to this job");
    HPSHMEM_RETURN_IF_ERROR(map_peer(j, std::move(fd)));
    LinkMsg m{kLinkFdMagic, rank_, 0};
    HPSHMEM_RETURN_IF_ERROR(SendWithFd(links_[j].get(), &m, sizeof m, seg_->fd(), peer));
  }
  // 4. Collect the higher ranks' segments.
  for (int i = rank_ + 1; i < nranks_; ++i) {
    if (!local[i]) continue;
    std::string peer = "rank " + std::to_string(i);
    LinkMsg m{};
    Fd fd;
    HPSHMEM_RETURN_IF_ERROR(RecvWithFd(links_[i].get(), &m, sizeof m, &fd, dl, peer));
    if (m.magic != kLinkFdMagic || m.rank != i) return Status::Bootstrap(peer + " sent a malformed heap message");
    HPSHMEM_RETURN_IF_ERROR(map_peer(i, std::move(fd)));
  }
  seg_->CloseFd();  // every peer of this host holds its own mapping now
  return Status::OK();
}

// ---------------------------------------------------------------- verbs

Status ShmTransport::Put(int pe, size_t off, const void* src, size_t bytes) {
  PutDirect(segments_[pe] + off, src, bytes, DoorbellFor(segments_[pe], off));
  return Status::OK();
}

Status ShmTransport::Get(int pe, void* dst, size_t off, size_t bytes) {
  CopyBytes(dst, segments_[pe] + off, bytes);
  return Status::OK();
}

Status ShmTransport::Signal(int pe, size_t off, SignalType type, SignalOp op, int64_t value) {
  int64_t old;
  return FetchAtomic(pe, off, type, op, value, &old);
}

Status ShmTransport::PutSignal(int pe, size_t off, const void* src, size_t bytes, size_t sig_off, SignalType type,
                               SignalOp op, int64_t value) {
  CopyBytes(segments_[pe] + off, src, bytes);
  return Signal(pe, sig_off, type, op, value);
}

Status ShmTransport::Amo(int pe, size_t off, SignalType type, AmoOp op, int64_t value, int64_t compare, int64_t* old) {
  // Streaming stores of a large put are not ordered by a plain release:
  // fence so that every earlier put is visible before the update.
  StoreFence();
  int64_t o = ApplyAmo(segments_[pe] + off, type, op, value, compare);
  if (old) *old = o;
  if (op != AmoOp::kFetch) Notify(DoorbellFor(segments_[pe], off));
  return Status::OK();
}

Status ShmTransport::Quiet() {
  StoreFence();
  return Status::OK();
}

void ShmTransport::StartMonitor(LostFn on_peers_lost, LostPeerFn) {
  on_lost_ = std::move(on_peers_lost);
  wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  monitor_ = std::thread([this] { MonitorLoop(); });
}

void ShmTransport::MonitorLoop() {
  std::vector<int> peers;
  for (int j = 0; j < nranks_; ++j)
    if (links_[j].valid()) peers.push_back(j);
  while (!stopping_.load()) {
    std::vector<pollfd> pfds{{wake_.get(), POLLIN, 0}};
    for (int j : peers) pfds.push_back({links_[j].get(), POLLIN | POLLRDHUP, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0) continue;
    if (stopping_.load()) break;
    std::vector<int> alive, lost_now;
    for (size_t k = 0; k < peers.size(); ++k) {
      short ev = pfds[k + 1].revents;
      bool lost = ev & (POLLHUP | POLLERR | POLLRDHUP);
      if (!lost && (ev & POLLIN)) {
        char b;  // nothing is sent after setup: readable means EOF
        lost = ::recv(links_[peers[k]].get(), &b, 1, MSG_DONTWAIT) <= 0;
      }
      (lost ? lost_now : alive).push_back(peers[k]);
    }
    if (!lost_now.empty()) on_lost_(lost_now, kExitedCause);
    peers.swap(alive);
  }
}

void ShmTransport::Shutdown() {
  if (shut_) return;
  shut_ = true;
  stopping_.store(true);
  if (monitor_.joinable()) {
    uint64_t one = 1;
    ssize_t w = ::write(wake_.get(), &one, sizeof one);
    (void)w;
    monitor_.join();
  }
  for (auto& l : links_) l.Reset();
  listener_.Reset();
  for (int r = 0; r < nranks_; ++r) {
    if (segments_[r] && r != rank_) RetireMapping(segments_[r], seg_->bytes());
    segments_[r] = nullptr;
  }
}

ShmTransport::~ShmTransport() { Shutdown(); }

}  // namespace hpshmem
