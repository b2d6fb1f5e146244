// The one-sided calls of the Python API in one crossing: the checks of
// hyper_parallel/core/symmetric_memory for the common case (exact ints, dense
// CPU tensors of the framework in use, symmetric tensors inside a live
// allocation), then the runtime call.
//
// Each function returns True when it did the call, False when it declined:
// for anything it does not recognise (an int-like object, a string op it does
// not know, an empty tensor) and for anything invalid. The Python path then
// checks again and raises the documented error, so every message has one home
// and the fast path never accepts what the Python path would refuse. Runtime
// failures of the call itself (peer dead, timeout) raise here as there.
//
// Tensors are read by the framework's tensor reader when it has one (torch:
// a small module built against torch, tensor_view.h), else through the
// framework's own Python methods (data_ptr, numel, dtype, ...) from C. This
// module is linked against no framework; the adapter says which tensor type,
// dtypes and reader to use.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "fast_path.h"
#include "hpshmem/hpshmem.h"
#include "ops/checks/checks.h"
#include "ops/checks/request.h"
#include "ops/ops.h"
#include "platform/tensor_view.h"

namespace nb = nanobind;
using hpshmem::Status;

namespace hpshmem_python {
namespace {

enum class Kind { kNone, kTorch, kMindSpore };

struct Framework {
  Kind kind = Kind::kNone;
  PyObject* tensor_type = nullptr;                // strong reference, kept for the process
  std::vector<std::pair<PyObject*, int>> dtypes;  // dtype object -> itemsize (strong references)
  HpDescribeTensor reader = nullptr;              // the framework's tensor reader, if any
  // Without a reader: the names read (the adapter may name faster equivalents of the public ones).
  PyObject *dtype_attr = nullptr, *numel_attr = nullptr, *data_ptr_method = nullptr;
  bool numel_is_method = false;
  // Dtype identities as Describe reports them: the reader's codes, or the dtype objects' addresses.
  intptr_t int32 = 0, int64 = 0;
};
Framework g_fw;
// Dtype identity (as Describe reports it) -> the runtime's reduce dtype code.
std::vector<std::pair<intptr_t, int>> g_reduce_codes;

int ReduceDtype(intptr_t dtype) {
  for (auto [id, code] : g_reduce_codes)
    if (id == dtype) return code;
  return -1;
}

// Interned attribute names, made once.
PyObject *s_is_contiguous, *s_is_cpu, *s_device;

// dtype: equal for equal dtypes (see Framework::int32); no name (the fast path never prints one).
using Tensor = hpshmem::ops::TensorArg;

// Holds a new reference; Release() on scope exit.
struct Ref {
  PyObject* p;
  explicit Ref(PyObject* o) : p(o) {}
  ~Ref() { Py_XDECREF(p); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
};

bool Declined() {
  PyErr_Clear();
  return false;
}

// A dense, contiguous, non-empty CPU tensor of the registered framework.
bool Describe(PyObject* t, Tensor* out) {
  if (g_fw.reader) {
    HpTensorView v;
    if (!g_fw.reader(t, &v)) return false;
    out->addr = v.addr;
    out->numel = v.numel;
    out->itemsize = v.itemsize;
    out->dtype = v.dtype;
    return true;
  }
  if (!g_fw.tensor_type || !PyObject_TypeCheck(t, reinterpret_cast<PyTypeObject*>(g_fw.tensor_type))) return false;
  Ref dtype(PyObject_GetAttr(t, g_fw.dtype_attr));
  if (!dtype.p) return Declined();
  out->itemsize = 0;
  for (auto& [d, size] : g_fw.dtypes)
    if (d == dtype.p) out->itemsize = size;
  if (!out->itemsize) return false;
  out->dtype = reinterpret_cast<intptr_t>(dtype.p);  // the framework's dtype singletons outlive every call
  Ref numel(g_fw.numel_is_method ? PyObject_CallMethodNoArgs(t, g_fw.numel_attr)
                                 : PyObject_GetAttr(t, g_fw.numel_attr));
  if (!numel.p || !PyLong_CheckExact(numel.p)) return Declined();
  out->numel = PyLong_AsLongLong(numel.p);
  if (out->numel <= 0) return Declined();  // empty tensors: the Python path finds their place in the storage
  if (g_fw.kind == Kind::kTorch) {
    Ref cpu(PyObject_GetAttr(t, s_is_cpu));  // false for meta tensors too
    if (cpu.p != Py_True) return Declined();
  } else {
    Ref dev(PyObject_GetAttr(t, s_device));
    if (!dev.p || !PyUnicode_Check(dev.p) || PyUnicode_CompareWithASCIIString(dev.p, "CPU") != 0) return Declined();
  }
  Ref contiguous(PyObject_CallMethodNoArgs(t, s_is_contiguous));  // raises for sparse layouts: declined
  if (contiguous.p != Py_True) return Declined();
  Ref ptr(PyObject_CallMethodNoArgs(t, g_fw.data_ptr_method));
  if (!ptr.p || !PyLong_Check(ptr.p)) return Declined();
  out->addr = PyLong_AsUnsignedLongLong(ptr.p);
  if (PyErr_Occurred() || !out->addr) return Declined();
  return true;
}

bool Symmetric(const Tensor& t) {
  return hpshmem::InLiveAllocation(reinterpret_cast<void*>(t.addr),
                                   static_cast<size_t>(t.numel) * static_cast<size_t>(t.itemsize));
}

// A Python int or int subclass such as SignalOp (not bool, not an int-like
// object: those the Python path converts) that fits int64.
bool Int(PyObject* o, int64_t* v) {
  if (!PyLong_Check(o) || PyBool_Check(o)) return false;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || (x == -1 && PyErr_Occurred())) return Declined();
  *v = x;
  return true;
}

// The value rules are ops/checks and the request builders (request.h): on a
// violation the fast path declines and the Python path, calling the same
// builder, raises its message.

bool BlockDim(PyObject* o, int* bd) {
  if (o == Py_None) {
    *bd = 0;
    return true;
  }
  int64_t v;
  if (!Int(o, &v) || !hpshmem::ops::CheckBlockDim(v).ok()) return false;
  *bd = static_cast<int>(v);
  return true;
}

// A symmetric tensor, with the width the signal builder asks for.
bool SignalTensor(PyObject* sig, Tensor* s) {
  if (!Describe(sig, s) || !Symmetric(*s)) return false;
  s->int_width = s->dtype == g_fw.int32 ? 4 : s->dtype == g_fw.int64 ? 8 : 0;
  return true;
}

// 0/1 or the names the Python path accepts most often (the code is the
// builder's to check); anything else is the Python path's to judge.
bool SignalOpCode(PyObject* o, int64_t* op) {
  if (!PyUnicode_Check(o)) return Int(o, op);
  if (!PyUnicode_CompareWithASCIIString(o, "set") || !PyUnicode_CompareWithASCIIString(o, "SET"))
    *op = 0;
  else if (!PyUnicode_CompareWithASCIIString(o, "add") || !PyUnicode_CompareWithASCIIString(o, "ADD"))
    *op = 1;
  else
    return false;
  return true;
}

bool CompareOpCode(PyObject* o, int64_t* cmp) {
  static const char* kNames[] = {"eq", "gt", "lt", "ne", "ge", "le"};
  if (!PyUnicode_Check(o)) return Int(o, cmp);
  for (int i = 0; i < 6; ++i)
    if (!PyUnicode_CompareWithASCIIString(o, kNames[i])) {
      *cmp = i;
      return true;
    }
  return false;
}

// Small copies to a rank that shares memory are a memcpy: cheaper with the GIL
// held than the release and re-acquire. Anything that may block releases it.
constexpr size_t kGilHeldBytes = 64 * 1024;

template <class F>
void Run(bool keep_gil, F&& f) {
  Status s;
  if (keep_gil) {
    s = f();
  } else {
    nb::gil_scoped_release release;
    s = f();
  }
  if (!s.ok()) RaiseStatus(s);
}

using CopyArgs = hpshmem::ops::CopyRequest;

// put (target symmetric) or get (source symmetric): the arguments read, then the request builder's checks.
bool CopyCheck(bool put, PyObject* target, PyObject* toff, PyObject* src, PyObject* soff, PyObject* size,
               PyObject* rank, PyObject* block_dim, CopyArgs* a) {
  Tensor t, s;
  int64_t to, so, n, r, bd;
  if (!Describe(target, &t) || !Describe(src, &s) || !Int(toff, &to) || !Int(soff, &so) || !Int(size, &n) ||
      !Int(rank, &r) || (block_dim != Py_None && !Int(block_dim, &bd)))
    return false;
  return hpshmem::ops::BuildCopyRequest(t, to, s, so, n, r, block_dim == Py_None ? nullptr : &bd, a).ok() &&
         Symmetric(put ? t : s);
}

// The reduce ops and algorithms by the names the Python path accepts; anything else is its to judge.
bool ReduceOpArg(PyObject* o, int* op) {
  static const char* kNames[] = {"sum", "avg", "max", "min", "prod"};
  if (!PyUnicode_Check(o)) return false;
  for (int i = 0; i < 5; ++i)
    if (!PyUnicode_CompareWithASCIIString(o, kNames[i])) {
      *op = i;
      return true;
    }
  return false;
}

bool AlgorithmArg(PyObject* o, int* algorithm) {
  if (o == Py_None)
    *algorithm = 0;
  else if (PyUnicode_Check(o) && !PyUnicode_CompareWithASCIIString(o, "one_shot"))
    *algorithm = 1;
  else if (PyUnicode_Check(o) && !PyUnicode_CompareWithASCIIString(o, "two_shot"))
    *algorithm = 2;
  else
    return false;
  return true;
}

// "push" or "pull" (the only modes); *pull receives which.
bool Mode(PyObject* o, bool* pull) {
  if (!PyUnicode_Check(o)) return false;
  if (!PyUnicode_CompareWithASCIIString(o, "push"))
    *pull = false;
  else if (!PyUnicode_CompareWithASCIIString(o, "pull"))
    *pull = true;
  else
    return false;
  return true;
}

}  // namespace

void RegisterFastPath(nb::module_& m) {
  s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
  s_is_cpu = PyUnicode_InternFromString("is_cpu");
  s_device = PyUnicode_InternFromString("device");

  m.def(
      "fast_register",
      [](const std::string& kind, nb::handle tensor_type, nb::dict dtypes, nb::handle int32, nb::handle int64,
         nb::handle reader, nb::handle names) {
        Framework f;
        if (kind == "torch")
          f.kind = Kind::kTorch;
        else if (kind == "mindspore")
          f.kind = Kind::kMindSpore;
        else
          throw nb::value_error("fast_register: kind must be 'torch' or 'mindspore'");
        const bool torch = f.kind == Kind::kTorch;
        auto name = [&](const char* key, const char* def) {
          PyObject* n = names.is_none() ? nullptr : PyDict_GetItemString(names.ptr(), key);
          if (!n) return PyUnicode_InternFromString(def);
          Py_INCREF(n);
          return n;
        };
        f.dtype_attr = name("dtype", "dtype");
        f.numel_attr = name("numel", torch ? "numel" : "size");
        f.numel_is_method = torch;
        f.data_ptr_method = name("data_ptr", "data_ptr");
        f.tensor_type = tensor_type.inc_ref().ptr();
        for (auto [d, size] : dtypes) f.dtypes.emplace_back(d.inc_ref().ptr(), nb::cast<int>(size));
        if (reader.is_none()) {
          f.int32 = reinterpret_cast<intptr_t>(int32.inc_ref().ptr());
          f.int64 = reinterpret_cast<intptr_t>(int64.inc_ref().ptr());
        } else {
          void* fn = PyCapsule_GetPointer(reader.ptr(), HP_TENSOR_READER_CAPSULE);
          if (!fn) throw nb::python_error();
          f.reader = reinterpret_cast<HpDescribeTensor>(fn);
          f.int32 = nb::cast<intptr_t>(int32);  // the reader's codes
          f.int64 = nb::cast<intptr_t>(int64);
        }
        g_fw = std::move(f);  // registered once per process; the old references are kept (a few objects)
      },
      nb::arg("kind"), nb::arg("tensor_type"), nb::arg("dtypes"), nb::arg("int32"), nb::arg("int64"),
      nb::arg("reader").none() = nb::none(), nb::arg("names").none() = nb::none(),
      "Which tensors the fast path reads: the framework's tensor type, {dtype object: itemsize in bytes}, and "
      "optionally a tensor reader capsule (tensor_view.h), with int32/int64 then given as the reader's codes, or "
      "else {'dtype', 'numel', 'data_ptr': attribute names} to read instead of the public ones.");

  // put and get differ only in which side is symmetric and in the runtime call.
  auto copy = [](bool put) {
    return [put](nb::handle target, nb::handle toff, nb::handle src, nb::handle soff, nb::handle size, nb::handle rank,
                 nb::handle block_dim) {
      CopyArgs a;
      if (!CopyCheck(put, target.ptr(), toff.ptr(), src.ptr(), soff.ptr(), size.ptr(), rank.ptr(), block_dim.ptr(), &a))
        return false;
      Run(a.bytes <= kGilHeldBytes && hpshmem::DirectlyReachable(a.pe), [&] {
        auto* dst = reinterpret_cast<void*>(a.dst);
        auto* from = reinterpret_cast<const void*>(a.src);
        return put ? hpshmem::ops::PutMem(dst, from, a.bytes, a.pe, a.block_dim)
                   : hpshmem::ops::GetMem(dst, from, a.bytes, a.pe, a.block_dim);
      });
      return true;
    };
  };
  m.def("fast_put", copy(true), nb::arg("target").none(), nb::arg("target_offset").none(), nb::arg("src").none(),
        nb::arg("src_offset").none(), nb::arg("size").none(), nb::arg("target_rank").none(),
        nb::arg("block_dim").none() = nb::none(),
        "shmem_put's arguments; True when done, False when the Python path must check them (sizes in elements).");
  m.def("fast_get", copy(false), nb::arg("target").none(), nb::arg("target_offset").none(), nb::arg("src").none(),
        nb::arg("src_offset").none(), nb::arg("size").none(), nb::arg("target_rank").none(),
        nb::arg("block_dim").none() = nb::none(),
        "shmem_get's arguments; True when done, False when the Python path must check them.");

  m.def(
      "fast_put_signal",
      [](nb::handle target, nb::handle toff, nb::handle src, nb::handle soff, nb::handle size, nb::handle sig,
         nb::handle sig_off, nb::handle value, nb::handle op, nb::handle rank, nb::handle block_dim) {
        CopyArgs a;
        Tensor s;
        int64_t off, v, code;
        hpshmem::ops::SignalRequest q;
        if (!CopyCheck(true, target.ptr(), toff.ptr(), src.ptr(), soff.ptr(), size.ptr(), rank.ptr(), block_dim.ptr(),
                       &a) ||
            !SignalTensor(sig.ptr(), &s) || !Int(sig_off.ptr(), &off) || !Int(value.ptr(), &v) ||
            !SignalOpCode(op.ptr(), &code) || !hpshmem::ops::BuildSignalRequest(s, off, v, code, a.pe, &q).ok())
          return false;
        Run(a.bytes <= kGilHeldBytes && hpshmem::DirectlyReachable(a.pe), [&] {
          return hpshmem::ops::PutMemSignal(reinterpret_cast<void*>(a.dst), reinterpret_cast<const void*>(a.src),
                                            a.bytes, reinterpret_cast<void*>(q.word.addr), q.word.type, q.value, q.op,
                                            a.pe, a.block_dim);
        });
        return true;
      },
      nb::arg("target").none(), nb::arg("target_offset").none(), nb::arg("src").none(), nb::arg("src_offset").none(),
      nb::arg("size").none(), nb::arg("signal").none(), nb::arg("signal_offset").none(), nb::arg("signal_value").none(),
      nb::arg("signal_op").none(), nb::arg("target_rank").none(), nb::arg("block_dim").none() = nb::none(),
      "shmem_put_with_signal's arguments; True when done, False when the Python path must check them.");

  m.def(
      "fast_signal",
      [](nb::handle sig, nb::handle sig_off, nb::handle value, nb::handle op, nb::handle rank) {
        Tensor s;
        int64_t off, v, code, r;
        hpshmem::ops::SignalRequest q;
        if (!SignalTensor(sig.ptr(), &s) || !Int(sig_off.ptr(), &off) || !Int(value.ptr(), &v) ||
            !SignalOpCode(op.ptr(), &code) || !Int(rank.ptr(), &r) ||
            !hpshmem::ops::BuildSignalRequest(s, off, v, code, r, &q).ok())
          return false;
        Run(hpshmem::DirectlyReachable(q.pe), [&] {
          return hpshmem::ops::SignalOpRemote(reinterpret_cast<void*>(q.word.addr), q.word.type, q.value, q.op, q.pe);
        });
        return true;
      },
      nb::arg("signal").none(), nb::arg("signal_offset").none(), nb::arg("signal_value").none(),
      nb::arg("signal_op").none(), nb::arg("target_rank").none(),
      "shmem_signal_op's arguments; True when done, False when the Python path must check them.");

  m.def(
      "fast_register_reduce",
      [](nb::list pairs) {
        std::vector<std::pair<intptr_t, int>> codes;
        for (nb::handle pair : pairs) {
          nb::handle id = pair[0];
          // The reader's integer codes, or the dtype objects themselves (kept alive: compared by address).
          intptr_t key = g_fw.reader ? nb::cast<intptr_t>(id) : reinterpret_cast<intptr_t>(id.inc_ref().ptr());
          codes.emplace_back(key, nb::cast<int>(pair[1]));
        }
        g_reduce_codes = std::move(codes);
      },
      nb::arg("pairs"), "[(dtype identity as the fast path reads it, reduce dtype code)], after fast_register.");

  m.def(
      "fast_allreduce",
      [](nb::handle tensor, nb::handle op, nb::handle algorithm) {
        Tensor t;
        int code, op_code, algo;
        if (!Describe(tensor.ptr(), &t) || !Symmetric(t) || (code = ReduceDtype(t.dtype)) < 0 ||
            !ReduceOpArg(op.ptr(), &op_code) || !AlgorithmArg(algorithm.ptr(), &algo))
          return false;
        Run(false, [&] {
          return hpshmem::ops::Allreduce(
              reinterpret_cast<void*>(t.addr), static_cast<size_t>(t.numel), static_cast<hpshmem::ops::DType>(code),
              static_cast<hpshmem::ops::ReduceOp>(op_code), static_cast<hpshmem::ops::AllreduceAlgorithm>(algo));
        });
        return true;
      },
      nb::arg("tensor").none(), nb::arg("op").none(), nb::arg("algorithm").none(),
      "shmem_allreduce's arguments; True when done, False when the Python path must check them.");

  m.def(
      "fast_reduce_scatter",
      [](nb::handle output, nb::handle input, nb::handle op) {
        Tensor o, i;
        int code, op_code;
        hpshmem::ops::PartsRequest q;
        if (!Describe(output.ptr(), &o) || !Describe(input.ptr(), &i) ||
            !hpshmem::ops::BuildPartsRequest(i, "input", o, "output", false, hpshmem::NPes(), &q).ok() ||
            !Symmetric(i) || (code = ReduceDtype(i.dtype)) < 0 || !ReduceOpArg(op.ptr(), &op_code))
          return false;
        Run(false, [&] {
          return hpshmem::ops::ReduceScatter(reinterpret_cast<void*>(q.part), reinterpret_cast<const void*>(q.whole),
                                             static_cast<size_t>(q.part_numel), static_cast<hpshmem::ops::DType>(code),
                                             static_cast<hpshmem::ops::ReduceOp>(op_code));
        });
        return true;
      },
      nb::arg("output").none(), nb::arg("input").none(), nb::arg("op").none(),
      "shmem_reduce_scatter's arguments; True when done, False when the Python path must check them.");

  m.def(
      "fast_broadcast",
      [](nb::handle tensor, nb::handle root) {
        Tensor t;
        int64_t r;
        if (!Describe(tensor.ptr(), &t) || !Symmetric(t) || !Int(root.ptr(), &r) || r < 0 || r >= hpshmem::NPes())
          return false;
        Run(false, [&] {
          return hpshmem::ops::Broadcast(reinterpret_cast<void*>(t.addr),
                                         static_cast<size_t>(t.numel) * static_cast<size_t>(t.itemsize),
                                         static_cast<int>(r));
        });
        return true;
      },
      nb::arg("tensor").none(), nb::arg("root").none(),
      "shmem_broadcast's arguments; True when done, False when the Python path must check them.");

  m.def(
      "fast_allgather",
      [](nb::handle output, nb::handle input, nb::handle mode, nb::handle block_dim) {
        Tensor o, i;
        bool pull;
        int bd;
        hpshmem::ops::PartsRequest q;
        if (!Describe(output.ptr(), &o) || !Describe(input.ptr(), &i) ||
            !hpshmem::ops::BuildPartsRequest(o, "output_tensor", i, "input_tensor", true, hpshmem::NPes(), &q).ok() ||
            !Symmetric(o) || !Mode(mode.ptr(), &pull) || !BlockDim(block_dim.ptr(), &bd))
          return false;
        Run(false, [&] {
          return hpshmem::ops::Allgather(reinterpret_cast<void*>(q.whole), reinterpret_cast<const void*>(q.part),
                                         q.part_bytes, pull, bd);
        });
        return true;
      },
      nb::arg("output_tensor").none(), nb::arg("input_tensor").none(), nb::arg("mode").none(),
      nb::arg("block_dim").none() = nb::none(),
      "shmem_allgather's arguments; True when done, False when the Python path must check them.");

  m.def(
      "fast_alltoall",
      [](nb::handle sends, nb::handle receive, nb::handle counts, nb::handle mode, nb::handle block_dim) {
        Tensor r;
        bool pull;
        int bd;
        const int w = hpshmem::NPes();
        if (w <= 0 || w > 64 || !PyList_CheckExact(sends.ptr()) || PyList_GET_SIZE(sends.ptr()) != w ||
            !PyList_CheckExact(counts.ptr()) || PyList_GET_SIZE(counts.ptr()) != w || !Describe(receive.ptr(), &r) ||
            !Symmetric(r) || !Mode(mode.ptr(), &pull) || !BlockDim(block_dim.ptr(), &bd))
          return false;
        Tensor s[64];
        int64_t recv_elems[64];
        for (int p = 0; p < w; ++p) {
          if (!Describe(PyList_GET_ITEM(sends.ptr(), p), &s[p]) || (pull && !Symmetric(s[p])) ||
              !Int(PyList_GET_ITEM(counts.ptr(), p), &recv_elems[p]))
            return false;
        }
        const void* ptrs[64];
        int64_t send_elems[64];
        if (!hpshmem::ops::BuildAlltoallRequest(r, s, recv_elems, w, ptrs, send_elems).ok()) return false;
        Run(false, [&] {
          return hpshmem::ops::Alltoall(ptrs, send_elems, reinterpret_cast<void*>(r.addr), recv_elems,
                                        static_cast<size_t>(r.itemsize), pull, bd);
        });
        return true;
      },
      nb::arg("send_tensor_list").none(), nb::arg("receive_tensor").none(), nb::arg("receive_list").none(),
      nb::arg("mode").none(), nb::arg("block_dim").none() = nb::none(),
      "shmem_alltoall's arguments (lists only); True when done, False when the Python path must check them.");

  m.def(
      "fast_wait",
      [](nb::handle depend, nb::handle sig, nb::handle sig_off, nb::handle value, nb::handle cmp) -> nb::object {
        if (!g_fw.tensor_type ||
            (!depend.is_none() && !PyObject_TypeCheck(depend.ptr(), reinterpret_cast<PyTypeObject*>(g_fw.tensor_type))))
          return nb::none();
        Tensor s;
        int64_t off, v, code, seen = 0;
        hpshmem::ops::WaitRequest q;
        if (!SignalTensor(sig.ptr(), &s) || !Int(sig_off.ptr(), &off) || !Int(value.ptr(), &v) ||
            !CompareOpCode(cmp.ptr(), &code) || !hpshmem::ops::BuildWaitRequest(s, off, v, code, &q).ok())
          return nb::none();
        auto* word = reinterpret_cast<void*>(q.word.addr);
        // A condition that already holds needs no wait: test it once with the GIL held.
        int64_t now = 0;
        if (hpshmem::SignalFetch(word, q.word.type, &now).ok() && hpshmem::CmpHolds(now, q.cmp, q.value)) {
          return nb::int_(now);
        }
        char label[32];
        std::snprintf(label, sizeof label, "signal[%lld]", static_cast<long long>(q.word.offset));
        Run(false, [&] { return hpshmem::ops::SignalWaitUntil(word, q.word.type, q.cmp, q.value, &seen, label); });
        return nb::int_(seen);
      },
      nb::arg("depend_tensor").none(), nb::arg("signal").none(), nb::arg("signal_offset").none(),
      nb::arg("compare_value").none(), nb::arg("compare_op").none(),
      "shmem_wait_for_signal's arguments; the value observed, or None when the Python path must check them.");
}

}  // namespace hpshmem_python
