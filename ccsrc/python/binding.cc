// The one binding module: integers (addresses, byte counts, ranks) in,
// Python ints/bytes/str out. Framework tensors cross only into the fast path
// (fast_path.cc), which reads them through their own Python methods; every
// other function takes the addresses the adapters computed.
//
// Every call that copies, waits or takes part in a collective releases the
// GIL, so a Python thread blocked in a wait never stalls another thread that
// is about to signal it. Each runtime Code maps to one exception class,
// created here (the lowest layer that can name the cause).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <vector>

#include "fast_path.h"
#include "hpshmem/hpshmem.h"
#include "ops/checks/checks.h"
#include "ops/checks/request.h"
#include "ops/ops.h"

namespace hpshmem::mindspore_graph {
std::string LastError();  // ccsrc/symmetric_memory/platform/mindspore/aot_ops.cc
}

namespace nb = nanobind;
using hpshmem::Code;
using hpshmem::Status;

namespace {

PyObject* g_errors[16] = {};

PyObject* MakeError(nb::module_& m, const char* name, PyObject* base, PyObject* extra_base, const char* doc) {
  PyObject* bases = extra_base ? PyTuple_Pack(2, base, extra_base) : PyTuple_Pack(1, base);
  std::string qual = std::string("hyper_parallel._hpshmem.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases, nullptr);
  Py_DECREF(bases);
  m.attr(name) = nb::handle(cls);
  return cls;
}

void RegisterErrors(nb::module_& m) {
  PyObject* base = MakeError(m, "ShmemError", PyExc_RuntimeError, nullptr,
                             "Base of every runtime error; .code is the runtime's code name.");
  g_errors[0] = base;
  struct Spec {
    Code code;
    const char* name;
    PyObject* extra;
    const char* doc;
  };
  const Spec specs[] = {
      {Code::kInvalidArgument, "ShmemValueError", PyExc_ValueError, "An argument is out of range or malformed."},
      {Code::kTypeError, "ShmemTypeError", PyExc_TypeError, "An argument has the wrong kind (dtype, width)."},
      {Code::kNotInitialized, "NotInitializedError", nullptr, "Called before init or after finalize."},
      {Code::kTimeout, "ShmemTimeoutError", PyExc_TimeoutError, "A wait or barrier passed its deadline."},
      {Code::kPeerDead, "PeerDeadError", nullptr, "A peer process exited or was killed."},
      {Code::kOutOfMemory, "HeapExhaustedError", PyExc_MemoryError, "The symmetric heap is exhausted."},
      {Code::kInvalidFree, "InvalidFreeError", nullptr, "Double free or a pointer the heap never gave out."},
      {Code::kCollectiveMismatch, "CollectiveMismatchError", nullptr, "Ranks disagree on a collective call."},
      {Code::kBootstrap, "BootstrapError", nullptr, "Rendezvous or authentication failed."},
      {Code::kSystem, "ShmemSystemError", PyExc_OSError, "An operating-system call failed."},
      {Code::kUnsupported, "ShmemUnsupportedError", PyExc_NotImplementedError, "Valid, but this build cannot do it."},
      {Code::kInternal, "ShmemInternalError", nullptr, "A bug in the runtime."},
  };
  for (const Spec& s : specs) g_errors[static_cast<int>(s.code)] = MakeError(m, s.name, base, s.extra, s.doc);
}

[[noreturn]] void Raise(const Status& s) {
  PyObject* cls = g_errors[static_cast<int>(s.code())];
  if (!cls) cls = g_errors[0];
  PyObject* exc = PyObject_CallFunction(cls, "s", s.message().c_str());
  if (exc) {
    PyObject* code = PyUnicode_FromString(hpshmem::CodeName(s.code()));
    PyObject_SetAttrString(exc, "code", code);
    Py_DECREF(code);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
  }
  throw nb::python_error();
}

inline void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

// Runs `f` (returning Status) without the GIL, then raises on error.
template <class F>
void NoGil(F&& f) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = f();
  }
  Check(s);
}

inline void* P(uintptr_t a) { return reinterpret_cast<void*>(a); }

// A collective's result copied from its symmetric buffer to `out` (an address; 0: nowhere), so a
// front end staging a user's tensor through the heap pays one crossing, not three.
Status CopyOut(uintptr_t out, uintptr_t data, size_t bytes) {
  if (out && out != data && bytes) std::memcpy(P(out), P(data), bytes);
  return Status::OK();
}

hpshmem::SignalType Width(int bytes) {
  if (bytes == 4) return hpshmem::SignalType::kInt32;
  if (bytes == 8) return hpshmem::SignalType::kInt64;
  Raise(Status::TypeError("signal width must be 4 (int32) or 8 (int64) bytes, got " + std::to_string(bytes)));
}

}  // namespace

namespace hpshmem_python {
void RaiseStatus(const Status& s) { Raise(s); }
}  // namespace hpshmem_python

NB_MODULE(_hpshmem, m) {
  m.doc() = "libhpshmem binding: addresses and byte counts in; see hyper_parallel.core.symmetric_memory.";
  // A MoE handle held by an autograd graph that is still alive when the interpreter exits (a
  // module-level result) is never released: torch's C++ graph nodes are not torn down with the
  // interpreter. nanobind would report it (and every type) as leaked on every such exit.
  nb::set_leak_warnings(false);
  RegisterErrors(m);
  hpshmem_python::RegisterFastPath(m);

  m.def(
      "get_unique_id",
      [](const std::string& host) {
        hpshmem::UniqueId id;
        Check(hpshmem::GetUniqueId(&id, host));
        return nb::bytes(reinterpret_cast<const char*>(id.bytes), hpshmem::kUniqueIdBytes);
      },
      nb::arg("host") = "", "Opens rank 0's bootstrap listener here; returns the 128-byte unique id.");

  m.def(
      "local_address_toward",
      [](const std::string& host) {
        std::string out;
        Check(hpshmem::LocalAddressToward(host, &out));
        return out;
      },
      nb::arg("host"), "This host's address on the route toward `host` (nothing is sent).");

  m.def(
      "init",
      [](int rank, int nranks, nb::object unique_id, const std::string& endpoint, size_t heap_bytes, double timeout_sec,
         int block_dim) {
        hpshmem::InitAttr a;
        hpshmem::UniqueId id;
        a.rank = rank;
        a.nranks = nranks;
        if (!unique_id.is_none()) {
          nb::bytes b = nb::cast<nb::bytes>(unique_id);
          if (b.size() != hpshmem::kUniqueIdBytes)
            Raise(Status::InvalidArgument("unique id must be " + std::to_string(hpshmem::kUniqueIdBytes) + " bytes"));
          std::memcpy(id.bytes, b.c_str(), hpshmem::kUniqueIdBytes);
          a.unique_id = &id;
        }
        a.endpoint = endpoint;
        a.heap_bytes = heap_bytes;
        a.timeout_sec = timeout_sec;
        a.block_dim = block_dim;
        NoGil([&] { return hpshmem::Init(a); });
      },
      nb::arg("rank"), nb::arg("nranks"), nb::arg("unique_id") = nb::none(), nb::arg("endpoint") = "",
      nb::arg("heap_bytes") = 0, nb::arg("timeout_sec") = 0.0, nb::arg("block_dim") = 0);

  m.def("finalize", [] { NoGil([] { return hpshmem::Finalize(); }); });
  m.def("is_initialized", &hpshmem::IsInitialized);
  m.def("my_pe", &hpshmem::MyPe);
  m.def("n_pes", &hpshmem::NPes);

  m.def(
      "malloc",
      [](size_t bytes, size_t alignment) {
        void* p = nullptr;
        NoGil([&] { return hpshmem::AlignedAlloc(alignment, bytes, &p); });
        return reinterpret_cast<uintptr_t>(p);
      },
      nb::arg("bytes"), nb::arg("alignment") = 64, "Collective; returns the local address.");
  m.def("free", [](uintptr_t addr) { NoGil([&] { return hpshmem::Free(P(addr)); }); });
  m.def(
      "free_deferred",
      [](uintptr_t addr) {
        uint64_t token = 0;
        NoGil([&] { return hpshmem::FreeDeferred(P(addr), &token); });
        return token;
      },
      "Collective free whose bytes stay out of the heap until every rank calls release_deferred(token).");
  m.def("release_deferred", &hpshmem::ReleaseDeferred, "This rank no longer references the block of `token`.");
  m.def("ptr", [](uintptr_t addr, int pe) { return reinterpret_cast<uintptr_t>(hpshmem::Ptr(P(addr), pe)); });
  m.def(
      "peer_transport",
      [](int pe) {
        const char* t = hpshmem::PeerTransport(pe);
        if (!t) Raise(Status::InvalidArgument("peer_transport: rank " + std::to_string(pe) + " is out of range"));
        return std::string(t);
      },
      "How this rank reaches rank `pe`: \"self\", \"shm\" or \"ucx\".");
  m.def(
      "workspace",
      [] {
        void* p = nullptr;
        Check(hpshmem::CollectiveWorkspace(&p));
        return nb::make_tuple(reinterpret_cast<uintptr_t>(p), hpshmem::kWorkspaceBytes);
      },
      "(address, bytes) of the symmetric block reserved for the library's collectives.");
  m.def("is_symmetric", [](uintptr_t addr, size_t bytes) { return hpshmem::IsSymmetric(P(addr), bytes); });
  m.def(
      "in_live_allocation", [](uintptr_t addr, size_t bytes) { return hpshmem::InLiveAllocation(P(addr), bytes); },
      nb::arg("addr"), nb::arg("bytes"),
      "Whether [addr, addr + bytes) lies within one live allocation of this rank's heap: what makes a tensor "
      "symmetric (the fast path asks the same).");

  m.def(
      "put",
      [](uintptr_t dest, uintptr_t src, size_t bytes, int pe, int block_dim) {
        NoGil([&] { return hpshmem::ops::PutMem(P(dest), P(src), bytes, pe, block_dim); });
      },
      nb::arg("dest"), nb::arg("src"), nb::arg("bytes"), nb::arg("pe"), nb::arg("block_dim") = 0);
  m.def(
      "get",
      [](uintptr_t dest, uintptr_t src, size_t bytes, int pe, int block_dim) {
        NoGil([&] { return hpshmem::ops::GetMem(P(dest), P(src), bytes, pe, block_dim); });
      },
      nb::arg("dest"), nb::arg("src"), nb::arg("bytes"), nb::arg("pe"), nb::arg("block_dim") = 0);
  m.def(
      "put_signal",
      [](uintptr_t dest, uintptr_t src, size_t bytes, uintptr_t sig, int width, int64_t value, int op, int pe,
         int block_dim) {
        auto t = Width(width);
        NoGil([&] {
          return hpshmem::ops::PutMemSignal(P(dest), P(src), bytes, P(sig), t, value,
                                            static_cast<hpshmem::SignalOp>(op), pe, block_dim);
        });
      },
      nb::arg("dest"), nb::arg("src"), nb::arg("bytes"), nb::arg("sig"), nb::arg("width"), nb::arg("value"),
      nb::arg("op"), nb::arg("pe"), nb::arg("block_dim") = 0);
  hpshmem_python::RegisterRequests(m);
  hpshmem_python::RegisterMoe(m);
  m.def("signal", [](uintptr_t sig, int width, int64_t value, int op, int pe) {
    auto t = Width(width);
    // Not a wait and not a copy: a few atomics, cheaper with the GIL held.
    Check(hpshmem::ops::SignalOpRemote(P(sig), t, value, static_cast<hpshmem::SignalOp>(op), pe));
  });
  m.def(
      "wait_until",
      [](uintptr_t sig, int width, int cmp, int64_t value, const std::string& label, int team) {
        auto t = Width(width);
        int64_t seen = 0;
        NoGil([&] {
          return hpshmem::ops::SignalWaitUntil(P(sig), t, static_cast<hpshmem::Cmp>(cmp), value, &seen,
                                               label.empty() ? nullptr : label.c_str(), team);
        });
        return seen;
      },
      nb::arg("sig"), nb::arg("width"), nb::arg("cmp"), nb::arg("value"), nb::arg("label") = "", nb::arg("team") = 0,
      "A lost rank fails the wait only when it is a member of `team` (0: any rank).");
  m.def("signal_fetch", [](uintptr_t sig, int width) {
    int64_t v = 0;
    Check(hpshmem::SignalFetch(P(sig), Width(width), &v));
    return v;
  });
  m.def("fence", [] { Check(hpshmem::Fence()); });
  m.def("quiet", [] { Check(hpshmem::Quiet()); });
  m.def("barrier", [] { NoGil([] { return hpshmem::Barrier(); }); });

  // Teams (hpshmem.h): ids are this rank's handles, 0 the world.
  m.def(
      "team_create",
      [](const std::vector<int>& pes) {
        int t = -1;
        NoGil([&] { return hpshmem::TeamCreate(pes.data(), static_cast<int>(pes.size()), &t); });
        return t;
      },
      nb::arg("pes"), "Collective over the members only: the team of these global ranks, in this order.");
  m.def("team_destroy", [](int team) { NoGil([&] { return hpshmem::TeamDestroy(team); }); }, nb::arg("team"));
  m.def(
      "team_info",
      [](int team) {
        hpshmem::TeamView v;
        Check(hpshmem::GetTeam(team, &v));
        return nb::make_tuple(v.me, std::vector<int>(v.pes, v.pes + v.size));
      },
      nb::arg("team"), "(this rank's team rank, the members' global ranks).");
  m.def("set_thread_wait_timeout", &hpshmem::SetThreadWaitTimeout, nb::arg("seconds"),
        "Bounds this thread's waits by `seconds` (<= 0: the job's timeout); returns the previous setting.");
  m.def("team_barrier", [](int team) { NoGil([&] { return hpshmem::ops::TeamBarrier(team); }); }, nb::arg("team"));

  // Collectives (protocol in ops/ops.h); the fused ops of the Python algorithms share the epochs.
  // `team`: 0 = every rank; peers and roots are team ranks.
  m.def(
      "coll_epoch",
      [](int team) {
        int64_t e = 0;
        Check(hpshmem::ops::CollectiveEpoch(&e, team));
        return e;
      },
      nb::arg("team") = 0);
  m.def(
      "coll_begin",
      [](int team) {
        int64_t e = 0;
        Check(hpshmem::ops::CollectiveBegin(&e, team));
        return e;
      },
      nb::arg("team") = 0);
  m.def(
      "coll_wait_ready",
      [](int peer, int64_t epoch, int team) {
        NoGil([&] { return hpshmem::ops::CollectiveWaitReady(peer, epoch, team); });
      },
      nb::arg("peer"), nb::arg("epoch"), nb::arg("team") = 0);
  m.def(
      "coll_wait_consumed",
      [](int64_t extra, int team) { NoGil([&] { return hpshmem::ops::CollectiveWaitConsumed(extra, team); }); },
      nb::arg("extra"), nb::arg("team") = 0);
  m.def(
      "coll_consumed", [](int peer, int team) { Check(hpshmem::ops::CollectiveConsumed(peer, team)); }, nb::arg("peer"),
      nb::arg("team") = 0);
  m.def(
      "allgather",
      [](uintptr_t out, uintptr_t in, size_t bytes, bool pull, int block_dim, int team, uintptr_t copy_to) {
        NoGil([&] {
          Status s = hpshmem::ops::Allgather(P(out), P(in), bytes, pull, block_dim, team);
          if (!s.ok() || !copy_to) return s;
          hpshmem::TeamView v;
          HPSHMEM_RETURN_IF_ERROR(hpshmem::GetTeam(team, &v));
          return CopyOut(copy_to, out, bytes * static_cast<size_t>(v.size));
        });
      },
      nb::arg("out"), nb::arg("input"), nb::arg("bytes"), nb::arg("pull"), nb::arg("block_dim") = 0,
      nb::arg("team") = 0, nb::arg("copy_to") = 0,
      "Collective: symmetric `out` (W * bytes) = every member's `input`; `copy_to` (0: none): where `out` is "
      "copied too, for a front end staging a user's tensor through the heap.");
  m.def(
      "alltoall",
      [](const std::vector<uintptr_t>& sends, const std::vector<int64_t>& send_elems, uintptr_t recv,
         const std::vector<int64_t>& recv_elems, size_t itemsize, bool pull, int block_dim, int team,
         uintptr_t copy_to) {
        hpshmem::TeamView v;
        Check(hpshmem::GetTeam(team, &v));
        size_t w = static_cast<size_t>(v.size);
        if (sends.size() != w || send_elems.size() != w || recv_elems.size() != w)
          Check(hpshmem::Status::InvalidArgument("alltoall: one send, send count and receive count per rank"));
        std::vector<const void*> ptrs(w);
        for (size_t i = 0; i < w; ++i) ptrs[i] = P(sends[i]);
        NoGil([&] {
          Status s = hpshmem::ops::Alltoall(ptrs.data(), send_elems.data(), P(recv), recv_elems.data(), itemsize, pull,
                                            block_dim, team);
          size_t total = 0;
          for (int64_t n : recv_elems) total += static_cast<size_t>(n);
          return s.ok() ? CopyOut(copy_to, recv, total * itemsize) : s;
        });
      },
      nb::arg("sends"), nb::arg("send_elems"), nb::arg("recv"), nb::arg("recv_elems"), nb::arg("itemsize"),
      nb::arg("pull"), nb::arg("block_dim") = 0, nb::arg("team") = 0, nb::arg("copy_to") = 0,
      "`copy_to` (0: none): where the received pieces (packed by source) are copied too.");
  m.def(
      "allreduce",
      [](uintptr_t data, size_t count, int dtype, int op, int algorithm, int team, uintptr_t src, uintptr_t out) {
        NoGil([&] {
          Status s = hpshmem::ops::Allreduce(
              P(data), count, static_cast<hpshmem::ops::DType>(dtype), static_cast<hpshmem::ops::ReduceOp>(op),
              static_cast<hpshmem::ops::AllreduceAlgorithm>(algorithm), team, src ? P(src) : nullptr);
          return s.ok() ? CopyOut(out, data, count * hpshmem::ops::DTypeSize(static_cast<hpshmem::ops::DType>(dtype)))
                        : s;
        });
      },
      nb::arg("data"), nb::arg("count"), nb::arg("dtype"), nb::arg("op"), nb::arg("algorithm") = 0, nb::arg("team") = 0,
      nb::arg("src") = 0, nb::arg("out") = 0,
      "Collective, in place on symmetric `data` (count elements). dtype, op and algorithm: the codes of "
      "ops::DType, ops::ReduceOp and ops::AllreduceAlgorithm. `src` (an address, 0: none): reduce every rank's "
      "`src` instead, `data` then being its staging copy; `out` (0: none): where the result is copied too.");
  m.def(
      "reduce_scatter",
      [](uintptr_t out, uintptr_t in, size_t count, int dtype, int op, int team, uintptr_t src) {
        NoGil([&] {
          if (src) {  // staged: nobody reads `in` between calls (each call waits for its readers before it returns)
            hpshmem::TeamView v;
            HPSHMEM_RETURN_IF_ERROR(hpshmem::GetTeam(team, &v));
            size_t item = hpshmem::ops::DTypeSize(static_cast<hpshmem::ops::DType>(dtype));
            if (!hpshmem::IsSymmetric(P(in), count * item * static_cast<size_t>(v.size)))
              return Status::InvalidArgument("reduce_scatter: the staging input is not symmetric");
            CopyOut(in, src, count * item * static_cast<size_t>(v.size));
          }
          return hpshmem::ops::ReduceScatter(P(out), P(in), count, static_cast<hpshmem::ops::DType>(dtype),
                                             static_cast<hpshmem::ops::ReduceOp>(op), team);
        });
      },
      nb::arg("out"), nb::arg("input"), nb::arg("count"), nb::arg("dtype"), nb::arg("op"), nb::arg("team") = 0,
      nb::arg("src") = 0,
      "Collective: out (count elements) = this rank's block of the reduction of symmetric `input` (W*count). "
      "`src` (0: none): W*count elements copied into `input` first (a front end's staging).");
  m.def(
      "broadcast",
      [](uintptr_t data, size_t bytes, int root, int team, uintptr_t src, uintptr_t out) {
        NoGil([&] {
          Status s = hpshmem::ops::Broadcast(P(data), bytes, root, team, src ? P(src) : nullptr);
          return s.ok() ? CopyOut(out, data, bytes) : s;
        });
      },
      nb::arg("data"), nb::arg("bytes"), nb::arg("root"), nb::arg("team") = 0, nb::arg("src") = 0, nb::arg("out") = 0,
      "Collective: symmetric `data` (bytes) = root's (a team rank). `src` (root, 0: none): root sends these bytes "
      "instead of its `data`; `out` (0: none): where the result is copied too.");
  m.def("debug_state", &hpshmem::DebugState);
  m.def("graph_last_error", &hpshmem::mindspore_graph::LastError,
        "Why the last MindSpore graph-mode kernel failed (empty if none did).");
  m.def(
      "environment_settings",
      [] {
        hpshmem::RuntimeInfo i;
        Check(hpshmem::EnvironmentSettings(&i));
        nb::dict d;
        d["heap_bytes"] = i.heap_bytes;
        d["timeout_sec"] = i.timeout_sec;
        d["block_dim"] = i.block_dim;
        return d;
      },
      "Settings the runtime would read from the environment (heap_bytes, timeout_sec, block_dim).");
  m.def("parse_byte_size", [](const std::string& text, const std::string& what) {
    size_t v = 0;
    Check(hpshmem::ParseByteSize(text, what.c_str(), &v));
    return v;
  });
}
