// Teams (the split routines over the runtime's teams) and contexts.
#include <algorithm>
#include <initializer_list>
#include <vector>

#include "ops/ops.h"
#include "state.h"

namespace hpshmem::oshmem {

void FillTeam(shmem_team_t t, int id, std::vector<int> pes, const char* fn) {
  t->id = id;
  t->pes = std::move(pes);
  t->index_of.assign(S().npes, -1);
  for (size_t i = 0; i < t->pes.size(); ++i) t->index_of[t->pes[i]] = static_cast<int>(i);
  t->me = t->index_of[S().me];
  Check(ops::EagerLimit(id, &t->eager_bytes), fn);
}

// Collective over the members of `pes` (every PE of the parent calls it;
// non-members get SHMEM_TEAM_INVALID at once). Non-zero: no room for the team.
int MakeTeam(const std::vector<int>& pes, const shmem_team_config_t* config, long mask, shmem_team_t* out,
             const char* fn) {
  *out = SHMEM_TEAM_INVALID;
  if (std::find(pes.begin(), pes.end(), S().me) == pes.end()) return 0;
  int id;
  Status st = TeamCreate(pes.data(), static_cast<int>(pes.size()), &id);
  // No room for another team is the caller's to handle (the specification's
  // non-zero return); it is the same on every member, which all made the same calls.
  if (st.code() == Code::kOutOfMemory) return 1;
  Check(st, fn);
  auto* t = new hpshmem_team_s();
  FillTeam(t, id, pes, fn);
  if (config && (mask & SHMEM_TEAM_NUM_CONTEXTS)) t->config = *config;
  *out = t;
  return 0;
}

namespace {

// Splits succeed or fail on every PE of the parent alike (the specification's
// non-zero return everywhere): the members' results are agreed over the parent.
// Teams made here are destroyed again when any PE failed.
int AgreeSplit(shmem_team_t parent, int rc, std::initializer_list<shmem_team_t*> made, const char* fn) {
  auto* word = static_cast<int64_t*>(S().scratch);
  *word = rc != 0;
  Check(ops::Allreduce(word, 1, ops::DType::kInt64, ops::ReduceOp::kMax, ops::AllreduceAlgorithm::kAuto, parent->id),
        fn);
  if (*word == 0) return 0;
  for (shmem_team_t* t : made) {
    if (*t != SHMEM_TEAM_INVALID) {
      Check(TeamDestroy((*t)->id), fn);
      delete *t;
      *t = SHMEM_TEAM_INVALID;
    }
  }
  return 1;
}

}  // namespace
}  // namespace hpshmem::oshmem

using namespace hpshmem;
using namespace hpshmem::oshmem;

extern "C" {

// ---------------------------------------------------------------- teams

int shmem_team_my_pe(shmem_team_t team) { return ValidTeam(team) ? team->me : -1; }
int shmem_team_n_pes(shmem_team_t team) { return ValidTeam(team) ? static_cast<int>(team->pes.size()) : -1; }

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config) {
  if (!ValidTeam(team) || !config) return 1;
  if (config_mask & SHMEM_TEAM_NUM_CONTEXTS) config->num_contexts = team->config.num_contexts;
  return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team) {
  if (!ValidTeam(src_team) || !ValidTeam(dest_team)) return -1;
  if (src_pe < 0 || src_pe >= static_cast<int>(src_team->pes.size())) return -1;
  return dest_team->index_of[src_team->pes[src_pe]];
}

int shmem_team_split_strided(shmem_team_t parent, int start, int stride, int size, const shmem_team_config_t* config,
                             long config_mask, shmem_team_t* new_team) {
  RequireInit("shmem_team_split_strided");
  if (!new_team) return 1;
  *new_team = SHMEM_TEAM_INVALID;
  if (!ValidTeam(parent)) return 1;
  int n = static_cast<int>(parent->pes.size());
  if (size < 1 || start < 0 || start >= n || (stride == 0 && size > 1)) return 1;
  long last = start + static_cast<long>(stride) * (size - 1);
  if (last < 0 || last >= n) return 1;
  std::vector<int> pes;
  for (int i = 0; i < size; ++i) pes.push_back(parent->pes[start + i * stride]);
  int rc = MakeTeam(pes, config, config_mask, new_team, "shmem_team_split_strided");
  return AgreeSplit(parent, rc, {new_team}, "shmem_team_split_strided");
}

int shmem_team_split_2d(shmem_team_t parent, int xrange, const shmem_team_config_t* xaxis_config, long xaxis_mask,
                        shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config, long yaxis_mask,
                        shmem_team_t* yaxis_team) {
  RequireInit("shmem_team_split_2d");
  if (!xaxis_team || !yaxis_team) return 1;
  *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
  if (!ValidTeam(parent) || xrange < 1) return 1;
  int n = static_cast<int>(parent->pes.size());
  xrange = std::min(xrange, n);
  int me = parent->me;
  // Rows of xrange consecutive members (the last may be short), then the columns.
  std::vector<int> row, col;
  for (int i = me / xrange * xrange; i < std::min(n, (me / xrange + 1) * xrange); ++i) row.push_back(parent->pes[i]);
  for (int i = me % xrange; i < n; i += xrange) col.push_back(parent->pes[i]);
  int rc = MakeTeam(row, xaxis_config, xaxis_mask, xaxis_team, "shmem_team_split_2d");
  // The y split runs even when the x split failed: members pair up their calls.
  rc |= MakeTeam(col, yaxis_config, yaxis_mask, yaxis_team, "shmem_team_split_2d");
  return AgreeSplit(parent, rc, {xaxis_team, yaxis_team}, "shmem_team_split_2d");
}

void shmem_team_destroy(shmem_team_t team) {
  if (team == SHMEM_TEAM_INVALID) return;
  RequireInit("shmem_team_destroy");
  if (team->predefined) Fatal("shmem_team_destroy", "SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED cannot be destroyed");
  std::vector<shmem_ctx_t> contexts;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    contexts.swap(team->contexts);
  }
  for (shmem_ctx_t c : contexts) delete c;
  Check(TeamDestroy(team->id), "shmem_team_destroy");
  team->me = -1;  // a stale handle reads as invalid rather than as freed memory
  team->pes.clear();
}

// ---------------------------------------------------------------- contexts
// One ordering domain per PE: a context's fence and quiet act on all of the
// PE's operations, which is what the specification requires of them and more.

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx) {
  RequireInit("shmem_team_create_ctx");
  if (!ctx) return 1;
  *ctx = SHMEM_CTX_INVALID;
  if (!ValidTeam(team) || (options & ~(SHMEM_CTX_PRIVATE | SHMEM_CTX_SERIALIZED | SHMEM_CTX_NOSTORE))) return 1;
  auto* c = new hpshmem_ctx_s();
  c->team = team;
  c->options = options;
  std::lock_guard<std::mutex> lk(S().mu);
  team->contexts.push_back(c);
  *ctx = c;
  return 0;
}

int shmem_ctx_create(long options, shmem_ctx_t* ctx) { return shmem_team_create_ctx(SHMEM_TEAM_WORLD, options, ctx); }

void shmem_ctx_destroy(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  if (ctx->is_default) Fatal("shmem_ctx_destroy", "SHMEM_CTX_DEFAULT cannot be destroyed");
  if (S().initialized) Check(Quiet(), "shmem_ctx_destroy");
  {
    std::lock_guard<std::mutex> lk(S().mu);
    auto& v = ctx->team->contexts;
    auto it = std::find(v.begin(), v.end(), ctx);
    if (it == v.end()) Fatal("shmem_ctx_destroy", "the context was already destroyed");
    v.erase(it);
  }
  delete ctx;
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team) {
  if (!team) return 1;
  if (ctx == SHMEM_CTX_INVALID) {
    *team = SHMEM_TEAM_INVALID;
    return 1;
  }
  *team = ctx->team;
  return 0;
}
}  // extern "C"
