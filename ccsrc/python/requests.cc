// The request builders of ops/checks/request.h and the argument rules of
// ops/checks/checks.h, as the Python API's checked path calls them: plain
// values in, the request out or the builder's refusal raised.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <string>
#include <vector>

#include "fast_path.h"
#include "hpshmem/hpshmem.h"
#include "ops/checks/checks.h"
#include "ops/checks/request.h"

namespace nb = nanobind;
using hpshmem::Status;

namespace {

inline void Check(const Status& s) {
  if (!s.ok()) hpshmem_python::RaiseStatus(s);
}

// Runs a request builder (ops/checks/request.h) over two tensors whose dtypes
// Python gave as objects, raising its refusal. Python dtypes compare by value,
// the builder by identity: `a` gets 1, `b` 1 or 2. Their names appear only in
// a refusal, and str() of two dtypes costs more than the checks, so the
// builder runs without them first and, when it refuses, again with them.
template <class Build>
void BuildWithDtypes(nb::handle a_dtype, hpshmem::ops::TensorArg* a, nb::handle b_dtype, hpshmem::ops::TensorArg* b,
                     Build&& build) {
  a->dtype = 1;
  b->dtype = a_dtype.equal(b_dtype) ? 1 : 2;
  if (build().ok()) return;
  std::string a_name = nb::str(a_dtype).c_str(), b_name = nb::str(b_dtype).c_str();
  a->dtype_name = a_name.c_str();
  b->dtype_name = b_name.c_str();
  Check(build());
}

}  // namespace

namespace hpshmem_python {

void RegisterRequests(nb::module_& m) {
  // The argument value rules (ops/checks.h): return None or raise ShmemValueError. Sizes in elements.
  m.def(
      "check_index", [](int64_t v, const std::string& name) { Check(hpshmem::ops::CheckIndex(v, name.c_str())); },
      nb::arg("value"), nb::arg("name"), "name >= 0.");
  m.def(
      "check_span",
      [](int64_t numel, int64_t offset, int64_t size, const std::string& name, const std::string& offset_name) {
        Check(hpshmem::ops::CheckSpan(numel, offset, size, name.c_str(), offset_name.c_str()));
      },
      nb::arg("numel"), nb::arg("offset"), nb::arg("size"), nb::arg("name"), nb::arg("offset_name"),
      "offset + size <= numel (offset and size already >= 0).");
  m.def(
      "check_copy_range",
      [](int64_t target_numel, int64_t target_offset, int64_t src_numel, int64_t src_offset, int64_t size) {
        Check(hpshmem::ops::CheckCopyRange(target_numel, target_offset, src_numel, src_offset, size));
      },
      nb::arg("target_numel"), nb::arg("target_offset"), nb::arg("src_numel"), nb::arg("src_offset"), nb::arg("size"),
      "A put/get's offsets and size: each >= 0, both windows inside their tensors.");
  m.def(
      "copy_request",
      [](uintptr_t t_addr, int64_t t_numel, int itemsize, nb::handle t_dtype, uintptr_t s_addr, int64_t s_numel,
         nb::handle s_dtype, int64_t toff, int64_t soff, int64_t size, int64_t rank, std::optional<int64_t> block_dim) {
        hpshmem::ops::TensorArg t{t_addr, t_numel, itemsize}, s{s_addr, s_numel, itemsize};
        hpshmem::ops::CopyRequest r;
        BuildWithDtypes(t_dtype, &t, s_dtype, &s, [&] {
          return hpshmem::ops::BuildCopyRequest(t, toff, s, soff, size, rank, block_dim ? &*block_dim : nullptr, &r);
        });
        return nb::make_tuple(r.dst, r.src, r.bytes, r.pe, r.block_dim);
      },
      nb::arg("target_addr"), nb::arg("target_numel"), nb::arg("itemsize"), nb::arg("target_dtype"),
      nb::arg("src_addr"), nb::arg("src_numel"), nb::arg("src_dtype"), nb::arg("target_offset"), nb::arg("src_offset"),
      nb::arg("size"), nb::arg("target_rank"), nb::arg("block_dim").none(),
      "A put/get's request (ops/checks/request.h): (dst, src addresses, bytes, pe, block_dim), or "
      "ShmemTypeError/ShmemValueError naming the argument. Offsets and size in elements.");
  m.def(
      "parts_request",
      [](uintptr_t w_addr, int64_t w_numel, int itemsize, nb::handle w_dtype, const std::string& w_name,
         uintptr_t p_addr, int64_t p_numel, nb::handle p_dtype, const std::string& p_name, bool whole_is_output,
         int64_t world) {
        hpshmem::ops::TensorArg whole{w_addr, w_numel, itemsize}, part{p_addr, p_numel, itemsize};
        hpshmem::ops::PartsRequest q;
        BuildWithDtypes(w_dtype, &whole, p_dtype, &part, [&] {
          return hpshmem::ops::BuildPartsRequest(whole, w_name.c_str(), part, p_name.c_str(), whole_is_output, world,
                                                 &q);
        });
        return nb::make_tuple(q.whole, q.part, q.part_numel, q.part_bytes);
      },
      nb::arg("whole_addr"), nb::arg("whole_numel"), nb::arg("itemsize"), nb::arg("whole_dtype"), nb::arg("whole_name"),
      nb::arg("part_addr"), nb::arg("part_numel"), nb::arg("part_dtype"), nb::arg("part_name"),
      nb::arg("whole_is_output"), nb::arg("world"),
      "An allgather's or reduce-scatter's tensors (ops/checks/request.h): (whole addr, part addr, part elements, "
      "part bytes), or ShmemTypeError/ShmemValueError naming the tensor.");
  m.def(
      "alltoall_request",
      [](int64_t r_numel, int itemsize, nb::handle r_dtype, nb::list s_dtypes, nb::list s_numels, nb::list counts) {
        const size_t w = s_dtypes.size();
        if (s_numels.size() != w || counts.size() != w)
          hpshmem_python::RaiseStatus(Status::InvalidArgument("alltoall_request: list lengths"));
        hpshmem::ops::TensorArg r{0, r_numel, itemsize, 1};
        std::vector<hpshmem::ops::TensorArg> sends(w);
        std::vector<int64_t> n(w), elems(w);
        std::vector<const void*> addrs(w);
        for (size_t p = 0; p < w; ++p) {
          sends[p] = {0, nb::cast<int64_t>(s_numels[p]), itemsize, r_dtype.equal(s_dtypes[p]) ? 1 : 2};
          // Past int64 either way: the count is refused as negative or as too large all the same.
          int overflow = 0;
          long long v = PyLong_AsLongLongAndOverflow(counts[p].ptr(), &overflow);
          if (v == -1 && PyErr_Occurred()) throw nb::python_error();
          n[p] = overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : v;
        }
        auto build = [&] {
          return hpshmem::ops::BuildAlltoallRequest(r, sends.data(), n.data(), static_cast<int>(w), addrs.data(),
                                                    elems.data());
        };
        if (build().ok()) return;
        std::vector<std::string> names(w);
        const std::string r_name = nb::str(r_dtype).c_str();
        r.dtype_name = r_name.c_str();
        for (size_t p = 0; p < w; ++p) {
          names[p] = nb::str(nb::handle(s_dtypes[p])).c_str();
          sends[p].dtype_name = names[p].c_str();
        }
        Check(build());
      },
      nb::arg("receive_numel"), nb::arg("itemsize"), nb::arg("receive_dtype"), nb::arg("send_dtypes"),
      nb::arg("send_numels"), nb::arg("receive_list"),
      "Checks an alltoall's tensors (ops/checks/request.h): send dtypes against receive_tensor's, receive_list "
      "(ints, elements) non-negative and within receive_numel; ShmemTypeError/ShmemValueError naming the argument.");
  m.def(
      "check_rank",
      [](int64_t rank, int64_t world, const std::string& name) {
        Check(hpshmem::ops::CheckRank(rank, world, name.c_str()));
      },
      nb::arg("rank"), nb::arg("world"), nb::arg("name"), "0 <= rank < world.");
  m.def(
      "check_block_dim", [](int64_t v) { Check(hpshmem::ops::CheckBlockDim(v)); }, nb::arg("block_dim"),
      "1 <= block_dim <= 64.");
  // A signal tensor as Python read it: int_width 4/8 for int32/int64, else 0 (dtype printed in the TypeError).
  auto signal_arg = [](uintptr_t addr, int64_t numel, int int_width, const std::string& dtype) {
    return hpshmem::ops::TensorArg{addr, numel, int_width ? int_width : 1, 0, dtype.c_str(), int_width};
  };
  m.def(
      "signal_request",
      [signal_arg](uintptr_t addr, int64_t numel, int int_width, const std::string& dtype, int64_t offset,
                   int64_t value, int64_t op, int64_t rank) {
        hpshmem::ops::SignalRequest q;
        Check(hpshmem::ops::BuildSignalRequest(signal_arg(addr, numel, int_width, dtype), offset, value, op, rank, &q));
        return nb::make_tuple(q.word.addr, static_cast<int>(q.word.type), q.value, static_cast<int>(q.op), q.pe);
      },
      nb::arg("addr"), nb::arg("numel"), nb::arg("int_width"), nb::arg("dtype"), nb::arg("signal_offset"),
      nb::arg("signal_value"), nb::arg("signal_op"), nb::arg("target_rank"),
      "A signal's request (ops/checks/request.h): (word address, width in bytes, value, op, pe), or "
      "ShmemTypeError/ShmemValueError naming the argument. Offset in elements.");
  m.def(
      "wait_request",
      [signal_arg](uintptr_t addr, int64_t numel, int int_width, const std::string& dtype, int64_t offset,
                   int64_t value, int64_t cmp) {
        hpshmem::ops::WaitRequest q;
        Check(hpshmem::ops::BuildWaitRequest(signal_arg(addr, numel, int_width, dtype), offset, value, cmp, &q));
        return nb::make_tuple(q.word.addr, static_cast<int>(q.word.type), q.value, static_cast<int>(q.cmp),
                              q.word.offset);
      },
      nb::arg("addr"), nb::arg("numel"), nb::arg("int_width"), nb::arg("dtype"), nb::arg("signal_offset"),
      nb::arg("compare_value"), nb::arg("compare_op"),
      "A wait's request (ops/checks/request.h): (word address, width in bytes, value, compare op, offset), or "
      "ShmemTypeError/ShmemValueError naming the argument. Offset in elements.");
}

}  // namespace hpshmem_python
