#include <algorithm>
#include <cstring>
#include <string>

#include "ops/moe/moe.h"
#include "ops/moe/moe_internal.h"

namespace hpshmem::ops {
namespace {

using A = MoeAccess;

std::string Shape(int64_t a, int64_t b) {
  std::string s = "(";
  s += std::to_string(a);
  s += ", ";
  s += std::to_string(b);
  s += ")";
  return s;
}

int64_t IdAt(const void* idx, int bytes, int64_t i) {
  return bytes == 8 ? static_cast<const int64_t*>(idx)[i] : static_cast<const int32_t*>(idx)[i];
}

// The local checks of a dispatch's arguments, in the order the messages name them.
Status CheckDispatch(const MoeBuffer& b, const void* x, int64_t tokens, int64_t hidden, DType dtype,
                     const void* topk_idx, int64_t idx_rows, int64_t idx_cols, int idx_bytes, const float* weights,
                     int64_t weight_rows, int64_t weight_cols, MoeLayout layout, int64_t alignment) {
  const MoeConfig& c = A::Config(b);
  if (dtype != c.dtype)
    return Status::TypeError(std::string("x has dtype ") + MoeDTypeName(dtype) + "; the buffer holds " +
                             MoeDTypeName(c.dtype));
  if (hidden != c.hidden)
    return Status::InvalidArgument("x has hidden size " + std::to_string(hidden) + "; the buffer's is " +
                                   std::to_string(c.hidden));
  if (tokens < 0 || tokens > c.max_tokens)
    return Status::InvalidArgument("x has " + std::to_string(tokens) + " tokens; the buffer holds at most " +
                                   std::to_string(c.max_tokens) + " per rank (max_tokens_per_rank)");
  if (idx_bytes != 4 && idx_bytes != 8) return Status::TypeError("topk_idx must be an int32 or int64 tensor");
  if (idx_rows != tokens || idx_cols != c.topk)
    return Status::InvalidArgument("topk_idx must have shape (tokens, topk) = " + Shape(tokens, c.topk) + ", has " +
                                   Shape(idx_rows, idx_cols));
  if (weights && (weight_rows != tokens || weight_cols != c.topk))
    return Status::InvalidArgument("topk_weights must have shape (tokens, topk) = " + Shape(tokens, c.topk) + ", has " +
                                   Shape(weight_rows, weight_cols));
  if (layout != MoeLayout::kRankMajor && layout != MoeLayout::kExpertMajor)
    return Status::InvalidArgument("layout must be 'rank_major' or 'expert_major'");
  if (alignment < 1 || alignment > (int64_t{1} << 20))
    return Status::InvalidArgument("expert_alignment must be in [1, 2**20], got " + std::to_string(alignment));
  if (tokens && !x) return Status::InvalidArgument("x is null");
  const int64_t n = tokens * c.topk;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = IdAt(topk_idx, idx_bytes, i);
    if (e < -1 || e >= c.num_experts)
      return Status::InvalidArgument("topk_idx[" + std::to_string(i / c.topk) + ", " + std::to_string(i % c.topk) +
                                     "] = " + std::to_string(e) + " is out of range [-1, " +
                                     std::to_string(c.num_experts) + ")");
  }
  return Status::OK();
}

}  // namespace

Status MoeDispatchRefuse(MoeBuffer* buffer, MoeDispatchHandle* handle) {
  CollectiveScope scope;
  handle->epoch = A::NextDispatch(buffer);
  handle->failed = true;
  HPSHMEM_RETURN_IF_ERROR(MoeWaitAcks(*buffer, MoeWord::kDispatchAck, handle->epoch, "MoE dispatch acknowledgement"));
  return MoeSignalRefusal(*buffer, MoeWord::kDispatchCount, handle->epoch);
}

Status MoeDispatchSend(MoeBuffer* buffer, const void* x, int64_t tokens, int64_t hidden, DType dtype,
                       const void* topk_idx, int64_t idx_rows, int64_t idx_cols, int idx_bytes, const float* weights,
                       int64_t weight_rows, int64_t weight_cols, MoeLayout layout, int64_t alignment, bool keep_own,
                       MoeDispatchHandle* handle) {
  const MoeBuffer& b = *buffer;
  const MoeConfig& c = A::Config(b);
  Status bad = CheckDispatch(b, x, tokens, hidden, dtype, topk_idx, idx_rows, idx_cols, idx_bytes, weights, weight_rows,
                             weight_cols, layout, alignment);
  if (!bad.ok()) {
    Status s = MoeDispatchRefuse(buffer, handle);
    return s.ok() ? bad : s;
  }
  CollectiveScope scope;
  const int world = A::World(b), me = A::Me(b), k = c.topk;
  const int64_t local = A::Local(b);
  MoeDispatchHandle& h = *handle;
  h.epoch = A::NextDispatch(buffer);
  h.layout = layout;
  h.alignment = alignment;
  h.tokens = tokens;
  h.topk = k;
  h.slot.assign(static_cast<size_t>(tokens) * world, -1);
  h.sent.assign(world, 0);
  h.own_x = keep_own ? static_cast<const char*>(x) : nullptr;
  h.own_tokens.clear();
  // A token's row at each rank, in token order: the combine finds its partial sums there.
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t* slot = &h.slot[static_cast<size_t>(t) * world];
    for (int j = 0; j < k; ++j) {
      const int64_t e = IdAt(topk_idx, idx_bytes, t * k + j);
      if (e < 0) continue;
      const int d = static_cast<int>(e / local);
      if (slot[d] < 0) slot[d] = static_cast<int32_t>(h.sent[d]++);
    }
  }
  HPSHMEM_RETURN_IF_ERROR(MoeWaitAcks(b, MoeWord::kDispatchAck, h.epoch, "MoE dispatch acknowledgement"));
  const size_t row_bytes = static_cast<size_t>(hidden) * DTypeSize(dtype), data = MoeDataBytes(c),
               stride = A::DispatchStride(b);
  const char* xs = static_cast<const char*>(x);
  // Ranks in turn from the next one, so that the sources spread over the receivers.
  for (int step = 1; step <= world; ++step) {
    const int d = (me + step) % world;
    char* dst_local = A::DispatchRow(b, me, 0);
    char* dst = static_cast<char*>(Ptr(dst_local, A::Pe(b, d)));
    char* pack = dst ? dst : A::Staging(b);
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t slot = h.slot[static_cast<size_t>(t) * world + d];
      if (slot < 0) continue;
      char* row = pack + static_cast<size_t>(slot) * stride;
      if (d == me && h.own_x)
        h.own_tokens.push_back(static_cast<int32_t>(t));  // slots of a rank are handed out in token order
      else
        std::memcpy(row, xs + static_cast<size_t>(t) * row_bytes, row_bytes);
      auto* ids = reinterpret_cast<int32_t*>(row + data);
      auto* w = reinterpret_cast<float*>(row + data + 4 * static_cast<size_t>(k));
      for (int j = 0; j < k; ++j) {
        ids[j] = static_cast<int32_t>(IdAt(topk_idx, idx_bytes, t * k + j));
        w[j] = weights ? weights[t * k + j] : 0.0f;
      }
    }
    HPSHMEM_RETURN_IF_ERROR(MoeDeliver(b, d, dst_local, pack, static_cast<size_t>(h.sent[d]) * stride,
                                       MoeWord::kDispatchCount, (h.epoch << 32) | h.sent[d]));
  }
  return Status::OK();
}

void MoeDispatchArrived(const MoeBuffer& buffer, const MoeDispatchHandle& handle, std::vector<bool>* arrived) {
  const int world = A::World(buffer);
  arrived->assign(world, false);
  for (int s = 0; s < world; ++s) {
    const int64_t v = __atomic_load_n(A::Word(buffer, MoeWord::kDispatchCount, s), __ATOMIC_ACQUIRE);
    (*arrived)[s] = v >= (handle.epoch << 32);
  }
}

namespace {

// The call's acknowledgement to every source: their space here may take the next call.
Status AckAll(const MoeBuffer& b, MoeWord ack, int64_t epoch) {
  Status first;
  for (int s = 0; s < A::World(b); ++s) {
    Status st = MoeSignal(b, ack, s, epoch);
    if (first.ok()) first = st;
  }
  return first;
}

// The token's distinct local experts, ascending (a token may name one twice).
int LocalExperts(const int32_t* ids, int k, int64_t first, int64_t local, int32_t* out) {
  int n = 0;
  for (int j = 0; j < k; ++j) {
    const int64_t e = ids[j] - first;
    if (ids[j] < 0 || e < 0 || e >= local) continue;
    if (std::find(out, out + n, static_cast<int32_t>(e)) == out + n) out[n++] = static_cast<int32_t>(e);
  }
  std::sort(out, out + n);
  return n;
}

}  // namespace

Status MoeDispatchWait(MoeBuffer* buffer, MoeDispatchHandle* handle) {
  const MoeBuffer& b = *buffer;
  const MoeConfig& c = A::Config(b);
  MoeDispatchHandle& h = *handle;
  const int world = A::World(b), k = c.topk;
  const int64_t local = A::Local(b), first = A::Me(b) * local;
  h.received_from.assign(world, 0);
  int refused = -1;
  for (int s = 0; s < world; ++s) {
    int64_t v = 0;
    HPSHMEM_RETURN_IF_ERROR(MoeWait(b, MoeWord::kDispatchCount, s, h.epoch << 32, "MoE dispatch", &v));
    if ((v >> 32) != h.epoch)
      return Status(Code::kInternal, "MoE dispatch #" + std::to_string(h.epoch) + ": group rank " + std::to_string(s) +
                                         " is at call #" + std::to_string(v >> 32));
    const int64_t n = v & 0xffffffff;
    if (n == kMoePoison) {
      if (refused < 0) refused = s;
    } else {
      h.received_from[s] = n;
    }
  }
  if (refused >= 0 || h.failed) {
    h.failed = true;
    HPSHMEM_RETURN_IF_ERROR(AckAll(b, MoeWord::kDispatchAck, h.epoch));
    if (refused < 0 || refused == A::Me(b)) return Status::OK();  // this rank's own refusal is its error
    return Status(Code::kCollectiveMismatch, "shmem_moe_dispatch: group rank " + std::to_string(refused) +
                                                 " refused its arguments (its error names them); nothing was received");
  }
  std::vector<int64_t> counts(local, 0);
  int32_t mine[64];
  const size_t data = MoeDataBytes(c);
  int64_t total = 0;
  for (int s = 0; s < world; ++s) {
    total += h.received_from[s];
    for (int64_t i = 0; i < h.received_from[s]; ++i) {
      const auto* ids = reinterpret_cast<const int32_t*>(A::DispatchRow(b, s, i) + data);
      const int n = LocalExperts(ids, k, first, local, mine);
      for (int j = 0; j < n; ++j) ++counts[mine[j]];
    }
  }
  h.expert_rows.assign(local, 0);
  int64_t padded = 0;
  for (int64_t e = 0; e < local; ++e) {
    h.expert_rows[e] = (counts[e] + h.alignment - 1) / h.alignment * h.alignment;
    padded += h.expert_rows[e];
  }
  h.rows = h.layout == MoeLayout::kRankMajor ? total : padded;
  h.received = true;
  return Status::OK();
}

Status MoeDispatchUnpack(MoeBuffer* buffer, MoeDispatchHandle* handle, void* recv_x, int64_t* recv_topk,
                         float* recv_weights, int64_t* expert_counts) {
  const MoeBuffer& b = *buffer;
  const MoeConfig& c = A::Config(b);
  MoeDispatchHandle& h = *handle;
  if (!h.received || h.unpacked || h.failed) return Status::InvalidArgument("this dispatch has nothing to unpack");
  const int world = A::World(b), k = c.topk;
  const int64_t local = A::Local(b), first = A::Me(b) * local;
  const size_t row_bytes = static_cast<size_t>(c.hidden) * DTypeSize(c.dtype), data = MoeDataBytes(c);
  char* out = static_cast<char*>(recv_x);
  h.row_source.assign(h.rows, -1);
  h.row_slot.assign(h.rows, -1);
  h.row_expert.assign(h.rows, -1);
  h.row_topk.assign(static_cast<size_t>(h.rows) * k, -1);
  // Row `r` of the outputs from row i of source s's space (expert e, or -1 in rank_major).
  const int me = A::Me(b);
  auto put_row = [&](int64_t r, int s, int64_t i, int32_t e) {
    const char* row = A::DispatchRow(b, s, i);
    const char* data_of_row = s == me && h.own_x ? h.own_x + static_cast<size_t>(h.own_tokens[i]) * row_bytes : row;
    std::memcpy(out + static_cast<size_t>(r) * row_bytes, data_of_row, row_bytes);
    const auto* ids = reinterpret_cast<const int32_t*>(row + data);
    const auto* w = reinterpret_cast<const float*>(row + data + 4 * static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) {
      const int64_t le = ids[j] - first;
      const bool here = ids[j] >= 0 && le >= 0 && le < local;
      h.row_topk[static_cast<size_t>(r) * k + j] = here ? static_cast<int32_t>(le) : -1;
      recv_topk[static_cast<size_t>(r) * k + j] = here ? le : -1;
      if (recv_weights) recv_weights[static_cast<size_t>(r) * k + j] = here ? w[j] : 0.0f;
    }
    h.row_source[r] = s;
    h.row_slot[r] = static_cast<int32_t>(i);
    h.row_expert[r] = e;
  };
  if (h.layout == MoeLayout::kRankMajor) {
    int64_t r = 0;
    for (int s = 0; s < world; ++s)
      for (int64_t i = 0; i < h.received_from[s]; ++i) put_row(r++, s, i, -1);
  } else {
    std::vector<int64_t> next(local, 0), end(local, 0);
    for (int64_t e = 0, at = 0; e < local; ++e) {
      next[e] = at;
      at += h.expert_rows[e];
      end[e] = at;
    }
    int32_t mine[64];
    for (int s = 0; s < world; ++s) {
      for (int64_t i = 0; i < h.received_from[s]; ++i) {
        const auto* ids = reinterpret_cast<const int32_t*>(A::DispatchRow(b, s, i) + data);
        const int n = LocalExperts(ids, k, first, local, mine);
        for (int j = 0; j < n; ++j) put_row(next[mine[j]]++, s, i, mine[j]);
      }
    }
    for (int64_t e = 0; e < local; ++e) {  // the groups' padding: zero rows of no token
      for (int64_t r = next[e]; r < end[e]; ++r) {
        std::memset(out + static_cast<size_t>(r) * row_bytes, 0, row_bytes);
        for (int j = 0; j < k; ++j) {
          recv_topk[static_cast<size_t>(r) * k + j] = -1;
          if (recv_weights) recv_weights[static_cast<size_t>(r) * k + j] = 0.0f;
        }
      }
    }
  }
  for (int64_t e = 0; e < local; ++e) expert_counts[e] = h.expert_rows[e];
  h.unpacked = true;
  h.own_x = nullptr;  // the caller's x is no longer needed
  return AckAll(b, MoeWord::kDispatchAck, h.epoch);
}

Status MoeDispatchRelease(MoeBuffer* buffer, MoeDispatchHandle* handle) {
  if (handle->unpacked) return Status::OK();
  handle->unpacked = true;
  handle->own_x = nullptr;
  handle->failed = true;
  return AckAll(*buffer, MoeWord::kDispatchAck, handle->epoch);
}

}  // namespace hpshmem::ops
