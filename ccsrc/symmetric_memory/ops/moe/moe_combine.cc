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

// a[i] = p[0][i] + p[1][i] + ... + p[n-1][i], added in that order (n >= 2). Memory-bound: wider
// vectors (avx2 clones) measured no faster.
template <class Acc>
void SumInto(Acc* a, const Acc* const* p, int n, int64_t count) {
  for (int64_t i = 0; i < count; ++i) a[i] = p[0][i] + p[1][i];
  for (int k = 2; k < n; ++k)
    for (int64_t i = 0; i < count; ++i) a[i] += p[k][i];
}

// p (hidden elements) = the weighted sum of rows[0, n) of out, in that order: one partial sum row.
template <class T>
void PartialRow(const MoeDispatchHandle& d, const T* out, const float* weights, int64_t hidden, const int64_t* rows,
                int64_t n, AccOf<T>* p) {
  using Acc = AccOf<T>;
  for (int64_t j = 0; j < n; ++j) {
    const T* x = out + static_cast<size_t>(rows[j]) * hidden;
    const Acc w = weights ? static_cast<Acc>(RowWeight(d, weights, rows[j])) : Acc(1);
    if (j == 0) {
      if (weights)
        for (int64_t i = 0; i < hidden; ++i) p[i] = w * Widen(x[i]);
      else if constexpr (std::is_same_v<Acc, T>)
        std::memcpy(p, x, static_cast<size_t>(hidden) * sizeof(T));
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

// Every received row of the dispatch by (source, slot): the rows of slot i of source s are
// rows[start[base[s] + i], start[base[s] + i + 1]), in row order (in expert_major a token's rows
// for several local experts, by expert). Every slot has at least one row.
struct RowsBySlot {
  std::vector<int64_t> base, start, rows;
  void Build(const MoeDispatchHandle& d, int world) {
    base.assign(world + 1, 0);
    for (int s = 0; s < world; ++s) base[s + 1] = base[s] + d.received_from[s];
    start.assign(base[world] + 1, 0);
    for (int64_t r = 0; r < d.rows; ++r)
      if (d.row_source[r] >= 0) ++start[base[d.row_source[r]] + d.row_slot[r] + 1];
    for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
    rows.resize(start.back());
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t r = 0; r < d.rows; ++r)
      if (d.row_source[r] >= 0) rows[next[base[d.row_source[r]] + d.row_slot[r]]++] = r;
  }
};

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
                      bool keep_own, MoeCombineHandle* handle) {
  const MoeBuffer& b = *buffer;
  Status bad = CheckCombine(b, dispatch, rows, hidden, dtype, expert_out, weights, weight_rows, weight_cols);
  if (!bad.ok()) {
    Status s = MoeCombineRefuse(buffer, handle);
    return s.ok() ? bad : s;
  }
  CollectiveScope scope;
  MoeCombineHandle& h = *handle;
  h.epoch = A::NextCombine(buffer);
  h.failed = false;
  const int world = A::World(b), me = A::Me(b);
  thread_local RowsBySlot by_slot;
  by_slot.Build(dispatch, world);
  h.own_out = keep_own ? expert_out : nullptr;
  h.own_weights = keep_own ? weights : nullptr;
  if (keep_own) {
    const int64_t first = by_slot.base[me], last = by_slot.base[me + 1];
    h.own_start.assign(by_slot.start.begin() + first, by_slot.start.begin() + last + 1);
    h.own_rows.assign(by_slot.rows.begin() + by_slot.start[first], by_slot.rows.begin() + by_slot.start[last]);
    for (int64_t& v : h.own_start) v -= by_slot.start[first];
  }
  HPSHMEM_RETURN_IF_ERROR(MoeWaitAcks(b, MoeWord::kCombineAck, h.epoch, "MoE combine acknowledgement"));
  const DType dt = A::Config(b).dtype;
  const size_t stride = A::CombineStride(b);
  for (int step = 1; step <= world; ++step) {
    const int s = (me + step) % world;
    const int64_t n = dispatch.received_from[s];
    char* dst_local = A::CombineRow(b, me, 0);
    char* dst = static_cast<char*>(Ptr(dst_local, A::Pe(b, s)));
    char* pack = dst ? dst : A::Staging(b);
    const bool skip = s == me && keep_own;  // summed from expert_out by MoeCombineWait
    if (!skip) {
      WithType(dt, [&](auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        const int64_t* at = &by_slot.start[by_slot.base[s]];
        for (int64_t i = 0; i < n; ++i)
          PartialRow<T>(dispatch, static_cast<const T*>(expert_out), weights, hidden, &by_slot.rows[at[i]],
                        at[i + 1] - at[i], reinterpret_cast<AccOf<T>*>(pack + static_cast<size_t>(i) * stride));
      });
    }
    HPSHMEM_RETURN_IF_ERROR(MoeDeliver(b, s, dst_local, pack, skip ? 0 : static_cast<size_t>(n) * stride,
                                       MoeWord::kCombineCount, (h.epoch << 32) | n));
  }
  return Status::OK();
}

namespace {

template <class T>
void SumTokens(const MoeBuffer& b, const MoeDispatchHandle& d, const MoeCombineHandle& c, T* out) {
  using Acc = AccOf<T>;
  constexpr bool kWide = std::is_same_v<Acc, T>;  // float32/float64: summed straight into out
  const int world = A::World(b), me = A::Me(b);
  const int64_t hidden = A::Config(b).hidden;
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(T);
  std::vector<Acc> acc(kWide ? 0 : hidden), own;
  std::vector<const Acc*> parts(world);
  const T* own_out = static_cast<const T*>(c.own_out);
  for (int64_t t = 0; t < d.tokens; ++t) {
    const int32_t* slot = &d.slot[static_cast<size_t>(t) * world];
    int n = 0;
    for (int r = 0; r < world; ++r) {  // in rank order: the same bits on every run
      if (slot[r] < 0) continue;
      if (r == me && own_out) {
        const int64_t* rows = &c.own_rows[c.own_start[slot[r]]];
        const int64_t m = c.own_start[slot[r] + 1] - c.own_start[slot[r]];
        if (kWide && !c.own_weights && m == 1) {  // a row that is its own partial sum: read in place
          parts[n++] = reinterpret_cast<const Acc*>(own_out + static_cast<size_t>(rows[0]) * hidden);
        } else {
          own.resize(hidden);
          PartialRow<T>(d, own_out, c.own_weights, hidden, rows, m, own.data());
          parts[n++] = own.data();
        }
      } else {
        parts[n++] = reinterpret_cast<const Acc*>(A::CombineRow(b, r, slot[r]));
      }
    }
    T* o = out + static_cast<size_t>(t) * hidden;
    if (n == 0) {
      std::memset(o, 0, row_bytes);  // +0.0 in every float type
      continue;
    }
    if (kWide && n == 1) {
      std::memcpy(o, parts[0], row_bytes);
      continue;
    }
    Acc* a = kWide ? reinterpret_cast<Acc*>(o) : acc.data();
    if (n == 1) {
      for (int64_t i = 0; i < hidden; ++i) o[i] = Narrow<T>(parts[0][i]);
      continue;
    }
    SumInto(a, parts.data(), n, hidden);
    if constexpr (!kWide)
      for (int64_t i = 0; i < hidden; ++i) o[i] = Narrow<T>(a[i]);
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
      SumTokens<T>(b, dispatch, *handle, static_cast<T*>(out));
    });
  }
  handle->own_out = nullptr;  // the caller's expert_out is no longer needed
  handle->own_weights = nullptr;
  Status acked;
  for (int d = 0; d < world; ++d) {
    Status s = MoeSignal(b, MoeWord::kCombineAck, d, handle->epoch);
    if (acked.ok()) acked = s;
  }
  HPSHMEM_RETURN_IF_ERROR(problem);
  return acked;
}

}  // namespace hpshmem::ops
