// The OpenSHMEM layer's state and the helpers every routine shares: handles,
// symmetric-address translation (global data lives in the heap, see
// setup.cc), PE translation through a context's team, and the fatal-error
// path. The layer is thin: data moves only through libhpshmem's calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "hpshmem/direct.h"
#include "hpshmem/hpshmem.h"
#include "shmem.h"

struct hpshmem_team_s {
  int id = -1;                // the runtime's team id (hpshmem::kTeamWorld for the world)
  int me = -1;                // this PE's index in the team
  std::vector<int> pes;       // global PE of each member
  std::vector<int> index_of;  // team index of each global PE, -1 if not a member
  size_t eager_bytes = 0;     // ops::EagerLimit of the team, fixed for its life
  shmem_team_config_t config{0};
  bool predefined = false;            // world and shared: never destroyed
  std::vector<shmem_ctx_t> contexts;  // created from this team, destroyed with it
};

struct hpshmem_ctx_s {
  shmem_team_t team = nullptr;  // PE numbers given to this context's routines are this team's
  long options = 0;
  bool is_default = false;
};

namespace hpshmem::oshmem {

struct State {
  bool initialized = false;
  bool finalized = false;
  int thread_level = SHMEM_THREAD_SINGLE;
  int me = -1, npes = 0;
  // The program's writable data (.data and .bss) mapped onto heap pages.
  uintptr_t data_lo = 0;
  size_t data_bytes = 0;
  uint8_t* data_heap = nullptr;
  void* scratch = nullptr;  // symmetric, kScratchBytes: counts exchanged by collect
  size_t scratch_bytes = 0;
  std::mutex mu;  // teams, contexts, active sets, allocation sizes
  // Peers whose memory is mapped here are reached by the runtime's direct
  // route (hpshmem/direct.h: plain loads, stores and CPU atomics; a put of 8
  // bytes ~9 ns instead of ~30 through the runtime's checks and virtual
  // calls); the rest through the runtime.
  DirectMap dm;
  std::vector<Doorbell*> bells;  // each mapped peer's doorbell for waiters on its heap (PeerDoorbell)
};
State& S();

// Prints "hpshmem: PE <me>: <fn>: <what>" and ends the job (shmem_global_exit(1)).
[[noreturn]] void Fatal(const char* fn, const std::string& what);
inline void Check(const Status& s, const char* fn) {
  if (!s.ok()) Fatal(fn, s.ToString());
}
// Fails unless shmem_init has run (and shmem_finalize has not).
void RequireInit(const char* fn);

// The heap address of a symmetric object: global and static data are reached
// through their heap pages; heap addresses pass unchanged.
inline void* Sym(const void* p) {
  const State& s = S();
  auto a = reinterpret_cast<uintptr_t>(p);
  if (a - s.data_lo < s.data_bytes) return s.data_heap + (a - s.data_lo);
  return const_cast<void*>(p);
}

// Where [sym, sym + bytes) (a heap address, see Sym) lies on rank pe when pe
// is mapped here; null otherwise (the runtime's path then checks and reports).
inline uint8_t* Direct(const void* sym, size_t bytes, int pe) {
  const State& s = S();
  if (static_cast<unsigned>(pe) >= static_cast<unsigned>(s.dm.nranks)) return nullptr;
  uint8_t* peer = s.dm.peer_sym[pe];
  uintptr_t off = reinterpret_cast<uintptr_t>(sym) - reinterpret_cast<uintptr_t>(s.dm.sym_base);
  if (!peer || off > s.dm.sym_bytes || bytes > s.dm.sym_bytes - off) return nullptr;
  return peer + off;
}

// Whether rank pe is a rank of the job whose memory is not mapped here (it
// is on another host); false for a rank out of range (the runtime's checks
// report that).
inline bool Remote(int pe) {
  const State& s = S();
  return static_cast<unsigned>(pe) < static_cast<unsigned>(s.dm.nranks) && s.dm.peer_sym[pe] == nullptr;
}

// A put of `bytes` to global PE g at heap address d (see Sym): a plain copy
// to a mapped peer, a non-blocking put to another host, else the runtime's.
void PutToPe(void* d, const void* src, size_t bytes, int g, const char* fn);

// After an atomic on mapped rank pe's memory: wakes its waiters.
inline void WakeAfterAtomic(int pe) { Notify(S().bells[pe]); }

// The global PE of `pe` in `ctx`'s team; Fatal when out of range.
inline int GlobalPe(shmem_ctx_t ctx, int pe, const char* fn) {
  if (ctx == SHMEM_CTX_INVALID) Fatal(fn, "the context is SHMEM_CTX_INVALID");
  shmem_team_t t = ctx->team;
  if (!t || t->id == kTeamWorld) return pe;  // checked by the runtime with the rest
  if (pe < 0 || pe >= static_cast<int>(t->pes.size()))
    Fatal(fn,
          "PE " + std::to_string(pe) + " is out of range for the context's team of " + std::to_string(t->pes.size()));
  return t->pes[pe];
}

// Makes `t` the team of global PEs `pes` (in team order) with runtime team id
// `id`, which exists; a failure ends the program naming `fn`.
void FillTeam(shmem_team_t t, int id, std::vector<int> pes, const char* fn);

// Creates the team of global PEs `pes`, collective over them alone (the
// split routines agree on the result over the parent afterwards). Non-zero:
// no room for it; *out is SHMEM_TEAM_INVALID for a PE not in `pes`.
int MakeTeam(const std::vector<int>& pes, const shmem_team_config_t* config, long mask, shmem_team_t* out,
             const char* fn);

// A team handle that may be used (not SHMEM_TEAM_INVALID, not destroyed).
bool ValidTeam(shmem_team_t team);

}  // namespace hpshmem::oshmem
