// The MoE dispatch and combine of ops/moe as the Python algorithms layer calls
// them: a buffer and a handle per call as opaque objects, addresses and sizes
// in, the GIL released around everything that copies or waits.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "fast_path.h"
#include "hpshmem/hpshmem.h"
#include "ops/moe/moe.h"

namespace nb = nanobind;
using hpshmem::Status;
namespace ops = hpshmem::ops;

namespace {

template <class F>
Status Released(F&& f) {
  nb::gil_scoped_release release;
  hpshmem::CallHold hold;
  if (!hpshmem::IsInitialized()) return Status::NotInitialized("the runtime was finalized");
  return f();
}

void Check(const Status& s) {
  if (!s.ok()) hpshmem_python::RaiseStatus(s);
}

template <class T>
const T* Ptr(uintptr_t a) {
  return reinterpret_cast<const T*>(a);
}

}  // namespace

namespace hpshmem_python {

void RegisterMoe(nb::module_& m) {
  nb::class_<ops::MoeBuffer>(m, "MoeBuffer", "A MoE buffer's state (ops/moe/moe.h); its space is a Python tensor.")
      .def_prop_ro("bytes", &ops::MoeBuffer::bytes)
      .def_prop_ro("team_size", &ops::MoeBuffer::team_size)
      .def_prop_ro("team_rank", &ops::MoeBuffer::team_rank)
      .def_prop_ro("local_experts", &ops::MoeBuffer::local_experts)
      .def_prop_ro("dispatches", &ops::MoeBuffer::dispatches)
      .def_prop_ro("combines", &ops::MoeBuffer::combines);
  nb::class_<ops::MoeDispatchHandle>(m, "MoeDispatchHandle", "One dispatch's routing (ops/moe/moe.h).")
      .def(nb::init<>())
      .def_ro("epoch", &ops::MoeDispatchHandle::epoch)
      .def_ro("tokens", &ops::MoeDispatchHandle::tokens)
      .def_ro("rows", &ops::MoeDispatchHandle::rows)
      .def_ro("received", &ops::MoeDispatchHandle::received)
      .def_ro("unpacked", &ops::MoeDispatchHandle::unpacked)
      .def_ro("failed", &ops::MoeDispatchHandle::failed)
      .def_ro("sent", &ops::MoeDispatchHandle::sent)
      .def_ro("received_from", &ops::MoeDispatchHandle::received_from)
      .def_ro("expert_rows", &ops::MoeDispatchHandle::expert_rows)
      .def_prop_ro("expert_major",
                   [](const ops::MoeDispatchHandle& h) { return h.layout == ops::MoeLayout::kExpertMajor; });
  nb::class_<ops::MoeCombineHandle>(m, "MoeCombineHandle", "One combine's progress.")
      .def(nb::init<>())
      .def_ro("epoch", &ops::MoeCombineHandle::epoch)
      .def_ro("failed", &ops::MoeCombineHandle::failed);

  m.def(
      "moe_buffer_bytes",
      [](int64_t max_tokens, int64_t hidden, int dtype, int64_t num_experts, int topk, int team_size) {
        ops::MoeConfig c{max_tokens, hidden, static_cast<ops::DType>(dtype), num_experts, topk};
        Status error;
        const size_t bytes = ops::MoeBufferBytes(c, team_size, &error);
        Check(error);
        return bytes;
      },
      nb::arg("max_tokens"), nb::arg("hidden"), nb::arg("dtype"), nb::arg("num_experts"), nb::arg("topk"),
      nb::arg("team_size"), "Symmetric bytes a buffer needs; ShmemValueError/ShmemTypeError for its config.");
  m.def(
      "moe_buffer_create",
      [](int64_t max_tokens, int64_t hidden, int dtype, int64_t num_experts, int topk, int team, uintptr_t base,
         size_t bytes) {
        ops::MoeConfig c{max_tokens, hidden, static_cast<ops::DType>(dtype), num_experts, topk, team};
        ops::MoeBuffer* b = nullptr;
        Check(Released([&] { return ops::MoeBuffer::Create(c, reinterpret_cast<void*>(base), bytes, &b); }));
        return b;
      },
      nb::rv_policy::take_ownership, nb::arg("max_tokens"), nb::arg("hidden"), nb::arg("dtype"), nb::arg("num_experts"),
      nb::arg("topk"), nb::arg("team"), nb::arg("base"), nb::arg("bytes"),
      "Collective over the team: a buffer over `base` (symmetric, moe_buffer_bytes bytes).");
  m.def(
      "moe_dispatch",
      [](ops::MoeBuffer& b, ops::MoeDispatchHandle& h, uintptr_t x, int64_t tokens, int64_t hidden, int dtype,
         uintptr_t idx, int64_t idx_rows, int64_t idx_cols, int idx_bytes, uintptr_t weights, int64_t weight_rows,
         int64_t weight_cols, int layout, int64_t alignment, bool wait) {
        Status sent, waited;
        Check(Released([&] {
          sent = ops::MoeDispatchSend(&b, Ptr<void>(x), tokens, hidden, static_cast<ops::DType>(dtype), Ptr<void>(idx),
                                      idx_rows, idx_cols, idx_bytes, Ptr<float>(weights), weight_rows, weight_cols,
                                      static_cast<ops::MoeLayout>(layout), alignment, wait, &h);
          // A refused call is still completed here, so that every member ends it.
          if (h.failed || (sent.ok() && wait)) waited = ops::MoeDispatchWait(&b, &h);
          return Status::OK();
        }));
        Check(sent);
        Check(waited);
      },
      nb::arg("buffer"), nb::arg("handle"), nb::arg("x"), nb::arg("tokens"), nb::arg("hidden"), nb::arg("dtype"),
      nb::arg("topk_idx"), nb::arg("idx_rows"), nb::arg("idx_cols"), nb::arg("idx_bytes"), nb::arg("weights"),
      nb::arg("weight_rows"), nb::arg("weight_cols"), nb::arg("layout"), nb::arg("alignment"), nb::arg("wait"),
      "Sends this rank's tokens (addresses; shapes in rows and elements) and, with wait, receives; raises the "
      "refusal of an argument on this rank, CollectiveMismatchError for another's.");
  m.def(
      "moe_dispatch_refuse",
      [](ops::MoeBuffer& b, ops::MoeDispatchHandle& h) {
        Check(Released([&] {
          HPSHMEM_RETURN_IF_ERROR(ops::MoeDispatchRefuse(&b, &h));
          return ops::MoeDispatchWait(&b, &h);
        }));
      },
      nb::arg("buffer"), nb::arg("handle"), "Ends a dispatch whose arguments the front end refused itself.");
  m.def(
      "moe_dispatch_wait",
      [](ops::MoeBuffer& b, ops::MoeDispatchHandle& h) {
        if (h.received || h.failed) return;
        Check(Released([&] { return ops::MoeDispatchWait(&b, &h); }));
      },
      nb::arg("buffer"), nb::arg("handle"), "Receives every source's tokens of the call (counts only).");
  m.def(
      "moe_dispatch_arrived",
      [](const ops::MoeBuffer& b, const ops::MoeDispatchHandle& h) {
        std::vector<bool> arrived;
        ops::MoeDispatchArrived(b, h, &arrived);
        std::vector<int> ranks;
        for (size_t s = 0; s < arrived.size(); ++s)
          if (arrived[s]) ranks.push_back(static_cast<int>(s));
        return ranks;
      },
      nb::arg("buffer"), nb::arg("handle"), "The group ranks whose tokens of this call have arrived.");
  m.def(
      "moe_dispatch_unpack",
      [](ops::MoeBuffer& b, ops::MoeDispatchHandle& h, uintptr_t recv_x, uintptr_t recv_topk, uintptr_t recv_weights,
         uintptr_t expert_counts) {
        Check(Released([&] {
          return ops::MoeDispatchUnpack(&b, &h, reinterpret_cast<void*>(recv_x), reinterpret_cast<int64_t*>(recv_topk),
                                        reinterpret_cast<float*>(recv_weights),
                                        reinterpret_cast<int64_t*>(expert_counts));
        }));
      },
      nb::arg("buffer"), nb::arg("handle"), nb::arg("recv_x"), nb::arg("recv_topk_idx"), nb::arg("recv_topk_weights"),
      nb::arg("tokens_per_expert"), "Copies the received tokens into the outputs (addresses) and frees their space.");
  m.def(
      "moe_dispatch_release",
      [](ops::MoeBuffer& b, ops::MoeDispatchHandle& h) {
        Check(Released([&] { return ops::MoeDispatchRelease(&b, &h); }));
      },
      nb::arg("buffer"), nb::arg("handle"), "Frees a received call's space without copying it out.");
  m.def(
      "moe_combine",
      [](ops::MoeBuffer& b, const ops::MoeDispatchHandle& d, ops::MoeCombineHandle& h, uintptr_t expert_out,
         int64_t rows, int64_t hidden, int dtype, uintptr_t weights, int64_t weight_rows, int64_t weight_cols,
         uintptr_t out, bool wait) {
        Status sent, waited;
        Check(Released([&] {
          sent = ops::MoeCombineSend(&b, d, Ptr<void>(expert_out), rows, hidden, static_cast<ops::DType>(dtype),
                                     Ptr<float>(weights), weight_rows, weight_cols, wait, &h);
          if (h.failed || (sent.ok() && wait)) waited = ops::MoeCombineWait(&b, d, &h, reinterpret_cast<void*>(out));
          return Status::OK();
        }));
        Check(sent);
        Check(waited);
      },
      nb::arg("buffer"), nb::arg("dispatch"), nb::arg("handle"), nb::arg("expert_out"), nb::arg("rows"),
      nb::arg("hidden"), nb::arg("dtype"), nb::arg("weights"), nb::arg("weight_rows"), nb::arg("weight_cols"),
      nb::arg("out"), nb::arg("wait"), "Sends this rank's partial sums and, with wait, sums what comes back into out.");
  m.def(
      "moe_combine_refuse",
      [](ops::MoeBuffer& b, const ops::MoeDispatchHandle& d, ops::MoeCombineHandle& h) {
        Check(Released([&] {
          HPSHMEM_RETURN_IF_ERROR(ops::MoeCombineRefuse(&b, &h));
          return ops::MoeCombineWait(&b, d, &h, nullptr);
        }));
      },
      nb::arg("buffer"), nb::arg("dispatch"), nb::arg("handle"), "Ends a combine the front end refused itself.");
  m.def(
      "moe_combine_wait",
      [](ops::MoeBuffer& b, const ops::MoeDispatchHandle& d, ops::MoeCombineHandle& h, uintptr_t out) {
        Check(Released([&] { return ops::MoeCombineWait(&b, d, &h, reinterpret_cast<void*>(out)); }));
      },
      nb::arg("buffer"), nb::arg("dispatch"), nb::arg("handle"), nb::arg("out"),
      "Sums every rank's partial sums of the call into out (address).");
}

}  // namespace hpshmem_python
