#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/moe/moe.h"
#include "ops/moe/moe_internal.h"
#include "ops/reduce/half.h"

namespace hpshmem::ops {
namespace {

using A = MoeAccess;

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
AccOf<T> Widen(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return ToFloat(v);
  else
    return v;
}
template <class T>
T Narrow(AccOf<T> v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return FromFloat(v, static_cast<T*>(nullptr));
  else
    return v;
}

// Calls f with a null pointer of the C++ type of `dtype` (one of the four floats).
template <class F>
void WithType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(static_cast<double*>(nullptr));
    case DType::kFloat16:
      return f(static_cast<Half*>(nullptr));
    case DType::kBFloat16:
      return f(static_cast<BFloat16*>(nullptr));
    default:
      return f(static_cast<float*>(nullptr));
  }
}

Status CheckCombine(const MoeBuffer& b, const MoeDispatchHandle& d, int64_t rows, int64_t hidden, DType dtype,
                    const void* expert_out, const float* weights, int64_t weight_rows, int64_t weight_cols) {
  const MoeConfig& c = A::Config(b);
  if (!d.unpacked || d.failed)
    return Status::InvalidArgument("handle is not a completed dispatch (it failed, or was never waited for)");
  if (dtype != c.dtype)
    return Status::TypeError(std::string("expert_out has dtype ") + MoeDTypeName(dtype) + "; the buffer holds " +
                             MoeDTypeName(c.dtype));
  if (rows != d.rows || hidden != c.hidden)
    return Status::InvalidArgument("expert_out must have shape (rows of recv_x, hidden) = (" + std::to_string(d.rows) +
                                   ", " + std::to_string(c.hidden) + "), has (" + std::to_string(rows) + ", " +
                                   std::to_string(hidden) + ")");
  if (weights && (weight_rows != d.rows || weight_cols != c.topk))
    return Status::InvalidArgument("topk_weights must have shape (rows of recv_x, topk) = (" + std::to_string(d.rows) +
                                   ", " + std::to_string(c.topk) + "), has (" + std::to_string(weight_rows) + ", " +
                                   std::to_string(weight_cols) + ")");
  if (rows && !expert_out) return Status::InvalidArgument("expert_out is null");
  return Status::OK();
}

// The weight of row r: its token's weights summed over the row's experts, in double so that a
// float64 combine is not rounded to float32 through its weights.
double RowWeight(const MoeDispatchHandle& d, const float* weights, int64_t r) {
  double w = 0;
  const int32_t* ids = &d.row_topk[static_cast<size_t>(r) * d.topk];
  for (int j = 0; j < d.topk; ++j) {
    const bool mine = d.layout == MoeLayout::kExpertMajor ? ids[j] == d.row_expert[r] : ids[j] >= 0;
    if (mine) w += weights[static_cast<size_t>(r) * d.topk + j];
  }
  return w;
}

// dst (n partial rows, combine_stride apart) = the weighted sums of the rows of source s.
template <class T>
void Partials(const MoeBuffer& b, const MoeDispatchHandle& d, const T* out, const float* weights,
              const std::vector<int64_t>& rows_of_s, char* dst) {
  using Acc = AccOf<T>;
  const int64_t hidden = A::Config(b).hidden;
  const size_t stride = A::CombineStride(b);
  bool first_of_slot = true;
  int32_t last_slot = -1;
  for (int64_t r : rows_of_s) {
    auto* p = reinterpret_cast<Acc*>(dst + static_cast<size_t>(d.row_slot[r]) * stride);
    const T* x = out + static_cast<size_t>(r) * hidden;
    first_of_slot = d.row_slot[r] != last_slot;  // rows of one slot are adjacent in rows_of_s
    last_slot = d.row_slot[r];
    const Acc w = weights ? static_cast<Acc>(RowWeight(d, weights, r)) : Acc(1);
    if (first_of_slot) {
      if (weights)
        for (int64_t i = 0; i < hidden; ++i) p[i] = w * Widen(x[i]);
      else
        for (int64_t i = 0; i < hidden; ++i) p[i] = Widen(x[i]);
    } else {
      if (weights)
        for (int64_t i = 0; i < hidden; ++i) p[i] += w * Widen(x[i]);
      else
        for (int64_t i = 0; i < hidden; ++i) p[i] += Widen(x[i]);
    }
  }
}

}  // namespace

Status MoeCombineRefuse(MoeBuffer* buffer, MoeCombineHandle* handle) {
  CollectiveScope scope;
  handle->epoch = A::NextCombine(buffer);
  handle->failed = true;
  HPSHMEM_RETURN_IF_ERROR(MoeWaitAcks(*buffer, MoeWord::kCombineAck, handle->epoch, "MoE combine acknowledgement"));
  return MoeSignalRefusal(*buffer, MoeWord::kCombineCount, handle->epoch);
}

Status MoeCombineSend(MoeBuffer* buffer, const MoeDispatchHandle& dispatch, const void* expert_out, int64_t rows,
                      int64_t hidden, DType dtype, const float* weights, int64_t weight_rows, int64_t weight_cols,
                      MoeCombineHandle* handle) {
  const MoeBuffer& b = *buffer;
  Status bad = CheckCombine(b, dispatch, rows, hidden, dtype, expert_out, weights, weight_rows, weight_cols);
  if (!bad.ok()) {
    Status s = MoeCombineRefuse(buffer, handle);
    return s.ok() ? bad : s;
  }
  CollectiveScope scope;
  handle->epoch = A::NextCombine(buffer);
  handle->failed = false;
  const int world = A::World(b), me = A::Me(b);
  // Each source's rows, slot by slot (rows of one slot adjacent, in row order).
  std::vector<std::vector<int64_t>> rows_of(world);
  for (int s = 0; s < world; ++s) rows_of[s].reserve(dispatch.received_from[s]);
  if (dispatch.layout == MoeLayout::kRankMajor) {
    for (int64_t r = 0; r < rows; ++r) rows_of[dispatch.row_source[r]].push_back(r);
  } else {
    // Row order groups by expert; regroup by slot while keeping expert order within a slot.
    for (int s = 0; s < world; ++s) {
      std::vector<std::vector<int64_t>> by_slot(dispatch.received_from[s]);
      for (int64_t r = 0; r < rows; ++r)
        if (dispatch.row_source[r] == s) by_slot[dispatch.row_slot[r]].push_back(r);
      for (auto& v : by_slot) rows_of[s].insert(rows_of[s].end(), v.begin(), v.end());
    }
  }
  HPSHMEM_RETURN_IF_ERROR(MoeWaitAcks(b, MoeWord::kCombineAck, handle->epoch, "MoE combine acknowledgement"));
  const DType dt = A::Config(b).dtype;
  for (int step = 1; step <= world; ++step) {
    const int s = (me + step) % world;
    char* dst_local = A::CombineRow(b, me, 0);
    char* dst = static_cast<char*>(Ptr(dst_local, A::Pe(b, s)));
    char* pack = dst ? dst : A::Staging(b);
    WithType(dt, [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      Partials<T>(b, dispatch, static_cast<const T*>(expert_out), weights, rows_of[s], pack);
    });
    const int64_t n = dispatch.received_from[s];
    HPSHMEM_RETURN_IF_ERROR(MoeDeliver(b, s, dst_local, pack, static_cast<size_t>(n) * A::CombineStride(b),
                                       MoeWord::kCombineCount, (handle->epoch << 32) | n));
  }
  return Status::OK();
}

namespace {

template <class T>
void SumTokens(const MoeBuffer& b, const MoeDispatchHandle& d, T* out) {
  using Acc = AccOf<T>;
  const int world = A::World(b);
  const int64_t hidden = A::Config(b).hidden;
  std::vector<Acc> acc(hidden);
  for (int64_t t = 0; t < d.tokens; ++t) {
    const int32_t* slot = &d.slot[static_cast<size_t>(t) * world];
    bool any = false;
    for (int r = 0; r < world; ++r) {  // in rank order: the same bits on every run
      if (slot[r] < 0) continue;
      const auto* p = reinterpret_cast<const Acc*>(A::CombineRow(b, r, slot[r]));
      if (!any)
        for (int64_t i = 0; i < hidden; ++i) acc[i] = p[i];
      else
        for (int64_t i = 0; i < hidden; ++i) acc[i] += p[i];
      any = true;
    }
    T* o = out + static_cast<size_t>(t) * hidden;
    if (!any)
      for (int64_t i = 0; i < hidden; ++i) o[i] = Narrow<T>(Acc(0));
    else
      for (int64_t i = 0; i < hidden; ++i) o[i] = Narrow<T>(acc[i]);
  }
}

}  // namespace

Status MoeCombineWait(MoeBuffer* buffer, const MoeDispatchHandle& dispatch, MoeCombineHandle* handle, void* out) {
  const MoeBuffer& b = *buffer;
  const int world = A::World(b);
  Status problem;
  for (int d = 0; d < world; ++d) {
    int64_t v = 0;
    HPSHMEM_RETURN_IF_ERROR(MoeWait(b, MoeWord::kCombineCount, d, handle->epoch << 32, "MoE combine", &v));
    if ((v >> 32) != handle->epoch)
      return Status(Code::kInternal, "MoE combine #" + std::to_string(handle->epoch) + ": group rank " +
                                         std::to_string(d) + " is at call #" + std::to_string(v >> 32));
    const int64_t n = v & 0xffffffff;
    if (!problem.ok() || handle->failed) continue;
    if (n == kMoePoison) {
      problem = Status(Code::kCollectiveMismatch, "shmem_moe_combine: group rank " + std::to_string(d) +
                                                      " refused its arguments (its error names them)");
    } else if (!dispatch.failed && n != dispatch.sent[d]) {
      problem = Status(Code::kCollectiveMismatch, "shmem_moe_combine: group rank " + std::to_string(d) + " returned " +
                                                      std::to_string(n) + " rows where this rank's dispatch sent it " +
                                                      std::to_string(dispatch.sent[d]) +
                                                      " (the ranks combined different dispatches)");
    }
  }
  if (problem.ok() && !handle->failed) {
    WithType(A::Config(b).dtype, [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      SumTokens<T>(b, dispatch, static_cast<T*>(out));
    });
  }
  Status acked;
  for (int d = 0; d < world; ++d) {
    Status s = MoeSignal(b, MoeWord::kCombineAck, d, handle->epoch);
    if (acked.ok()) acked = s;
  }
  HPSHMEM_RETURN_IF_ERROR(problem);
  return acked;
}

}  // namespace hpshmem::ops
