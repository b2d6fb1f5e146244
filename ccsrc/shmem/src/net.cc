#include "net.h"

#include "hpshmem/hpshmem.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace hpshmem {

std::string Seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", s);
  return b;
}

int Deadline::RemainingMs(int cap_ms) const {
  if (end_ == Clock::time_point::max()) return cap_ms;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
  if (left < 0) return 0;
  if (left > cap_ms) return cap_ms;
  return static_cast<int>(left);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) Reset(o.Release());
  return *this;
}

void Fd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Status RandomBytes(void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("getrandom");
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::OK();
}

namespace {

// Waits until fd is ready for `events` or the deadline passes.
Status WaitFd(int fd, short events, const Deadline& dl, const std::string& peer, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = dl.RemainingMs();
    int r = ::poll(&p, 1, ms);
    if (r > 0) return Status::OK();
    if (r == 0) return Status::Timeout(std::string("timed out ") + what + " " + peer);
    if (errno != EINTR) return Status::FromErrno(std::string("poll while ") + what + " " + peer);
  }
}

}  // namespace

Status SendAll(int fd, const void* buf, size_t len, const Deadline& dl, const std::string& peer) {
  const char* p = static_cast<const char*>(buf);
  while (len) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      HPSHMEM_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, dl, peer, "sending to"));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return Status::PeerDead(peer + " closed the connection");
    return Status::FromErrno("send to " + peer);
  }
  return Status::OK();
}

Status RecvAll(int fd, void* buf, size_t len, const Deadline& dl, const std::string& peer) {
  char* p = static_cast<char*>(buf);
  while (len) {
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status::PeerDead(peer + " closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      HPSHMEM_RETURN_IF_ERROR(WaitFd(fd, POLLIN, dl, peer, "receiving from"));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == ECONNRESET) return Status::PeerDead(peer + " reset the connection");
    return Status::FromErrno("recv from " + peer);
  }
  return Status::OK();
}

Status ParseEndpoint(const std::string& endpoint, std::string* host, int* port) {
  const std::string prefix = "tcp://";
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("bootstrap endpoint '" + endpoint + "' " + why + " (expected tcp://host:port)");
  };
  if (endpoint.compare(0, prefix.size(), prefix) != 0) return bad("does not start with tcp://");
  std::string rest = endpoint.substr(prefix.size());
  size_t colon;
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return bad("has a malformed [ipv6] host");
    *host = rest.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string::npos) return bad("has no port");
    *host = rest.substr(0, colon);
  }
  std::string ps = rest.substr(colon + 1);
  if (host->empty()) return bad("has no host");
  if (ps.empty() || ps.size() > 5 || ps.find_first_not_of("0123456789") != std::string::npos)
    return bad("has a malformed port");
  int p = std::stoi(ps);
  if (p < 1 || p > 65535) return bad("has a port outside 1..65535");
  *port = p;
  return Status::OK();
}

namespace {

Status Resolve(const std::string& host, int port, bool passive, addrinfo** res) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string ps = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), ps.c_str(), &hints, res);
  if (rc != 0) {
    return Status::InvalidArgument("cannot resolve bootstrap host '" + host + "': " + gai_strerror(rc));
  }
  return Status::OK();
}

}  // namespace

Status ListenTcp(const std::string& host, int port, Fd* out, int* bound_port) {
  addrinfo* res = nullptr;
  HPSHMEM_RETURN_IF_ERROR(Resolve(host, port, true, &res));
  Status last = Status::InvalidArgument("no address for '" + host + "'");
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      last = Status::FromErrno("socket");
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last = Status::FromErrno("bind bootstrap listener to " + host + ":" + std::to_string(port));
      continue;
    }
    if (::listen(fd.get(), 1024) != 0) {
      last = Status::FromErrno("listen");
      continue;
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl);
    *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    *out = std::move(fd);
    freeaddrinfo(res);
    return Status::OK();
  }
  freeaddrinfo(res);
  return last;
}

Status LocalAddressToward(const std::string& host, std::string* out) {
  addrinfo* res = nullptr;
  HPSHMEM_RETURN_IF_ERROR(Resolve(host, 9, false, &res));
  Status last = Status::InvalidArgument("no address for '" + host + "'");
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    // A datagram socket's connect() only picks a route and a source address:
    // nothing is sent.
    Fd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last = Status::FromErrno("no route toward '" + host + "'");
      continue;
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    char buf[INET6_ADDRSTRLEN] = {};
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl) != 0 ||
        ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), sl, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) {
      last = Status::FromErrno("getsockname toward '" + host + "'");
      continue;
    }
    *out = buf;
    freeaddrinfo(res);
    return Status::OK();
  }
  freeaddrinfo(res);
  return last;
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

Status ConnectTcp(const std::string& host, int port, const Deadline& dl, Fd* out) {
  std::string peer = host + ":" + std::to_string(port);
  Status last = Status::Timeout("could not connect to the bootstrap at " + peer);
  int backoff_ms = 1;
  while (true) {
    addrinfo* res = nullptr;
    HPSHMEM_RETURN_IF_ERROR(Resolve(host, port, false, &res));
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!fd.valid()) {
        last = Status::FromErrno("socket");
        continue;
      }
      int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd.get(), POLLOUT, 0};
        if (::poll(&p, 1, dl.RemainingMs()) == 1) {
          int err = 0;
          socklen_t el = sizeof err;
          getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &el);
          rc = err ? -1 : 0;
          errno = err;
        } else {
          rc = -1;
          errno = ETIMEDOUT;
        }
      }
      if (rc == 0) {
        SetNoDelay(fd.get());
        *out = std::move(fd);
        freeaddrinfo(res);
        return Status::OK();
      }
      last = Status::FromErrno("connect to the bootstrap at " + peer);
    }
    freeaddrinfo(res);
    if (dl.Expired()) {
      return Status::Timeout("rank 0's bootstrap at " + peer + " did not accept a connection in time (" +
                             last.message() + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, dl.RemainingMs() + 1)));
    backoff_ms = std::min(backoff_ms * 2, 100);
  }
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace hpshmem
