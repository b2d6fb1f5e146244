// What a framework's tensor reader (platform/torch/tensor_reader.cc) hands
// the binding's fast path (ccsrc/python/fast_path.cc): a plain C struct and
// function, passed between extension modules in a PyCapsule, so that neither
// module links against the other, and neither includes the other's headers.
#pragma once

#include <Python.h>

#include <cstdint>

// A dense, contiguous, non-empty CPU tensor: address in bytes, size in elements.
struct HpTensorView {
  uintptr_t addr;
  int64_t numel;
  int32_t itemsize;  // bytes per element
  int32_t dtype;     // the reader's own code, > 0; equal codes mean equal dtypes
};

// 1 and *out filled when `obj` is such a tensor; 0 otherwise (no Python error
// set): the caller then leaves the call to the Python checks. GIL held.
typedef int (*HpDescribeTensor)(PyObject* obj, HpTensorView* out);

#define HP_TENSOR_READER_CAPSULE "hyper_parallel.tensor_reader"
