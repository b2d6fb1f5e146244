// What the binding's files share: the Python API's fast path (fast_path.cc),
// the checked path's requests (requests.cc) and binding.cc's error raising.
#pragma once

#include <nanobind/nanobind.h>

#include "hpshmem/status.h"

namespace hpshmem_python {

// Raises the exception class of s.code() with s.message() (binding.cc).
[[noreturn]] void RaiseStatus(const hpshmem::Status& s);

// Adds fast_register, fast_put, fast_get, fast_put_signal, fast_signal, fast_wait to `m`.
void RegisterFastPath(nanobind::module_& m);

// Adds the checked path's request builders and argument rules (requests.cc) to `m`.
void RegisterRequests(nanobind::module_& m);

// Adds the MoE buffer, handles, dispatch and combine (moe.cc) to `m`.
void RegisterMoe(nanobind::module_& m);

}  // namespace hpshmem_python
