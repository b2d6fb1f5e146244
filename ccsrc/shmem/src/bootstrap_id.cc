// The unique id and the rendezvous: what rank 0 publishes (GetUniqueId), how
// every rank turns it (or an endpoint) into BootstrapParams, and how a rank
// that could not start tells the job. The handshake itself is bootstrap.cc's.
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "bootstrap.h"
#include "segment.h"
#include "siphash.h"

namespace hpshmem {
namespace {

constexpr uint32_t kUidMagic = 0x31555048;  // "HPU1"

#pragma pack(push, 1)
struct UidWire {
  uint32_t magic;
  uint16_t version;
  uint16_t port;
  uint8_t has_secret;
  uint8_t pad[7];
  uint64_t job_id;
  uint8_t secret[16];
  char host[64];
  uint64_t root_machine;
};
#pragma pack(pop)
static_assert(sizeof(UidWire) <= kUniqueIdBytes, "unique id too large");

// The listener made by GetUniqueId, waiting for this process's Init(rank 0).
std::mutex g_pending_mu;
Fd g_pending_listener;
uint64_t g_pending_job = 0;

void DeriveSecret(const std::string& text, uint8_t out[16]) {
  static const uint8_t k0[16] = {'h', 'p', 's', 'h', 'm', 'e', 'm', '-', 's', 'e', 'c', 'r', 'e', 't', '-', '0'};
  static const uint8_t k1[16] = {'h', 'p', 's', 'h', 'm', 'e', 'm', '-', 's', 'e', 'c', 'r', 'e', 't', '-', '1'};
  uint64_t a = SipHash24(k0, text.data(), text.size());
  uint64_t b = SipHash24(k1, text.data(), text.size());
  std::memcpy(out, &a, 8);
  std::memcpy(out + 8, &b, 8);
}

}  // namespace

void EncodeUniqueId(const UniqueIdFields& f, UniqueId* out) {
  std::memset(out->bytes, 0, kUniqueIdBytes);
  UidWire w{};
  w.magic = kUidMagic;
  w.version = kBootstrapProtocolVersion;
  w.port = static_cast<uint16_t>(f.port);
  w.has_secret = f.has_secret ? 1 : 0;
  w.job_id = f.job_id;
  std::memcpy(w.secret, f.secret, 16);
  std::strncpy(w.host, f.host.c_str(), sizeof w.host - 1);
  w.root_machine = f.root_machine;
  std::memcpy(out->bytes, &w, sizeof w);
}

Status DecodeUniqueId(const UniqueId& id, UniqueIdFields* out) {
  UidWire w;
  std::memcpy(&w, id.bytes, sizeof w);
  if (w.magic != kUidMagic) return Status::InvalidArgument("unique id is not an hpshmem unique id (bad magic)");
  if (w.version != kBootstrapProtocolVersion)
    return Status::InvalidArgument("unique id has protocol version " + std::to_string(w.version) +
                                   ", this library speaks " + std::to_string(kBootstrapProtocolVersion));
  w.host[sizeof w.host - 1] = 0;
  out->host = w.host;
  out->port = w.port;
  out->job_id = w.job_id;
  out->has_secret = w.has_secret != 0;
  std::memcpy(out->secret, w.secret, 16);
  out->root_machine = w.root_machine;
  if (out->host.empty() || out->port == 0) return Status::InvalidArgument("unique id has no address");
  return Status::OK();
}

Status GetUniqueId(UniqueId* out, const std::string& host_in) {
  if (!out) return Status::InvalidArgument("GetUniqueId: out is null");
  std::string host = host_in;
  if (host.empty()) {
    const char* h = std::getenv("HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST");
    host = (h && *h) ? h : "127.0.0.1";
  }
  if (host.size() >= 64) return Status::InvalidArgument("bootstrap host name longer than 63 characters");
  UniqueIdFields f;
  f.host = host;
  f.has_secret = true;
  f.root_machine = MachineHash();
  HPSHMEM_RETURN_IF_ERROR(RandomBytes(f.secret, 16));
  HPSHMEM_RETURN_IF_ERROR(RandomBytes(&f.job_id, 8));
  Fd listener;
  HPSHMEM_RETURN_IF_ERROR(ListenTcp(host, 0, &listener, &f.port));
  {
    std::lock_guard<std::mutex> lk(g_pending_mu);
    g_pending_listener = std::move(listener);  // replaces (closes) an unused earlier one
    g_pending_job = f.job_id;
  }
  EncodeUniqueId(f, out);
  return Status::OK();
}

Status ResolveBootstrap(const InitAttr& attr, const std::string& endpoint, const std::string& secret_text,
                        const std::string& job_text, double timeout_sec, BootstrapParams* p) {
  p->rank = attr.rank;
  p->nranks = attr.nranks;
  p->timeout_sec = timeout_sec;
  if (attr.unique_id) {
    UniqueIdFields f;
    HPSHMEM_RETURN_IF_ERROR(DecodeUniqueId(*attr.unique_id, &f));
    p->host = f.host;
    p->port = f.port;
    p->job_id = f.job_id;
    p->has_secret = f.has_secret;
    std::memcpy(p->secret, f.secret, 16);
    p->root_machine = f.root_machine;
    std::lock_guard<std::mutex> lk(g_pending_mu);
    if (attr.rank == 0) {
      if (!g_pending_listener.valid() || g_pending_job != f.job_id) {
        return Status::InvalidArgument(
            "rank 0 must be the process that called GetUniqueId for this unique id "
            "(its listener lives there)");
      }
      p->listener = std::move(g_pending_listener);
    } else {
      g_pending_listener.Reset();  // e.g. inherited across fork: do not hold the port
    }
    return Status::OK();
  }
  if (endpoint.empty()) {
    return Status::InvalidArgument(
        "no rendezvous given: pass a unique id, InitAttr::endpoint, or set "
        "HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT=tcp://host:port");
  }
  HPSHMEM_RETURN_IF_ERROR(ParseEndpoint(endpoint, &p->host, &p->port));
  uint8_t zero[16] = {};
  std::string job = endpoint + "|" + job_text;
  p->job_id = SipHash24(zero, job.data(), job.size());
  if (!secret_text.empty()) {
    p->has_secret = true;
    DeriveSecret(secret_text, p->secret);
  }
  if (attr.rank == 0) {
    int bound = 0;
    HPSHMEM_RETURN_IF_ERROR(ListenTcp(p->host, p->port, &p->listener, &bound));
  }
  return Status::OK();
}

uint64_t MachineHash() {
  std::string key;
  (void)HostKey("", &key);
  uint8_t zero[16] = {};
  uint64_t h = SipHash24(zero, key.data(), key.size());
  return h ? h : 1;
}

void TellJobStartFailed(const InitAttr& attr, const Status& why, double default_timeout_sec) {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  double timeout = default_timeout_sec;
  const std::string t = env("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC");
  char* end = nullptr;
  const double parsed = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (!t.empty() && end && !*end && parsed > 0 && parsed <= 86400) timeout = parsed;
  if (attr.timeout_sec > 0 && attr.timeout_sec <= 86400) timeout = attr.timeout_sec;
  BootstrapParams bp;
  const std::string endpoint = attr.endpoint.empty() ? env("HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT") : attr.endpoint;
  if (!ResolveBootstrap(attr, endpoint, env("HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET"),
                        env("HYPER_PARALLEL_SHMEM_JOB_ID"), timeout, &bp)
           .ok())
    return;
  (void)Bootstrap::ReportFailure(std::move(bp), why.message());
}

}  // namespace hpshmem
