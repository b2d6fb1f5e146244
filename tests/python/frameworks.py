"""The few tensor operations the shared scenarios need, for each framework.

Scenarios are written once against this interface and run under torch and under
MindSpore, so the two suites cannot drift apart. Values are generated with NumPy
(same numbers in both frameworks) and checked through NumPy: ``bits`` for exact
comparisons (bfloat16 as its uint16 bit patterns), ``values`` for tolerances.
Only the framework of the job is imported: a MindSpore rank never imports torch.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

FRAMEWORKS = ["torch", "mindspore"]

# Fixed-size dtypes both frameworks have; each framework adds its own extras.
COMMON_DTYPES = [
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "complex64",
]
_NP = {
    "float16": np.float16,
    "bfloat16": np.float32,
    "float32": np.float32,
    "float64": np.float64,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "bool": np.bool_,
    "complex64": np.complex64,
    "complex128": np.complex128,
}


def seed_of(*parts) -> int:
    """A seed from strings/ints that is the same in every process (hash() is not)."""
    return zlib.crc32(":".join(map(str, parts)).encode()) % 1000003


def random_array(name: str, shape, seed: int, small: bool = False) -> np.ndarray:
    """Random NumPy values for dtype `name` (full integer range, or -50..50 when `small`)."""
    g = np.random.default_rng(seed)
    if name == "bool":
        return g.integers(0, 2, shape).astype(np.bool_)
    if name.startswith("complex"):
        return (g.standard_normal(shape) * 100 + 1j * g.standard_normal(shape) * 100).astype(_NP[name])
    if name.startswith(("float", "bfloat")):
        scale = 1.0 if small else 100.0
        return (g.standard_normal(shape) * scale).astype(np.float32 if name == "bfloat16" else _NP[name])
    if small:
        return g.integers(-50, 50, shape).astype(_NP[name])
    info = np.iinfo(_NP[name])
    return g.integers(info.min, info.max, shape, dtype=np.int64 if info.min < 0 else np.uint64, endpoint=False).astype(
        _NP[name]
    )


def poison(name: str):
    if name == "bool":
        return True
    if name.startswith(("float", "bfloat", "complex")):
        return -12345.0
    return 77


class _Common:
    """What both frameworks spell alike."""

    def shape(self, t):
        return tuple(t.shape)

    def dtype_of(self, t):
        return t.dtype

    def data_ptr(self, t):
        return t.data_ptr()

    def random(self, name, shape, seed, small=False):
        return self.tensor(random_array(name, shape, seed, small), name)


class _Torch(_Common):
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch
        self.dtypes = COMMON_DTYPES + [d for d in ("uint16", "uint32", "uint64") if hasattr(torch, d)]
        self.dtype_type_error = "dtype must be a torch.dtype"
        self.default_dtype = torch.get_default_dtype()

    def dtype(self, name):
        return getattr(self.torch, name)

    def tensor(self, values, name: str):
        """A new tensor (a copy) of dtype `name` holding `values` (array or list)."""
        arr = np.asarray(values, dtype=_NP[name])
        return self.torch.from_numpy(np.ascontiguousarray(arr)).to(self.dtype(name)).clone()

    def full(self, shape, value, name):
        return self.torch.full(shape if isinstance(shape, tuple) else (shape,), value, dtype=self.dtype(name))

    def fill(self, t, value):
        t.fill_(value)

    def assign(self, dst, src):
        dst.copy_(src)

    def bits(self, t) -> np.ndarray:
        t = t.detach().contiguous()
        if t.dtype == self.torch.bfloat16:
            return t.view(self.torch.int16).numpy().view(np.uint16).copy()
        return t.numpy().copy()

    def values(self, t) -> np.ndarray:
        if t.dtype in (self.torch.bfloat16, self.torch.float16):
            t = t.float()
        return t.detach().numpy().astype(np.float64 if t.dtype.is_floating_point else np.int64)

    def numel(self, t):
        return t.numel()

    def device(self, t):
        return t.device.type

    def non_contiguous(self, n):
        return self.torch.ones(n, 2)[:, 0]

    def size_object(self, dims):
        return self.torch.Size(dims)

    def queued_write(self, dst, src):
        """dst[:] = src by a framework operator (torch runs it before returning)."""
        dst.copy_(src)

    def op_result(self, n, name):
        """A tensor computed by framework ops (not from NumPy): 2 * arange(n)."""
        return (self.torch.arange(n) * 2).to(self.dtype(name))


class _MindSpore(_Common):
    name = "mindspore"

    def __init__(self):
        import mindspore as ms

        self.ms = ms
        self.dtypes = COMMON_DTYPES + ["uint16", "uint32", "uint64", "complex128"]
        self.dtype_type_error = "dtype must be a fixed-size mindspore dtype"
        self.default_dtype = ms.float32

    def dtype(self, name):
        return self.ms.bool_ if name == "bool" else getattr(self.ms, name)

    def tensor(self, values, name):
        arr = np.ascontiguousarray(np.asarray(values, dtype=_NP[name]))
        t = self.ms.Tensor(arr)  # copies
        return t.astype(self.ms.bfloat16) if name == "bfloat16" else t

    def full(self, shape, value, name):
        shape = shape if isinstance(shape, tuple) else (shape,)
        return self.tensor(np.full(shape, value, dtype=_NP[name]), name)

    def _store(self, t):
        return t.view(self.ms.uint16) if t.dtype == self.ms.bfloat16 else t

    def fill(self, t, value):
        # MindSpore's CPU build has no in-place fill kernel; slice assignment writes in place
        # (t[...] = v would rebind t to new memory), and bfloat16 goes through its uint16 bits.
        if t.size:
            self._store(t)[:] = self._store(self.full(tuple(t.shape), value, self._name(t.dtype)))

    def assign(self, dst, src):
        self._store(dst)[:] = self._store(src)

    def _name(self, dtype):
        return "bool" if dtype == self.ms.bool_ else str(dtype).lower()

    def bits(self, t) -> np.ndarray:
        if t.dtype == self.ms.bfloat16:
            return t.asnumpy().view(np.uint16).copy()
        return t.asnumpy().copy()

    def values(self, t) -> np.ndarray:
        if t.dtype in (self.ms.bfloat16, self.ms.float16):
            t = t.astype(self.ms.float32)
        a = t.asnumpy()
        return a.astype(np.float64 if a.dtype.kind == "f" else np.int64)

    def numel(self, t):
        return t.size

    def device(self, t):
        return str(t.device).lower()

    def non_contiguous(self, n):
        return self.ms.ops.ones((n, 2), self.ms.float32)[:, 0]

    def size_object(self, dims):
        return tuple(dims)

    def queued_write(self, dst, src):
        """dst[:] = src by an operator that is still queued when this returns: a slow matmul
        ahead of it keeps PyNative's queue busy (copy_ itself is asynchronous)."""
        big = self.ms.ops.ones((768, 768), self.ms.float32)
        self.ms.ops.matmul(big, big)
        dst.copy_(src)

    def op_result(self, n, name):
        return (self.ms.ops.arange(n) * 2).astype(self.dtype(name))


_current = None


def current():
    """The framework of this rank's job (HP_TEST_FRAMEWORK, set by the launcher)."""
    global _current
    if _current is None:
        _current = _MindSpore() if os.environ.get("HP_TEST_FRAMEWORK", "torch") == "mindspore" else _Torch()
    return _current


def equal(a, b) -> bool:
    """Exact equality of two tensors (or a tensor and a NumPy array of bits) of one framework."""
    f = current()
    x = f.bits(a) if not isinstance(a, np.ndarray) else a
    y = f.bits(b) if not isinstance(b, np.ndarray) else b
    return x.shape == y.shape and np.array_equal(x, y)


def cat_bits(tensors) -> np.ndarray:
    f = current()
    parts = [f.bits(t).reshape(-1) for t in tensors]
    return np.concatenate(parts) if parts else np.zeros(0)
