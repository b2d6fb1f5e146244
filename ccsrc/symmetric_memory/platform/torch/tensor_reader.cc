// hyper_parallel._torch_tensor_reader: reads a torch tensor's address, size,
// dtype and layout from its C++ object (a few loads) for the binding's fast
// path, instead of five calls into torch's Python methods (~0.3 us). Only this
// small module is built against torch's headers and linked to its libraries;
// the runtime and the binding never are (they meet through tensor_view.h).
// It loads only after `import torch`, which has loaded the libraries it needs.
#include <Python.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include "platform/tensor_view.h"

namespace {

int Describe(PyObject* obj, HpTensorView* out) {
  if (!THPVariable_Check(obj)) return 0;
  const at::Tensor& t = THPVariable_Unpack(obj);
  // The Python checks' conditions: strided, on the CPU (not meta), contiguous, not empty.
  if (!t.defined() || t.layout() != c10::kStrided || !t.device().is_cpu() || !t.is_contiguous()) return 0;
  const int64_t n = t.numel();
  if (n <= 0) return 0;
  out->addr = reinterpret_cast<uintptr_t>(t.data_ptr());  // what Tensor.data_ptr() returns
  out->numel = n;
  out->itemsize = static_cast<int32_t>(t.element_size());
  out->dtype = static_cast<int32_t>(t.scalar_type()) + 1;
  return 1;
}

PyObject* Capsule(PyObject*, PyObject*) {
  return PyCapsule_New(reinterpret_cast<void*>(&Describe), HP_TENSOR_READER_CAPSULE, nullptr);
}

PyObject* DtypeCode(PyObject*, PyObject* dtype) {
  if (!THPDtype_Check(dtype)) {
    PyErr_SetString(PyExc_TypeError, "dtype_code: expected a torch.dtype");
    return nullptr;
  }
  return PyLong_FromLong(static_cast<long>(reinterpret_cast<THPDtype*>(dtype)->scalar_type) + 1);
}

PyMethodDef kMethods[] = {
    {"capsule", Capsule, METH_NOARGS, "The describe function for the binding's fast path, in a PyCapsule."},
    {"dtype_code", DtypeCode, METH_O, "The code the describe function gives tensors of this torch.dtype."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_torch_tensor_reader",
                       "Reads torch tensors for the binding's fast path (see tensor_view.h).", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__torch_tensor_reader() { return PyModule_Create(&kModule); }
