// Socket helpers with deadlines: every blocking read/write/accept/connect in
// the runtime goes through these, so none can hang past its deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hpshmem/status.h"

namespace hpshmem {

using Clock = std::chrono::steady_clock;

// Nanoseconds on Clock, for times kept in atomics.
inline int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// "120", "0.5": seconds for messages, without to_string's six decimals.
std::string Seconds(double s);

// Finite timeouts go up to this many seconds (about 31 years); longer ones,
// infinity included, mean "never": a deadline that far converts to clock
// ticks without overflow (1e18 ns < 2^63).
constexpr double kMaxFiniteTimeoutSec = 1e9;

class Deadline {
 public:
  // seconds: > kMaxFiniteTimeoutSec or +inf never expires; NaN or <= 0 has expired.
  explicit Deadline(double seconds)
      : end_(seconds > kMaxFiniteTimeoutSec ? Clock::time_point::max()
             : seconds > 0
                 ? Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))
                 : Clock::now()) {}
  bool Expired() const { return end_ != Clock::time_point::max() && Clock::now() >= end_; }
  // Milliseconds left, clamped to [0, cap_ms].
  int RemainingMs(int cap_ms = 1 << 30) const;

 private:
  Clock::time_point end_;
};

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.Release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Fills `buf` with `len` cryptographically random bytes (getrandom).
Status RandomBytes(void* buf, size_t len);

// Writes/reads exactly `len` bytes. `peer` names the other side in errors.
// A closed connection gives kPeerDead; an expired deadline kTimeout.
Status SendAll(int fd, const void* buf, size_t len, const Deadline& dl, const std::string& peer);
Status RecvAll(int fd, void* buf, size_t len, const Deadline& dl, const std::string& peer);

// Splits "tcp://host:port" (host may be [v6]). Errors: kInvalidArgument.
Status ParseEndpoint(const std::string& endpoint, std::string* host, int* port);

// A TCP listener on host:port (port 0: chosen by the kernel); the actual port
// is stored in *bound_port. The listener is non-blocking and close-on-exec.
Status ListenTcp(const std::string& host, int port, Fd* out, int* bound_port);
// Connects to host:port, retrying refused connections until the deadline
// (the listener may not be up yet).
Status ConnectTcp(const std::string& host, int port, const Deadline& dl, Fd* out);

void SetNoDelay(int fd);

// LocalAddressToward (hpshmem.h) lives in net.cc too.
// True for "localhost", 127.0.0.0/8 and ::1.
bool IsLoopbackHost(const std::string& host);

}  // namespace hpshmem
