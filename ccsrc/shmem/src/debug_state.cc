// Settings, diagnostics (DebugState) and the worker pool behind ParallelFor.
#include <cstring>
#include <sstream>

#include "copy.h"
#include "hpshmem/parallel.h"
#include "runtime.h"

namespace hpshmem {

Status GetRuntimeInfo(RuntimeInfo* out) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("GetRuntimeInfo");
  std::lock_guard<std::mutex> lk(rt->alloc_mu);
  out->rank = rt->rank;
  out->nranks = rt->nranks;
  out->heap_bytes = rt->heap_bytes;
  out->timeout_sec = rt->config.timeout_sec;
  out->block_dim = rt->config.block_dim;
  out->bytes_live = rt->alloc->bytes_live();
  out->bytes_peak = rt->alloc->bytes_peak();
  out->allocations_live = rt->alloc->live().size();
  return Status::OK();
}

Status EnvironmentSettings(RuntimeInfo* out) {
  Config c;
  HPSHMEM_RETURN_IF_ERROR(Config::Build(InitAttr{}, &c));
  *out = RuntimeInfo{};
  out->heap_bytes = c.heap_bytes;
  out->timeout_sec = c.timeout_sec;
  out->block_dim = c.block_dim;
  return Status::OK();
}

const char* PeerTransport(int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt || pe < 0 || pe >= rt->nranks) return nullptr;
  return pe == rt->rank ? "self" : rt->route[pe]->name();
}

std::string DebugState() {
  std::lock_guard<std::mutex> lk(LifecycleMutex());
  Runtime* rt = CurrentRuntime();
  std::ostringstream o;
  if (!rt) {
    o << "{\"initialized\": false}";
    return o.str();
  }
  std::lock_guard<std::mutex> alk(rt->alloc_mu);
  static const char* kLevels[] = {"error", "warn", "info", "debug"};
  o << "{\"initialized\": true, \"rank\": " << rt->rank << ", \"world_size\": " << rt->nranks << ", \"transport\": \""
    << rt->TransportNames() << "\", \"peer_transports\": [";
  for (int r = 0; r < rt->nranks; ++r) o << (r ? ", " : "") << "\"" << PeerTransport(r) << "\"";
  o << "], \"config\": {\"heap_bytes\": " << rt->heap_bytes << ", \"timeout_sec\": " << rt->config.timeout_sec
    << ", \"block_dim\": " << rt->config.block_dim << ", \"log_level\": \""
    << kLevels[static_cast<int>(rt->config.log_level)]
    << "\", \"authenticated\": " << (rt->boot->has_secret() ? "true" : "false") << ", \"streaming_copy_bytes\": "
    << (StreamingCopyThreshold() == SIZE_MAX ? std::string("null") : std::to_string(StreamingCopyThreshold()))
    << "}, \"wait\": {\"mode\": \"" << rt->wait.mode << "\", \"cpus\": " << rt->wait.cpus
    << ", \"ranks_sharing_cpus\": " << rt->wait.sharing
    << ", \"oversubscribed\": " << (rt->wait.oversubscribed ? "true" : "false")
    << ", \"spin_us\": " << rt->wait.spin_ns / 1000.0 << ", \"yield_us\": " << rt->wait.yield_ns / 1000.0
    << ", \"fenceless_wake\": " << (AsymWake() ? "true" : "false")
    << "}, \"heap\": {\"bytes_live\": " << rt->alloc->bytes_live() << ", \"bytes_peak\": " << rt->alloc->bytes_peak()
    << ", \"bytes_free\": "
    << rt->heap_bytes - rt->alloc->bytes_live() - rt->alloc->bytes_retired()
    // Freed blocks not yet reusable: a view of them lives on some rank, or they were freed
    // after the last allocator call (which is where ranks agree to reuse them).
    << ", \"bytes_freed_pending\": " << rt->alloc->bytes_retired()
    << ", \"freed_pending\": " << rt->alloc->retired_count() << ", \"allocator_calls\": " << rt->alloc_seq
    << ", \"live_allocations\": [";
  bool first = true;
  for (auto& [off, len] : rt->alloc->live()) {
    o << (first ? "" : ", ") << "{\"offset\": " << off << ", \"bytes\": " << len << "}";
    first = false;
  }
  o << "]}, \"barriers\": " << rt->barrier_epoch << ", \"teams\": [";
  {
    // Each live team: this rank's id for it, its members (global ranks, in team order) and the
    // collective calls this rank has entered in it.
    std::lock_guard<std::mutex> lk(rt->team_mu);
    bool first_team = true;
    for (size_t id = 0; id < rt->teams.size(); ++id) {
      const TeamState* t = rt->teams[id].get();
      if (!t) continue;
      o << (first_team ? "" : ", ") << "{\"id\": " << id << ", \"ranks\": [";
      for (size_t i = 0; i < t->pes.size() && i < 64; ++i) o << (i ? ", " : "") << t->pes[i];
      int64_t calls = 0;  // the state's first word (hpshmem.h, TeamView::state)
      std::memcpy(&calls, t->state, sizeof calls);
      o << "], \"size\": " << t->pes.size() << ", \"calls\": " << calls << "}";
      first_team = false;
    }
  }
  // Round trips that Quiet (alone or in a barrier) paid to complete puts,
  // signals and atomics on other hosts: one per peer that had any pending.
  uint64_t round_trips = 0;
  for (auto& t : rt->transports) round_trips += t->QuietRoundTrips();
  o << "], \"quiet_round_trips\": " << round_trips;
  o << ", \"lost_ranks\": [" << rt->LostRanks() << "]}";
  return o.str();
}

Status ParallelFor(int n, const std::function<Status(int)>& fn) {
  CallScope call;
  Runtime* rt = call.rt();
  if (n <= 1 || !rt) {
    for (int i = 0; i < n; ++i) HPSHMEM_RETURN_IF_ERROR(fn(i));
    return Status::OK();
  }
  WorkerPool* pool;
  {
    std::lock_guard<std::mutex> lk(rt->pool_mu);
    if (!rt->pool) rt->pool = std::make_unique<WorkerPool>();
    pool = rt->pool.get();
  }
  return pool->Run(n, fn);
}

int DefaultBlockDim() {
  CallScope call;
  Runtime* rt = call.rt();
  return rt ? rt->config.block_dim : 1;
}

}  // namespace hpshmem
