#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "ops/moe/moe.h"
#include "ops/moe/moe_internal.h"
#include "ops/ops.h"

namespace hpshmem::ops {

const char* MoeDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    default:
      return "a dtype other than float32, float64, float16 or bfloat16";
  }
}

namespace {

bool Floating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16;
}

size_t Align(size_t v, size_t a) { return (v + a - 1) / a * a; }

struct Layout {
  size_t dispatch_stride, combine_stride, dispatch_region, combine_region, staging, total;
};

// The layout (moe_internal.h) of `c` for `world` members; false on overflow.
bool MakeLayout(const MoeConfig& c, int world, Layout* l) {
  const auto t = static_cast<unsigned __int128>(c.max_tokens);
  l->dispatch_stride = Align(MoeDataBytes(c) + 8 * static_cast<size_t>(c.topk), 64);
  l->combine_stride = Align(static_cast<size_t>(c.hidden) * MoeAccBytes(c.dtype), 64);
  const unsigned __int128 words = 64 + 4 * static_cast<unsigned __int128>(world) * 64;
  const unsigned __int128 dispatch = static_cast<unsigned __int128>(world) * t * l->dispatch_stride;
  const unsigned __int128 combine = static_cast<unsigned __int128>(world) * t * l->combine_stride;
  const unsigned __int128 staging = t * std::max(l->dispatch_stride, l->combine_stride);
  const unsigned __int128 total = words + dispatch + combine + staging;
  if (total > (static_cast<unsigned __int128>(1) << 62)) return false;
  l->dispatch_region = static_cast<size_t>(words);
  l->combine_region = static_cast<size_t>(words + dispatch);
  l->staging = static_cast<size_t>(words + dispatch + combine);
  l->total = static_cast<size_t>(total);
  return true;
}

Status CheckConfig(const MoeConfig& c, int world) {
  if (!Floating(c.dtype))
    return Status::TypeError("dtype must be float32, float64, float16 or bfloat16 (the combine sums tokens)");
  if (c.max_tokens < 0 || c.max_tokens > (int64_t{1} << 31) - 1)
    return Status::InvalidArgument("max_tokens_per_rank must be in [0, 2**31), got " + std::to_string(c.max_tokens));
  if (c.hidden < 1) return Status::InvalidArgument("hidden must be >= 1, got " + std::to_string(c.hidden));
  if (c.topk < 1 || c.topk > 64)
    return Status::InvalidArgument("topk must be in [1, 64], got " + std::to_string(c.topk));
  if (world < 1) return Status::InvalidArgument("the group has no members");
  if (c.num_experts < 1 || c.num_experts % world != 0 || c.num_experts / world > (int64_t{1} << 30))
    return Status::InvalidArgument("num_experts must be a positive multiple of the group's " + std::to_string(world) +
                                   " ranks (experts are split evenly), got " + std::to_string(c.num_experts));
  return Status::OK();
}

int64_t ConfigHash(const MoeConfig& c) {
  const int64_t parts[] = {c.max_tokens, c.hidden, static_cast<int64_t>(c.dtype), c.num_experts, c.topk};
  uint64_t h = 1469598103934665603ull;
  for (int64_t p : parts) {
    h ^= static_cast<uint64_t>(p) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h | 1);  // never 0: a zero word means "not written"
}

}  // namespace

size_t MoeBufferBytes(const MoeConfig& config, int team_size, Status* error) {
  Status s = CheckConfig(config, team_size);
  Layout l;
  if (s.ok() && !MakeLayout(config, team_size, &l))
    s = Status::InvalidArgument("the buffer's size overflows: max_tokens_per_rank x hidden is too large");
  if (!s.ok()) {
    if (error) *error = s;
    return 0;
  }
  return l.total;
}

Status MoeBuffer::Create(const MoeConfig& config, void* base, size_t bytes, MoeBuffer** out) {
  TeamView team;
  HPSHMEM_RETURN_IF_ERROR(GetTeam(config.team, &team));
  if (team.me < 0) return Status::InvalidArgument("this rank is not a member of the buffer's group");
  Status error;
  const size_t need = MoeBufferBytes(config, team.size, &error);
  if (!need) return error;
  if (bytes < need || !IsSymmetric(base, need))
    return Status::InvalidArgument("the MoE buffer's space must be " + std::to_string(need) + " symmetric bytes, got " +
                                   std::to_string(bytes));
  Layout l;
  MakeLayout(config, team.size, &l);
  auto* b = new MoeBuffer();
  b->config_ = config;
  b->world_ = team.size;
  b->me_ = team.me;
  b->pes_.assign(team.pes, team.pes + team.size);
  b->local_experts_ = config.num_experts / team.size;
  b->base_ = static_cast<char*>(base);
  b->bytes_ = need;
  b->dispatch_stride_ = l.dispatch_stride;
  b->combine_stride_ = l.combine_stride;
  b->dispatch_region_ = l.dispatch_region;
  b->combine_region_ = l.combine_region;
  b->staging_ = l.staging;
  // Every word starts at epoch 0; the barrier orders every member's zeroing
  // before any member's first write and publishes the config hashes.
  std::memset(b->base_, 0, l.dispatch_region);
  const int64_t mine = ConfigHash(config);
  std::memcpy(b->base_, &mine, 8);
  Status s = TeamBarrier(config.team);
  for (int m = 0; s.ok() && m < team.size; ++m) {
    int64_t theirs = 0;
    s = GetMem(&theirs, b->base_, 8, b->pes_[m]);
    if (s.ok() && theirs != mine)
      s = Status(Code::kCollectiveMismatch,
                 "shmem_moe_buffer: ranks passed different configurations (group rank " + std::to_string(m) +
                     "'s max_tokens_per_rank, hidden, dtype, num_experts or topk differ from group rank " +
                     std::to_string(team.me) + "'s)");
  }
  // Nobody may return (and dispatch) before every member has read the hashes.
  if (Status t = TeamBarrier(config.team); s.ok()) s = t;
  if (!s.ok()) {
    delete b;
    return s;
  }
  *out = b;
  return Status::OK();
}

Status MoeSignal(const MoeBuffer& b, MoeWord word, int member, int64_t value) {
  return Signal(MoeAccess::Word(b, word, MoeAccess::Me(b)), SignalType::kInt64, value, SignalOp::kSet,
                MoeAccess::Pe(b, member));
}

Status MoeWait(const MoeBuffer& b, MoeWord word, int member, int64_t value, const char* what, int64_t* seen) {
  char label[96];
  std::snprintf(label, sizeof label, "%s from group rank %d", what, member);
  return hpshmem::SignalWaitUntil(MoeAccess::Word(b, word, member), SignalType::kInt64, Cmp::kGe, value, seen, label,
                                  MoeAccess::Config(b).team);
}

Status MoeWaitAcks(const MoeBuffer& b, MoeWord ack, int64_t epoch, const char* what) {
  if (epoch <= 1) return Status::OK();
  for (int m = 0; m < MoeAccess::World(b); ++m) {
    HPSHMEM_RETURN_IF_ERROR(MoeWait(b, ack, m, epoch - 1, what, nullptr));
  }
  return Status::OK();
}

Status MoeSignalRefusal(const MoeBuffer& b, MoeWord count, int64_t epoch) {
  Status first;
  for (int m = 0; m < MoeAccess::World(b); ++m) {
    Status s = MoeSignal(b, count, m, (epoch << 32) | kMoePoison);
    if (first.ok()) first = s;
  }
  return first;
}

Status MoeDeliver(const MoeBuffer& b, int member, void* dst_local, const void* src, size_t bytes, MoeWord count,
                  int64_t value) {
  const int pe = MoeAccess::Pe(b, member);
  if (void* dst = Ptr(dst_local, pe)) {
    if (dst != src && bytes) std::memcpy(dst, src, bytes);
    std::atomic_thread_fence(std::memory_order_release);
    return MoeSignal(b, count, member, value);
  }
  return hpshmem::PutMemSignal(dst_local, src, bytes, MoeAccess::Word(b, count, MoeAccess::Me(b)), SignalType::kInt64,
                               value, SignalOp::kSet, pe);
}

}  // namespace hpshmem::ops
