// MindSpore graph-mode kernels: the RFC's primitives as CPU "AOT" custom ops.
//
// MindSpore calls these through ops.Custom("<this .so>:HpMs...", func_type="aot")
// with the real addresses of the op's tensors, also for graph inputs whose
// memory is the symmetric heap (Python cannot run inside a compiled graph,
// so the unified API cannot; these can). They live in the Python extension
// itself, so they share its one initialized runtime: MindSpore dlopen()s the
// already-loaded module and gets the same globals.
//
// Tensor arguments arrive as params[i] with ndims/shapes/dtypes; scalars
// (offsets, sizes, ranks, signal values, op codes) arrive as one-element
// int32/int64 tensors. Units as in the Python API: offsets and sizes in
// ELEMENTS. Every kernel checks everything before touching memory; on a bad
// argument or a runtime error it prints "hyper_parallel: <reason>" to stderr
// and returns non-zero, which MindSpore turns into a RuntimeError. Each
// kernel's one output is an int64[1]: 1 for the data ops (a token to order
// later ops with ops.depend), the observed signal value for the wait.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "hpshmem/hpshmem.h"
#include "ops/checks/request.h"
#include "ops/ops.h"

namespace {

using hpshmem::Status;

struct Args {
  int n;
  void** params;
  int* ndims;
  int64_t** shapes;
  const char** dtypes;
};

int64_t Numel(const Args& a, int i) {
  int64_t n = 1;
  for (int d = 0; d < a.ndims[i]; ++d) n *= a.shapes[i][d];
  return n;
}

// Bytes per element of a MindSpore dtype name ("float32", "bfloat16", "bool", ...); 0 if unknown.
size_t ItemSize(const char* dt) {
  static const struct {
    const char* name;
    size_t size;
  } kTable[] = {{"bool", 1},    {"int8", 1},     {"uint8", 1},   {"int16", 2},     {"uint16", 2},
                {"float16", 2}, {"bfloat16", 2}, {"int32", 4},   {"uint32", 4},    {"float32", 4},
                {"int64", 8},   {"uint64", 8},   {"float64", 8}, {"complex64", 8}, {"complex128", 16}};
  for (const auto& e : kTable)
    if (std::strcmp(dt, e.name) == 0) return e.size;
  return 0;
}

// An identity of a MindSpore dtype name, equal for equal names; 0 if unknown.
intptr_t DtypeId(const char* dt) {
  static const char* const kNames[] = {"bool",    "int8",     "uint8",   "int16",     "uint16",
                                       "float16", "bfloat16", "int32",   "uint32",    "float32",
                                       "int64",   "uint64",   "float64", "complex64", "complex128"};
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i)
    if (std::strcmp(dt, kNames[i]) == 0) return static_cast<intptr_t>(i) + 1;
  return 0;
}

std::mutex g_error_mu;
std::string g_last_error;  // MindSpore's RuntimeError does not carry our reason; Python can ask

int Fail(const char* op, const std::string& why) {
  std::string msg = std::string(op) + ": " + why;
  {
    std::lock_guard<std::mutex> lk(g_error_mu);
    g_last_error = msg;
  }
  std::fprintf(stderr, "hyper_parallel: %s\n", msg.c_str());
  std::fflush(stderr);
  return 1;
}

int Fail(const char* op, const Status& s) { return Fail(op, s.message()); }

// The value rules and their messages are ops/checks (shared with the Python
// API); what is checked here is how the kernel receives its arguments.

// Reads the one-element integer tensor params[i] named `name`.
Status Scalar(const Args& a, int i, const char* name, int64_t* out) {
  if (Numel(a, i) != 1) return Status::InvalidArgument(std::string(name) + " must be a one-element integer tensor");
  if (std::strcmp(a.dtypes[i], "int64") == 0) {
    *out = *static_cast<const int64_t*>(a.params[i]);
  } else if (std::strcmp(a.dtypes[i], "int32") == 0) {
    *out = *static_cast<const int32_t*>(a.params[i]);
  } else {
    return Status::TypeError(std::string(name) + " must be int32 or int64, got " + a.dtypes[i]);
  }
  return Status::OK();
}

// The op takes `inputs` tensors (plus its one output) and the runtime is up.
Status Ready(const Args& a, int inputs) {
  if (a.n != inputs + 1) return Status::InvalidArgument("expects " + std::to_string(inputs) + " inputs and 1 output");
  if (!hpshmem::IsInitialized())
    return Status::NotInitialized("call symm.empty() before running a graph that communicates");
  return Status::OK();
}

// Kernel parameter i as the request builders read a tensor.
hpshmem::ops::TensorArg Tensor(const Args& a, int i) {
  const char* dt = a.dtypes[i];
  int int_width = std::strcmp(dt, "int32") == 0 ? 4 : std::strcmp(dt, "int64") == 0 ? 8 : 0;
  return {reinterpret_cast<uintptr_t>(a.params[i]),
          Numel(a, i),
          static_cast<int>(ItemSize(dt)),
          DtypeId(dt),
          dt,
          int_width};
}

// The copy arguments every data op starts with (target, target_offset, src, src_offset, size) and
// its rank (params[rank_index]), read here and checked by the request builder the Python API uses.
Status CopyArgs(const Args& a, int rank_index, hpshmem::ops::CopyRequest* r) {
  int64_t toff, soff, size, rank;
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, 1, "target_offset", &toff));
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, 3, "src_offset", &soff));
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, 4, "size", &size));
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, rank_index, "target_rank", &rank));
  return hpshmem::ops::BuildCopyRequest(Tensor(a, 0), toff, Tensor(a, 2), soff, size, rank, nullptr, r);
}

// A signal's arguments (signal, signal_offset, signal_value, signal_op from
// params[first]) and its rank (params[rank_index]), read here and checked by
// the request builder the Python API uses.
Status SignalArgs(const Args& a, int first, int rank_index, hpshmem::ops::SignalRequest* q) {
  int64_t off, value, op, rank;
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, first + 1, "signal_offset", &off));
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, first + 2, "signal_value", &value));
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, first + 3, "signal_op", &op));
  HPSHMEM_RETURN_IF_ERROR(Scalar(a, rank_index, "target_rank", &rank));
  return hpshmem::ops::BuildSignalRequest(Tensor(a, first), off, value, op, rank, q);
}

// The kernel's result: the token (or observed value) on success, the reason on failure.
int Finish(const Args& a, const char* op, const Status& st, int64_t token) {
  if (!st.ok()) return Fail(op, st);
  *static_cast<int64_t*>(a.params[a.n - 1]) = token;
  return 0;
}

// Runs `check` (a Status expression); on failure the kernel fails with its message.
#define HP_CHECK(check)                      \
  do {                                       \
    Status _hp_s = (check);                  \
    if (!_hp_s.ok()) return Fail(op, _hp_s); \
  } while (0)

// put/get: (local or symmetric) target, target_offset, src, src_offset, size, rank.
int Copy(const Args& a, const char* op, bool put) {
  hpshmem::ops::CopyRequest r;
  HP_CHECK(Ready(a, 6));
  HP_CHECK(CopyArgs(a, 5, &r));
  auto* dst = reinterpret_cast<void*>(r.dst);
  auto* src = reinterpret_cast<const void*>(r.src);
  Status st = put ? hpshmem::ops::PutMem(dst, src, r.bytes, r.pe) : hpshmem::ops::GetMem(dst, src, r.bytes, r.pe);
  return Finish(a, op, st, 1);
}

}  // namespace

namespace hpshmem::mindspore_graph {
// The reason the last graph-mode kernel failed ("" if none did), for the Python side.
std::string LastError() {
  std::lock_guard<std::mutex> lk(g_error_mu);
  return g_last_error;
}
}  // namespace hpshmem::mindspore_graph

#define HP_MS_KERNEL(name)                                                                                            \
  extern "C" __attribute__((visibility("default"))) int name(int nparam, void** params, int* ndims, int64_t** shapes, \
                                                             const char** dtypes, void*, void*)

HP_MS_KERNEL(HpMsPutMem) { return Copy({nparam, params, ndims, shapes, dtypes}, "shmem_put", true); }

HP_MS_KERNEL(HpMsGetMem) { return Copy({nparam, params, ndims, shapes, dtypes}, "shmem_get", false); }

// target, target_offset, src, src_offset, size, signal, signal_offset, signal_value, signal_op, rank.
HP_MS_KERNEL(HpMsPutMemSignal) {
  const char* op = "shmem_put_with_signal";
  Args a{nparam, params, ndims, shapes, dtypes};
  hpshmem::ops::CopyRequest r;
  hpshmem::ops::SignalRequest q;
  HP_CHECK(Ready(a, 10));
  HP_CHECK(CopyArgs(a, 9, &r));
  HP_CHECK(SignalArgs(a, 5, 9, &q));
  return Finish(
      a, op,
      hpshmem::ops::PutMemSignal(reinterpret_cast<void*>(r.dst), reinterpret_cast<const void*>(r.src), r.bytes,
                                 reinterpret_cast<void*>(q.word.addr), q.word.type, q.value, q.op, r.pe),
      1);
}

// signal, signal_offset, signal_value, signal_op, rank.
HP_MS_KERNEL(HpMsSignalOp) {
  const char* op = "shmem_signal_op";
  Args a{nparam, params, ndims, shapes, dtypes};
  hpshmem::ops::SignalRequest q;
  HP_CHECK(Ready(a, 5));
  HP_CHECK(SignalArgs(a, 0, 4, &q));
  return Finish(
      a, op, hpshmem::ops::SignalOpRemote(reinterpret_cast<void*>(q.word.addr), q.word.type, q.value, q.op, q.pe), 1);
}

// depend_tensor (ordering only), signal, signal_offset, compare_value, compare_op -> observed value.
HP_MS_KERNEL(HpMsSignalWaitUntil) {
  const char* op = "shmem_wait_for_signal";
  Args a{nparam, params, ndims, shapes, dtypes};
  int64_t off, value, cmp;
  hpshmem::ops::WaitRequest q;
  HP_CHECK(Ready(a, 5));
  HP_CHECK(Scalar(a, 2, "signal_offset", &off));
  HP_CHECK(Scalar(a, 3, "compare_value", &value));
  HP_CHECK(Scalar(a, 4, "compare_op", &cmp));
  HP_CHECK(hpshmem::ops::BuildWaitRequest(Tensor(a, 1), off, value, cmp, &q));
  std::string label = "signal[" + std::to_string(off) + "]";
  int64_t observed = 0;
  Status st = hpshmem::ops::SignalWaitUntil(reinterpret_cast<void*>(q.word.addr), q.word.type, q.cmp, q.value,
                                            &observed, label.c_str());
  return Finish(a, op, st, observed);
}

// depend_tensor (ordering only) -> token.
HP_MS_KERNEL(HpMsBarrier) {
  const char* op = "barrier";
  Args a{nparam, params, ndims, shapes, dtypes};
  HP_CHECK(Ready(a, 1));
  return Finish(a, op, hpshmem::Barrier(), 1);
}
