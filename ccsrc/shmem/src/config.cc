#include "config.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "net.h"

namespace hpshmem {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Status ParseByteSize(const std::string& text, const char* what, size_t* out) {
  auto bad = [&] {
    return Status::InvalidArgument(std::string(what) + "='" + text +
                                   "' is not a byte size (examples: 1073741824, 64k, 512m, 1g)");
  };
  std::string s = Lower(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  size_t start = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == start || i - start > 19) return bad();
  unsigned long long n = std::strtoull(s.substr(start, i - start).c_str(), nullptr, 10);
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::string suffix = s.substr(i);
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b")
    shift = 0;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib")
    shift = 10;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib")
    shift = 20;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib")
    shift = 30;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib")
    shift = 40;
  else
    return bad();
  if (shift && n > (~0ULL >> shift)) return bad();
  *out = static_cast<size_t>(n << shift);
  return Status::OK();
}

namespace {

constexpr char kTimeoutRange[] = "must be a number of seconds > 0 and <= 1e9, or inf to wait forever";

// (0, kMaxFiniteTimeoutSec] or +inf. NaN, zero, negatives and finite values
// past the range are refused rather than silently turned into "forever".
bool ValidTimeout(double t) {
  return (t > 0 && t <= kMaxFiniteTimeoutSec) || t == std::numeric_limits<double>::infinity();
}

constexpr double kMaxWaitPhaseUs = 1e6;

// auto | spin | yield | <spin_us>,<yield_us>
Status ParseWaitMode(const char* v, Config* c) {
  std::string t = Lower(v);
  if (t == "auto")
    c->wait_mode = Config::WaitMode::kAuto;
  else if (t == "spin")
    c->wait_mode = Config::WaitMode::kSpin;
  else if (t == "yield")
    c->wait_mode = Config::WaitMode::kYield;
  else {
    char* end = nullptr;
    errno = 0;
    double spin = std::strtod(t.c_str(), &end);
    bool ok = errno == 0 && end != t.c_str() && *end == ',';
    double yield = 0;
    if (ok) {
      const char* y = end + 1;
      yield = std::strtod(y, &end);
      ok = errno == 0 && end != y && *end == 0;
    }
    if (!ok || !(spin >= 0 && spin <= kMaxWaitPhaseUs) || !(yield >= 0 && yield <= kMaxWaitPhaseUs)) {
      return Status::InvalidArgument(std::string("HYPER_PARALLEL_SHMEM_WAIT='") + v +
                                     "' must be auto, spin (every rank has a core of its own), yield (ranks "
                                     "outnumber cores) or SPIN_US,YIELD_US (microseconds, each 0 to 1e6)");
    }
    c->wait_mode = Config::WaitMode::kCustom;
    c->wait_spin_us = spin;
    c->wait_yield_us = yield;
  }
  return Status::OK();
}

}  // namespace

Status Config::Build(const InitAttr& attr, Config* out) {
  Config c;
  if (const char* v = Env("SYMMETRIC_MEMORY_HEAP_SIZE")) {
    HPSHMEM_RETURN_IF_ERROR(ParseByteSize(v, "SYMMETRIC_MEMORY_HEAP_SIZE", &c.heap_bytes));
  }
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC")) {
    char* end = nullptr;
    errno = 0;
    double t = std::strtod(v, &end);
    if (errno || end == v || *end || !ValidTimeout(t)) {
      return Status::InvalidArgument(std::string("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC='") + v + "' " + kTimeoutRange);
    }
    c.timeout_sec = t;
  }
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC")) {
    char* end = nullptr;
    errno = 0;
    double t = std::strtod(v, &end);
    if (errno || end == v || *end || !(t == 0 || (t >= 1 && t <= 1e6))) {
      return Status::InvalidArgument(std::string("HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC='") + v +
                                     "' must be a number of seconds in [1, 1e6], or 0 to never declare a silent peer "
                                     "lost");
    }
    c.peer_timeout_sec = t;
  }
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_BLOCK_DIM")) {
    char* end = nullptr;
    long b = std::strtol(v, &end, 10);
    if (end == v || *end || b < 1 || b > kMaxBlockDim) {
      return Status::InvalidArgument(std::string("HYPER_PARALLEL_SHMEM_BLOCK_DIM='") + v +
                                     "' must be an integer in [1, 64]");
    }
    c.block_dim = static_cast<int>(b);
  }
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_LOG_LEVEL")) {
    std::string l = Lower(v);
    if (l == "error")
      c.log_level = LogLevel::kError;
    else if (l == "warn" || l == "warning")
      c.log_level = LogLevel::kWarn;
    else if (l == "info")
      c.log_level = LogLevel::kInfo;
    else if (l == "debug")
      c.log_level = LogLevel::kDebug;
    else
      return Status::InvalidArgument(std::string("HYPER_PARALLEL_SHMEM_LOG_LEVEL='") + v +
                                     "' must be one of error, warn, info, debug");
  }
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT")) c.endpoint = v;
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET")) c.secret = v;
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_JOB_ID")) c.job_id = v;
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_HOST_ID")) c.host_id = v;
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_TRANSPORT")) {
    std::string t = Lower(v);
    if (t != "auto" && t != "ucx")
      return Status::InvalidArgument(std::string("HYPER_PARALLEL_SHMEM_TRANSPORT='") + v +
                                     "' must be auto (shared memory within a host, UCX between hosts) or ucx");
    c.force_ucx = t == "ucx";
  }
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_UCX_RMA")) {
    std::string t = Lower(v);
    if (t != "0" && t != "1")
      return Status::InvalidArgument(std::string("HYPER_PARALLEL_SHMEM_UCX_RMA='") + v + "' must be 0 or 1");
    c.ucx_rma = t == "1";
  }
  if (const char* v = Env("HYPER_PARALLEL_SHMEM_WAIT")) {
    HPSHMEM_RETURN_IF_ERROR(ParseWaitMode(v, &c));
  }

  if (attr.heap_bytes) c.heap_bytes = attr.heap_bytes;
  if (attr.timeout_sec != 0 && !ValidTimeout(attr.timeout_sec))
    return Status::InvalidArgument("InitAttr::timeout_sec=" + Seconds(attr.timeout_sec) + " " + kTimeoutRange +
                                   " (or 0 for the environment's)");
  if (attr.timeout_sec != 0) c.timeout_sec = attr.timeout_sec;
  if (attr.block_dim < 0 || attr.block_dim > kMaxBlockDim)
    return Status::InvalidArgument("InitAttr::block_dim must be in [0, 64]");
  if (attr.block_dim) c.block_dim = attr.block_dim;
  if (!attr.endpoint.empty()) c.endpoint = attr.endpoint;
  if (c.heap_bytes < 4096) {
    return Status::InvalidArgument("symmetric heap size " + std::to_string(c.heap_bytes) +
                                   " bytes is too small (minimum 4096); set SYMMETRIC_MEMORY_HEAP_SIZE");
  }
  *out = c;
  return Status::OK();
}

}  // namespace hpshmem
