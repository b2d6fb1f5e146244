// Bootstrap: a star of authenticated TCP connections rooted at rank 0, used
// to exchange small blobs (all-gather) and to synchronise (barrier) while the
// job starts and stops. Not on any data path.
//
// Handshake (each non-root rank -> rank 0):
//   root -> client  Challenge{magic, version, server nonce}
//   client -> root  Hello{magic, version, rank, nranks, job id, client nonce,
//                         MAC(secret, "C" | job | rank | nranks | nonces)}
//   root -> client  Welcome{magic, MAC(secret, "S" | ...)}, once every rank has
//                   said hello (so that a failure can still be told to all)
// A rank whose own start fails says so in place of its hello:
//   client -> root  Hello{fail magic, ..., MAC("F" | ...)}, u32 length, text
// and the root then answers every rank, in place of its welcome:
//   root -> client  Welcome{abort magic, text length, MAC("A" | ...)}, text
// keeping its port open for a short grace to tell the ranks still to come.
// A root whose own start fails answers every rank that way.
// The MAC is SipHash-2-4 keyed with the 128-bit job secret; without a secret
// (endpoint path with no HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET) the MAC is not
// checked and a warning is printed once. A connection whose magic, version,
// job id, world size or MAC is wrong, or whose rank is taken, is dropped and
// the root keeps waiting for the real ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpshmem/hpshmem.h"
#include "net.h"

namespace hpshmem {

// The version of the handshake and of the unique id's layout.
inline constexpr uint16_t kBootstrapProtocolVersion = 1;

struct BootstrapParams {
  int rank = -1;
  int nranks = 0;
  std::string host;  // where rank 0 listens
  int port = 0;
  Fd listener;  // rank 0 on the unique-id path: opened by GetUniqueId
  uint64_t job_id = 0;
  bool has_secret = false;
  uint8_t secret[16] = {};
  double timeout_sec = 120;
  uint64_t root_machine = 0;  // MachineHash() of rank 0 (unique-id path; 0 when unknown)
};

// Resolves the rendezvous of `attr` (unique id or endpoint) into params.
// `endpoint` and `secret_text` come from the Config.
Status ResolveBootstrap(const InitAttr& attr, const std::string& endpoint, const std::string& secret_text,
                        const std::string& job_text, double timeout_sec, BootstrapParams* out);

class Bootstrap {
 public:
  // Collective: connects every rank to rank 0 and authenticates it.
  static Status Create(BootstrapParams params, std::unique_ptr<Bootstrap>* out);
  // This rank could not start (`message` says why): tells the job, so that
  // every other rank's Create fails at once naming this rank, instead of
  // waiting out the bootstrap timeout. Rank 0 answers the ranks that come
  // within min(kAbortGraceSec, the timeout); another rank gives rank 0 as
  // long to answer. Best effort: returns how the telling went.
  static Status ReportFailure(BootstrapParams params, const std::string& message);

  // Every rank contributes `len` bytes; `all` receives nranks * len bytes in
  // rank order. Errors name the rank that failed (kPeerDead, kTimeout).
  Status Allgather(const void* mine, size_t len, void* all);
  // Allgather whose lengths travel first, so ranks that disagree on `len`
  // fail with kCollectiveMismatch (naming `what`) instead of misreading.
  Status AllgatherChecked(const void* mine, size_t len, void* all, const char* what);
  // Allgather of blobs whose lengths differ between ranks: (*all)[r] is rank r's.
  Status AllgatherV(const void* mine, size_t len, std::vector<std::string>* all);
  Status Barrier();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t job_id() const { return job_id_; }
  const uint8_t* secret() const { return secret_; }
  bool has_secret() const { return has_secret_; }

 private:
  explicit Bootstrap(const BootstrapParams& p);  // the job's identity; no connection yet
  Status RunRoot(BootstrapParams& p, const std::string& own_failure = "");
  Status RunClient(const BootstrapParams& p);

  int rank_ = -1, nranks_ = 0;
  uint64_t job_id_ = 0;
  bool has_secret_ = false;
  uint8_t secret_[16] = {};
  double timeout_sec_ = 120;
  std::vector<Fd> conns_;  // root: conns_[r] is rank r; others: conns_[0] is root
};

// Encodes/decodes the UniqueId wire format (exposed for tests).
struct UniqueIdFields {
  std::string host;
  int port = 0;
  uint64_t job_id = 0;
  bool has_secret = false;
  uint8_t secret[16] = {};
  uint64_t root_machine = 0;  // MachineHash() where the listener runs
};
// A hash of this machine's identity (boot id + network namespace; never the
// HYPER_PARALLEL_SHMEM_HOST_ID override): equal <=> a loopback address means
// the same listener.
uint64_t MachineHash();

// A rank whose settings are refused has not joined the job yet: it tells the
// job (Bootstrap::ReportFailure), so the other ranks fail at once naming it
// and its reason instead of waiting out the bootstrap timeout. Only the
// rendezvous settings are read, each falling back to its default. Best effort.
void TellJobStartFailed(const InitAttr& attr, const Status& why, double default_timeout_sec);
void EncodeUniqueId(const UniqueIdFields& f, UniqueId* out);
Status DecodeUniqueId(const UniqueId& id, UniqueIdFields* out);

}  // namespace hpshmem
