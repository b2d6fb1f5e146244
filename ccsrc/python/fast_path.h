// The Python API's fast path (fast_path.cc) and what it shares with binding.cc.
#pragma once

#include <nanobind/nanobind.h>

#include "hpshmem/status.h"

namespace hpshmem_python {

// Raises the exception class of s.code() with s.message() (binding.cc).
[[noreturn]] void RaiseStatus(const hpshmem::Status& s);

// Adds fast_register, fast_put, fast_get, fast_put_signal, fast_signal, fast_wait to `m`.
void RegisterFastPath(nanobind::module_& m);

}  // namespace hpshmem_python
