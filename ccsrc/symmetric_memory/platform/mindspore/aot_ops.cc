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
  static const struct { const char* name; size_t size; } kTable[] = {
      {"bool", 1},    {"int8", 1},    {"uint8", 1},     {"int16", 2},     {"uint16", 2},    {"float16", 2},
      {"bfloat16", 2}, {"int32", 4},   {"uint32", 4},    {"float32", 4},   {"int64", 8},     {"uint64", 8},
      {"float64", 8}, {"complex64", 8}, {"complex128", 16}};
  for (const auto& e : kTable)
    if (std::strcmp(dt, e.name) == 0) return e.size;
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

// Reads the one-element integer tensor params[i] named `name`.
bool Scalar(const Args& a, int i, const char* name, int64_t* out, std::string* why) {
  if (Numel(a, i) != 1) {
    *why = std::string(name) + " must be a one-element integer tensor";
    return false;
  }
  if (std::strcmp(a.dtypes[i], "int64") == 0) {
    *out = *static_cast<const int64_t*>(a.params[i]);
  } else if (std::strcmp(a.dtypes[i], "int32") == 0) {
    *out = *static_cast<const int32_t*>(a.params[i]);
  } else {
    *why = std::string(name) + " must be int32 or int64, got " + a.dtypes[i];
    return false;
  }
  return true;
}

// The element range [offset, offset + size) of tensor `i` in bytes: checks bounds and dtype.
bool Span(const Args& a, int i, const char* name, int64_t offset, int64_t size, size_t itemsize, char** addr,
          std::string* why) {
  int64_t numel = Numel(a, i);
  if (offset < 0 || size < 0 || offset + size > numel) {
    *why = std::string(name) + ": offset + size = " + std::to_string(offset) + " + " + std::to_string(size) +
           " is outside its " + std::to_string(numel) + " elements";
    return false;
  }
  *addr = static_cast<char*>(a.params[i]) + offset * static_cast<int64_t>(itemsize);
  return true;
}

bool SignalWord(const Args& a, int i, int64_t offset, void** word, hpshmem::SignalType* type, std::string* why) {
  const char* dt = a.dtypes[i];
  if (std::strcmp(dt, "int32") == 0) {
    *type = hpshmem::SignalType::kInt32;
  } else if (std::strcmp(dt, "int64") == 0) {
    *type = hpshmem::SignalType::kInt64;
  } else {
    *why = std::string("signal must be int32 or int64, got ") + dt;
    return false;
  }
  char* p = nullptr;
  if (!Span(a, i, "signal", offset, 1, ItemSize(dt), &p, why)) return false;
  *word = p;
  return true;
}

bool Rank(int64_t r, std::string* why) {
  if (r < 0 || r >= hpshmem::NPes()) {
    *why = "target_rank " + std::to_string(r) + " is out of range [0, " + std::to_string(hpshmem::NPes()) + ")";
    return false;
  }
  return true;
}

// The op takes `inputs` tensors (plus its one output) and the runtime is up.
bool Ready(const Args& a, int inputs, std::string* why) {
  if (a.n != inputs + 1) {
    *why = "expects " + std::to_string(inputs) + " inputs and 1 output";
    return false;
  }
  if (!hpshmem::IsInitialized()) {
    *why = "call symm.empty() before running a graph that communicates";
    return false;
  }
  return true;
}

// The copy arguments every data op starts with: target, target_offset, src, src_offset, size.
bool CopyArgs(const Args& a, char** t, const char** s, size_t* bytes, std::string* why) {
  int64_t toff, soff, size;
  if (!Scalar(a, 1, "target_offset", &toff, why) || !Scalar(a, 3, "src_offset", &soff, why) ||
      !Scalar(a, 4, "size", &size, why))
    return false;
  size_t item = ItemSize(a.dtypes[0]);
  if (item == 0 || std::strcmp(a.dtypes[0], a.dtypes[2]) != 0) {
    *why = std::string("target (") + a.dtypes[0] + ") and src (" + a.dtypes[2] + ") must share a dtype";
    return false;
  }
  char* src = nullptr;
  if (!Span(a, 0, "target", toff, size, item, t, why) || !Span(a, 2, "src", soff, size, item, &src, why))
    return false;
  *s = src;
  *bytes = static_cast<size_t>(size) * item;
  return true;
}

bool SignalOpCode(int64_t op, std::string* why) {
  if (op == 0 || op == 1) return true;
  *why = "signal_op " + std::to_string(op) + " is not SET (0) or ADD (1)";
  return false;
}

// The kernel's result: the token (or observed value) on success, the reason on failure.
int Finish(const Args& a, const char* op, const Status& st, int64_t token) {
  if (!st.ok()) return Fail(op, st);
  *static_cast<int64_t*>(a.params[a.n - 1]) = token;
  return 0;
}

// put/get: (local or symmetric) target, target_offset, src, src_offset, size, rank.
int Copy(const Args& a, const char* op, bool put) {
  std::string why;
  char* t = nullptr;
  const char* s = nullptr;
  size_t bytes = 0;
  int64_t rank;
  if (!Ready(a, 6, &why) || !CopyArgs(a, &t, &s, &bytes, &why) || !Scalar(a, 5, "target_rank", &rank, &why) ||
      !Rank(rank, &why))
    return Fail(op, why);
  Status st = put ? hpshmem::ops::PutMem(t, s, bytes, static_cast<int>(rank))
                  : hpshmem::ops::GetMem(t, s, bytes, static_cast<int>(rank));
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

#define HP_MS_KERNEL(name)                                                                                      \
  extern "C" __attribute__((visibility("default"))) int name(int nparam, void** params, int* ndims,            \
                                                             int64_t** shapes, const char** dtypes, void*,    \
                                                             void*)

HP_MS_KERNEL(HpMsPutMem) { return Copy({nparam, params, ndims, shapes, dtypes}, "shmem_put", true); }

HP_MS_KERNEL(HpMsGetMem) { return Copy({nparam, params, ndims, shapes, dtypes}, "shmem_get", false); }

// target, target_offset, src, src_offset, size, signal, signal_offset, signal_value, signal_op, rank.
HP_MS_KERNEL(HpMsPutMemSignal) {
  const char* op = "shmem_put_with_signal";
  Args a{nparam, params, ndims, shapes, dtypes};
  std::string why;
  char* t = nullptr;
  const char* s = nullptr;
  size_t bytes = 0;
  int64_t off, value, sop, rank;
  void* sig = nullptr;
  hpshmem::SignalType type;
  if (!Ready(a, 10, &why) || !Scalar(a, 6, "signal_offset", &off, &why) ||
      !Scalar(a, 7, "signal_value", &value, &why) || !Scalar(a, 8, "signal_op", &sop, &why) ||
      !Scalar(a, 9, "target_rank", &rank, &why) || !Rank(rank, &why) || !SignalOpCode(sop, &why) ||
      !CopyArgs(a, &t, &s, &bytes, &why) || !SignalWord(a, 5, off, &sig, &type, &why))
    return Fail(op, why);
  return Finish(a, op,
                hpshmem::ops::PutMemSignal(t, s, bytes, sig, type, value, static_cast<hpshmem::SignalOp>(sop),
                                           static_cast<int>(rank)),
                1);
}

// signal, signal_offset, signal_value, signal_op, rank.
HP_MS_KERNEL(HpMsSignalOp) {
  const char* op = "shmem_signal_op";
  Args a{nparam, params, ndims, shapes, dtypes};
  std::string why;
  int64_t off, value, sop, rank;
  void* sig = nullptr;
  hpshmem::SignalType type;
  if (!Ready(a, 5, &why) || !Scalar(a, 1, "signal_offset", &off, &why) ||
      !Scalar(a, 2, "signal_value", &value, &why) || !Scalar(a, 3, "signal_op", &sop, &why) ||
      !Scalar(a, 4, "target_rank", &rank, &why) || !Rank(rank, &why) || !SignalWord(a, 0, off, &sig, &type, &why) ||
      !SignalOpCode(sop, &why))
    return Fail(op, why);
  return Finish(a, op,
                hpshmem::ops::SignalOpRemote(sig, type, value, static_cast<hpshmem::SignalOp>(sop),
                                             static_cast<int>(rank)),
                1);
}

// depend_tensor (ordering only), signal, signal_offset, compare_value, compare_op -> observed value.
HP_MS_KERNEL(HpMsSignalWaitUntil) {
  const char* op = "shmem_wait_for_signal";
  Args a{nparam, params, ndims, shapes, dtypes};
  std::string why;
  int64_t off, value, cmp;
  void* sig = nullptr;
  hpshmem::SignalType type;
  if (!Ready(a, 5, &why) || !Scalar(a, 2, "signal_offset", &off, &why) ||
      !Scalar(a, 3, "compare_value", &value, &why) || !Scalar(a, 4, "compare_op", &cmp, &why) ||
      !SignalWord(a, 1, off, &sig, &type, &why))
    return Fail(op, why);
  if (cmp < 0 || cmp > 5) return Fail(op, "compare_op " + std::to_string(cmp) + " is not one of 0=eq .. 5=le");
  std::string label = "signal[" + std::to_string(off) + "]";
  int64_t observed = 0;
  Status st = hpshmem::ops::SignalWaitUntil(sig, type, static_cast<hpshmem::Cmp>(cmp), value, &observed,
                                            label.c_str());
  return Finish(a, op, st, observed);
}

// depend_tensor (ordering only) -> token.
HP_MS_KERNEL(HpMsBarrier) {
  const char* op = "barrier";
  Args a{nparam, params, ndims, shapes, dtypes};
  std::string why;
  if (!Ready(a, 1, &why)) return Fail(op, why);
  return Finish(a, op, hpshmem::Barrier(), 1);
}
