"""One-sided communication over a symmetric heap, for PyTorch and MindSpore.

    import hyper_parallel.core.symmetric_memory as symm

    buf = symm.empty(4096, dtype=torch.float16)      # collective; storage in the heap
    sig = symm.empty(1, dtype=torch.int32); sig.zero_()
    symm.barrier()
    symm.shmem_put_with_signal(buf, 0, data, 0, 4096, sig, 0, 1, 0, target_rank=1)
    symm.shmem_wait_for_signal(buf, sig, 0, 1, 0)    # on rank 1

Conventions (the RFC's):

* Offsets and sizes are in **elements** of the tensors' dtype, never bytes.
* Offsets, sizes, signal values and compare values may be Python ints or
  one-element integer tensors.
* ``signal_op``: 0/"set" = SET, 1/"add" = ADD.
  ``compare_op``: 0/"eq", 1/"gt", 2/"lt", 3/"ne", 4/"ge", 5/"le".
* Symmetric tensors come from :func:`empty`; a remote ``target``/``src``/``signal``
  must be one. Signals are int32 or int64 symmetric tensors.
* Tensors are treated as flat arrays and must be contiguous and on the CPU.

Every call checks all of its arguments before it touches memory: a bad argument
raises :class:`ShmemValueError` (a ``ValueError``) or :class:`ShmemTypeError` (a
``TypeError``) naming the argument, and nothing is written. Runtime failures
raise a subclass of :class:`ShmemError` carrying ``.code``: :class:`ShmemTimeoutError`
(also a ``TimeoutError``), :class:`PeerDeadError`, :class:`HeapExhaustedError` (also
a ``MemoryError``), :class:`InvalidFreeError`, :class:`CollectiveMismatchError`,
:class:`BootstrapError`, :class:`NotInitializedError`, :class:`ShmemUnsupportedError` (also a
``NotImplementedError``: valid, but not possible here, e.g. a direct view of a rank on another host).

Environment: ``SYMMETRIC_MEMORY_HEAP_SIZE`` (bytes, k/m/g suffixes, default 1g),
``HYPER_PARALLEL_SHMEM_TIMEOUT_SEC`` (default 120), ``HYPER_PARALLEL_SHMEM_BLOCK_DIM``
(threads per copy, default 1), ``HYPER_PARALLEL_SHMEM_LOG_LEVEL``,
``HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT`` / ``..._SECRET`` / ``..._HOST``,
``HYPER_PARALLEL_SHMEM_HOST_ID`` and ``HYPER_PARALLEL_SHMEM_TRANSPORT`` (ranks on several hosts, see
the README), ``HYPER_PARALLEL_PLATFORM``.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import json
import operator
import os
import threading
import weakref

from hyper_parallel import _hpshmem as _C
from hyper_parallel.platform import get_platform

# Errors: created by the binding (the lowest layer that names the cause).
ShmemError = _C.ShmemError
ShmemValueError = _C.ShmemValueError
ShmemTypeError = _C.ShmemTypeError
ShmemTimeoutError = _C.ShmemTimeoutError
PeerDeadError = _C.PeerDeadError
HeapExhaustedError = _C.HeapExhaustedError
InvalidFreeError = _C.InvalidFreeError
CollectiveMismatchError = _C.CollectiveMismatchError
BootstrapError = _C.BootstrapError
NotInitializedError = _C.NotInitializedError
ShmemUnsupportedError = _C.ShmemUnsupportedError

SIGNAL_SET, SIGNAL_ADD = 0, 1
CMP_EQ, CMP_GT, CMP_LT, CMP_NE, CMP_GE, CMP_LE = 0, 1, 2, 3, 4, 5
_SIGNAL_OPS = {"set": 0, "add": 1}
_COMPARE_OPS = {"eq": 0, "gt": 1, "lt": 2, "ne": 3, "ge": 4, "le": 5}
_COMPARE_NAMES = {v: k for k, v in _COMPARE_OPS.items()}

_handler = get_platform().get_symmetric_memory_handler()
# Frameworks that queue operators (MindSpore's PyNative) drain the queue before any call that
# reads or writes tensor memory by address; None where ops are complete when they return.
_sync = getattr(_handler, "sync", None)

# The common case of each one-sided call is checked and done in C++ in one crossing
# (ccsrc/python/fast_path.cc); it declines (False / None) on anything unusual or invalid, and
# the Python checks below then run as before and raise the documented error.
_C.fast_register(*_handler.fast_protocol())
_fast_put, _fast_get, _fast_put_signal = _C.fast_put, _C.fast_get, _C.fast_put_signal
_fast_signal, _fast_wait = _C.fast_signal, _C.fast_wait
_fast_allgather, _fast_alltoall = _C.fast_allgather, _C.fast_alltoall

# The algorithms import nothing from this module; imported once here, not per call (an import
# statement costs ~0.5 us even when the module is loaded).
from hyper_parallel.core.symmetric_memory.algorithms import _comm, collectives, fused  # noqa: E402
from hyper_parallel.core.symmetric_memory.algorithms.fused import spare_cores  # noqa: E402

__all__ = [
    "empty", "free", "is_symmetric", "shmem_put", "shmem_get", "shmem_signal_op",
    "shmem_wait_for_signal", "shmem_put_with_signal", "barrier", "rendezvous", "get_rank",
    "get_world_size", "finalize", "debug_state", "shmem_allgather", "shmem_alltoall",
    "fused_all_gather_matmul", "fused_matmul_reduce_scatter", "ShmemError", "ShmemValueError", "ShmemTypeError",
    "ShmemTimeoutError", "PeerDeadError", "HeapExhaustedError", "InvalidFreeError",
    "CollectiveMismatchError", "BootstrapError", "NotInitializedError", "ShmemUnsupportedError",
]


# --------------------------------------------------------------------------- errors
def _value_error(msg: str) -> ShmemValueError:
    e = ShmemValueError(msg)
    e.code = "invalid_argument"
    return e


def _type_error(msg: str) -> ShmemTypeError:
    e = ShmemTypeError(msg)
    e.code = "type_error"
    return e


# --------------------------------------------------------------------------- live allocations
class _Allocation:
    """One block of the heap and every framework object that can reach it.

    Each tensor handed out over the block (by :func:`empty` or ``get_buffer``) sits on a
    ctypes buffer object that the framework keeps alive for exactly as long as any tensor,
    view or NumPy array over that memory exists. ``buffers`` holds the keys of those still
    alive; :func:`free` detaches the tensors the library knows, and when views remain the
    runtime keeps the bytes out of the heap (on every rank) until the last one is gone, so a
    stale view never aliases a later allocation.
    """

    __slots__ = ("addr", "nbytes", "tensors", "buffers", "token")

    def __init__(self, addr: int, nbytes: int):
        self.addr = addr
        self.nbytes = nbytes
        self.tensors: list = []  # weakrefs to the tensors handed out over this memory
        self.buffers: set = set()  # keys of the live buffer objects under them
        self.token = None  # the runtime's deferral token once freed

    def buffer_gone(self, key) -> None:
        # Runs when the framework drops a buffer (any thread, under the GIL; set ops are atomic).
        self.buffers.discard(key)
        if not self.buffers and self.token:
            _C.release_deferred(self.token)


_buffer_keys = itertools.count()


def _wrap(a: _Allocation, addr: int, nbytes: int, shape, dtype):
    """A framework tensor over heap bytes [addr, addr + nbytes), tracked by allocation `a`."""
    buf = (ctypes.c_uint8 * max(nbytes, 1)).from_address(addr)
    key = next(_buffer_keys)
    a.buffers.add(key)
    weakref.finalize(buf, a.buffer_gone, key)
    t = _handler.wrap(buf, nbytes, shape, dtype)
    a.tensors.append(weakref.ref(t))
    return t


class _State:
    """Process-wide view of the runtime: live allocations, sorted by address."""

    def __init__(self):
        self.lock = threading.RLock()
        self.allocs: dict[int, _Allocation] = {}
        self.bases: list[int] = []
        self.world = 0  # world size while initialized, else 0 (cached: read on every call)
        self.last = None  # the allocation find() returned last

    def add(self, a: _Allocation):
        self.allocs[a.addr] = a
        bisect.insort(self.bases, a.addr)

    def remove(self, addr: int) -> _Allocation:
        a = self.allocs.pop(addr)
        del self.bases[bisect.bisect_left(self.bases, addr)]
        self.last = None
        return a

    def find(self, addr: int, nbytes: int):
        """The live allocation holding [addr, addr + nbytes), or None."""
        a = self.last  # programs touch the same few tensors over and over
        if a is not None and a.addr <= addr and addr + nbytes <= a.addr + a.nbytes:
            return a
        i = bisect.bisect_right(self.bases, addr) - 1
        if i < 0:
            return None
        a = self.allocs[self.bases[i]]
        if addr + nbytes <= a.addr + a.nbytes:
            self.last = a
            return a
        return None


_state = _State()


def _bootstrap_host() -> str:
    """Where rank 0's bootstrap listener binds and what it advertises: HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST
    when set, else this host's address on the route toward the framework's rendezvous host (torch's
    MASTER_ADDR, msrun's MS_SCHED_HOST), which the other hosts reach it from; "" (loopback) otherwise."""
    if os.environ.get("HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST"):
        return ""  # the runtime reads it
    toward = os.environ.get("MASTER_ADDR") or os.environ.get("MS_SCHED_HOST")
    return _C.local_address_toward(toward) if toward else ""


def _ensure_init():
    if _state.world:
        return
    with _state.lock:
        if _C.is_initialized():
            _state.world = _C.n_pes()
            return
        timeout = _C.environment_settings()["timeout_sec"]
        rank, world, uid, endpoint = _handler.rendezvous_info(lambda: _C.get_unique_id(_bootstrap_host()), timeout)
        _C.init(rank, world, uid, endpoint)
        _state.world = _C.n_pes()


def _require_init(what: str):
    """Only empty() starts the runtime: any other call before it, or after finalize(), raises
    at once rather than starting a bootstrap that waits for peers who are not coming."""
    if _state.world:
        return
    if _C.is_initialized():
        _state.world = _C.n_pes()
        return
    raise NotInitializedError(f"{what}: the runtime is not initialized (symm.empty() starts it; after "
                              "finalize() only empty() starts a new one)")


# --------------------------------------------------------------------------- argument checks
class _Indexed:
    """The name "base[i]", formatted only when an error message needs it (hot paths skip the f-string)."""
    __slots__ = ("base", "i")

    def __init__(self, base, i):
        self.base, self.i = base, i

    def __str__(self):
        return f"{self.base}[{self.i}]"

    def __format__(self, spec):
        return str(self)


def _tensor(x, name: str):
    """(addr, numel, itemsize, dtype) of a CPU contiguous tensor; addr in bytes, numel in elements."""
    if not _handler.is_tensor(x):
        raise _type_error(f"{name} must be a {_handler.name} tensor, got {type(x).__name__}")
    try:
        addr, numel, itemsize, dtype, contiguous, device = _handler.describe(x)
    except TypeError as e:  # a layout or device whose memory cannot be described (sparse, meta)
        raise _type_error(f"{name}: {e}") from None
    if device != "cpu":
        raise _value_error(f"{name} is on device '{device}'; symmetric memory on this host is CPU memory "
                           f"(use device='cpu')")
    if not contiguous:
        raise _value_error(f"{name} must be contiguous (offsets index the flat tensor); call .contiguous()")
    return addr, numel, itemsize, dtype


def _symmetric(x, name: str):
    """Like _tensor, for a tensor that must lie inside a live symmetric allocation."""
    info = _tensor(x, name)
    if _state.find(info[0], info[1] * info[2]) is None:
        raise _value_error(f"{name} is not a symmetric tensor (allocate it with symm.empty(); "
                           f"freed tensors and local tensors do not qualify)")
    return info


def _int(x, name: str) -> int:
    if type(x) is int:  # the common case, first
        return x
    if isinstance(x, bool):
        raise _type_error(f"{name} must be an int or a one-element integer tensor, got bool")
    if _handler.is_tensor(x):
        try:
            return _handler.scalar_int(x, name)
        except TypeError as e:
            raise _type_error(str(e)) from None
        except ValueError as e:
            raise _value_error(str(e)) from None
    try:
        return operator.index(x)
    except TypeError:
        raise _type_error(f"{name} must be an int or a one-element integer tensor, got {type(x).__name__}") from None


def _index(x, name: str) -> int:
    v = _int(x, name)
    if v < 0:
        raise _value_error(f"{name} must be >= 0, got {v}")
    return v


def _span(numel: int, offset: int, size: int, name: str, off_name: str):
    if offset + size > numel:
        raise _value_error(f"{off_name} + size = {offset} + {size} = {offset + size} exceeds {name}'s "
                           f"{numel} elements")


def _rank(x, name: str = "target_rank") -> int:
    _require_init("this call")
    r = _int(x, name)
    world = _state.world
    if not 0 <= r < world:
        raise _value_error(f"{name} {r} is out of range [0, {world})")
    return r


def _block_dim(x) -> int:
    if x is None:
        return 0
    v = _int(x, "block_dim")
    if not 1 <= v <= 64:
        raise _value_error(f"block_dim must be in [1, 64], got {v}")
    return v


def _signal_tensor(signal, name="signal"):
    """(addr, numel, width in bytes) of a symmetric int32/int64 signal tensor."""
    addr, numel, itemsize, dtype = _symmetric(signal, name)
    if dtype is not _handler.int32 and dtype is not _handler.int64:
        raise _type_error(f"{name} must be an int32 or int64 tensor, got {dtype}")
    return addr, numel, itemsize


def _signal(signal, offset, name="signal"):
    """(address of the signal word, its width in bytes, offset in elements)."""
    addr, numel, itemsize = _signal_tensor(signal, name)
    off = _index(offset, f"{name}_offset")
    if off >= numel:
        raise _value_error(f"{name}_offset {off} is out of range for {name}'s {numel} elements")
    return addr + off * itemsize, itemsize, off


def _signal_value(x, width: int, name: str) -> int:
    v = _int(x, name)
    lo, hi = (-(1 << 31), (1 << 31) - 1) if width == 4 else (-(1 << 63), (1 << 63) - 1)
    if not lo <= v <= hi:
        raise _value_error(f"{name} {v} does not fit the signal's int{8 * width}")
    return v


def _signal_op(x) -> int:
    if isinstance(x, str):
        if x.lower() not in _SIGNAL_OPS:
            raise _value_error(f"signal_op {x!r} is not 'set' or 'add'")
        return _SIGNAL_OPS[x.lower()]
    v = _int(x, "signal_op")
    if v not in (0, 1):
        raise _value_error(f"signal_op {v} is not SET (0) or ADD (1)")
    return v


def _compare_op(x) -> int:
    if isinstance(x, str):
        if x.lower() not in _COMPARE_OPS:
            raise _value_error(f"compare_op {x!r} is not one of {sorted(_COMPARE_OPS)}")
        return _COMPARE_OPS[x.lower()]
    v = _int(x, "compare_op")
    if v not in _COMPARE_NAMES:
        raise _value_error(f"compare_op {v} is not one of 0=eq 1=gt 2=lt 3=ne 4=ge 5=le")
    return v


def _copy_args(target, target_offset, src, src_offset, size, target_sym: bool):
    """Checks a put/get's tensors, offsets and size; returns (target addr, src addr, bytes)."""
    t_addr, t_numel, itemsize, t_dtype = _symmetric(target, "target") if target_sym else _tensor(target, "target")
    s_addr, s_numel, _, s_dtype = _tensor(src, "src") if target_sym else _symmetric(src, "src")
    if t_dtype != s_dtype:
        raise _type_error(f"target ({t_dtype}) and src ({s_dtype}) must have the same dtype")
    toff, soff, n = _index(target_offset, "target_offset"), _index(src_offset, "src_offset"), _index(size, "size")
    _span(t_numel, toff, n, "target", "target_offset")
    _span(s_numel, soff, n, "src", "src_offset")
    return t_addr + toff * itemsize, s_addr + soff * itemsize, n * itemsize


# --------------------------------------------------------------------------- allocation
def empty(*size, dtype=None):
    """A tensor of `size` and `dtype` whose storage lies in the symmetric heap (zero-copy).

    Collective: every rank must call it with the same size and dtype, in the same order;
    the runtime checks this and raises :class:`CollectiveMismatchError` on every rank
    otherwise. The first call initializes the runtime from the framework's rendezvous.
    Contents are uninitialized. Accepts ``empty(4096, dtype=...)``, ``empty((m, k), dtype)``
    or ``empty(m, k, dtype=...)``.

    Raises: ShmemTypeError (dtype), ShmemValueError (negative dims), HeapExhaustedError
    (says what is live; raise SYMMETRIC_MEMORY_HEAP_SIZE), CollectiveMismatchError.
    """
    if dtype is None and size and _handler.is_dtype(size[-1]):
        size, dtype = size[:-1], size[-1]  # the RFC's positional form: empty(shape, dtype)
    if len(size) == 1 and not isinstance(size[0], int) and not _handler.is_tensor(size[0]):
        size = tuple(size[0])
    shape = tuple(_int(d, "size") for d in size)
    if any(d < 0 for d in shape):
        raise _value_error(f"size must be non-negative, got {shape}")
    if dtype is None:
        dtype = _handler.default_dtype()
    try:
        itemsize = _handler.itemsize(dtype)
    except TypeError as e:
        raise _type_error(str(e)) from None
    numel = 1
    for d in shape:
        numel *= d
    nbytes = numel * itemsize
    _ensure_init()
    with _state.lock:
        addr = _C.malloc(nbytes, 64)
        a = _Allocation(addr, nbytes)
        t = _wrap(a, addr, nbytes, shape, dtype)
        _state.add(a)
    return t


def free(tensor) -> None:
    """Collective: returns `tensor`'s heap memory; `tensor` (the one :func:`empty` returned)
    becomes an empty tensor so it can no longer reach the heap.

    Views of it that are still alive on any rank (slices, ``.view()``, NumPy arrays,
    ``get_buffer`` tensors) keep their memory: its bytes are handed out again only once the
    last such view is gone on every rank (checked at each later ``empty``/``free``), so a
    stale view never reads or writes a later allocation.

    Raises: InvalidFreeError (a tensor not from empty(), or freed twice) on every rank,
    CollectiveMismatchError when ranks free different tensors.
    """
    if _sync is not None:
        _sync()
    if not _handler.is_tensor(tensor):
        raise _type_error(f"tensor must be a {_handler.name} tensor, got {type(tensor).__name__}")
    if not _C.is_initialized():
        raise NotInitializedError("free() before any symm.empty() (or after finalize())")
    addr, numel, _, dtype = _handler.describe(tensor)[:4]
    with _state.lock:
        a = _state.allocs.get(addr)
        # A wrong pointer still goes to the runtime: the ranks compare their frees,
        # so every rank reports it instead of the others hanging.
        try:
            token = _C.free_deferred(addr if a is not None else (addr or 1))
        except InvalidFreeError as e:
            if a is not None:
                raise
            raise InvalidFreeError(
                f"free(): this tensor ({numel} elements of {dtype}) is not a live symmetric allocation: "
                f"freed already (free() leaves the tensor empty) or not made by symm.empty() ({e})") from None
        _state.remove(addr)
        a.token = token
        for ref in a.tensors:
            t = ref()
            if t is not None:
                _handler.detach(t)
        if not a.buffers:  # nothing else referenced it: the bytes are reusable at the next allocator call
            _C.release_deferred(token)


def is_symmetric(tensor) -> bool:
    """True when `tensor` lies wholly inside a live allocation of the symmetric heap."""
    if not _handler.is_tensor(tensor) or not _C.is_initialized():
        return False
    addr, numel, itemsize = _handler.describe(tensor)[:3]
    return _state.find(addr, numel * itemsize) is not None


# --------------------------------------------------------------------------- primitives
def shmem_put(target, target_offset, src, src_offset, size, target_rank, *, block_dim=None):
    """Copy `size` elements from local ``src[src_offset:]`` to ``target[target_offset:]`` on
    `target_rank` (push). `target` is symmetric; `src` is any CPU tensor of the same dtype.
    Blocking: when it returns the data is in the target's memory. `block_dim` threads
    split the copy (default ``HYPER_PARALLEL_SHMEM_BLOCK_DIM``).

    Raises: ShmemValueError/ShmemTypeError (arguments, nothing written), PeerDeadError.
    """
    if _sync is not None:
        _sync()
    if _fast_put(target, target_offset, src, src_offset, size, target_rank, block_dim):
        return
    dst, src_addr, nbytes = _copy_args(target, target_offset, src, src_offset, size, True)
    _C.put(dst, src_addr, nbytes, _rank(target_rank), _block_dim(block_dim))


def shmem_get(target, target_offset, src, src_offset, size, target_rank, *, block_dim=None):
    """Copy `size` elements from symmetric ``src[src_offset:]`` on `target_rank` into local
    ``target[target_offset:]`` (pull). Same units, checks and errors as :func:`shmem_put`.
    """
    if _sync is not None:
        _sync()
    if _fast_get(target, target_offset, src, src_offset, size, target_rank, block_dim):
        return
    dst, src_addr, nbytes = _copy_args(target, target_offset, src, src_offset, size, False)
    _C.get(dst, src_addr, nbytes, _rank(target_rank), _block_dim(block_dim))


def shmem_signal_op(signal, signal_offset, signal_value, signal_op, target_rank):
    """Atomically SET (0) or ADD (1) `signal_value` on ``signal[signal_offset]`` at `target_rank`,
    ordered after every earlier put of this thread, waking that rank's waiters.
    """
    if _sync is not None:
        _sync()
    if _fast_signal(signal, signal_offset, signal_value, signal_op, target_rank):
        return
    addr, width, _ = _signal(signal, signal_offset)
    value = _signal_value(signal_value, width, "signal_value")
    op = _signal_op(signal_op)
    _C.signal(addr, width, value, op, _rank(target_rank))


def shmem_wait_for_signal(depend_tensor, signal, signal_offset, compare_value, compare_op) -> int:
    """Block until the local ``signal[signal_offset]`` compares true with `compare_value`
    (signed) and return the value observed. `depend_tensor` orders the wait after that
    tensor's producer in graph mode; eager execution is already ordered, so it is only checked.

    Raises: ShmemTimeoutError after ``HYPER_PARALLEL_SHMEM_TIMEOUT_SEC`` (names rank, signal,
    relation, last value), PeerDeadError within seconds of a peer's death.
    """
    if _sync is not None:
        _sync()
    seen = _fast_wait(depend_tensor, signal, signal_offset, compare_value, compare_op)
    if seen is not None:
        return seen
    if depend_tensor is not None and not _handler.is_tensor(depend_tensor):
        raise _type_error(f"depend_tensor must be a {_handler.name} tensor or None")
    addr, width, off = _signal(signal, signal_offset)
    value = _signal_value(compare_value, width, "compare_value")
    cmp = _compare_op(compare_op)
    return _C.wait_until(addr, width, cmp, value, f"signal[{off}]")


def shmem_put_with_signal(target, target_offset, src, src_offset, size, signal, signal_offset, signal_value,
                          signal_op, target_rank, *, block_dim=None):
    """:func:`shmem_put`, then a fence, then :func:`shmem_signal_op` on `target_rank`: a rank
    that observes the signal observes every element of the put. All arguments (signal ones
    included) are checked before anything is written.
    """
    if _sync is not None:
        _sync()
    if _fast_put_signal(target, target_offset, src, src_offset, size, signal, signal_offset, signal_value, signal_op,
                        target_rank, block_dim):
        return
    dst, src_addr, nbytes = _copy_args(target, target_offset, src, src_offset, size, True)
    sig, width, _ = _signal(signal, signal_offset)
    value = _signal_value(signal_value, width, "signal_value")
    op = _signal_op(signal_op)
    _C.put_signal(dst, src_addr, nbytes, sig, width, value, op, _rank(target_rank), _block_dim(block_dim))


def barrier() -> None:
    """Collective: every earlier put is complete everywhere when any rank leaves.

    Raises: ShmemTimeoutError, PeerDeadError (names the dead rank).
    """
    if _sync is not None:
        _sync()
    _require_init("barrier()")
    _C.barrier()


# --------------------------------------------------------------------------- collectives
def _mode(mode) -> str:
    if mode not in ("push", "pull"):
        raise _value_error(f"mode must be 'push' or 'pull', got {mode!r}")
    return mode


def shmem_allgather(output_tensor, input_tensor, *, mode="push", block_dim=None):
    """Collective. ``output_tensor`` (symmetric, W x numel(input) elements, same dtype) receives
    every rank's ``input_tensor`` concatenated in rank order (flat). Reusable back to back
    with no re-zeroing or barrier; this rank's output is not written by a faster peer before
    this rank enters its next call. ``mode="pull"`` reads the pieces in rank order instead of
    having them pushed. In place is fine: ``input_tensor`` may be this rank's slice of
    ``output_tensor``. Returns ``output_tensor``.

    Raises: ShmemTypeError (dtypes), ShmemValueError (sizes, mode), ShmemTimeoutError, PeerDeadError.
    """
    if _sync is not None:
        _sync()
    if _fast_allgather(output_tensor, input_tensor, mode, block_dim):
        return output_tensor
    o_addr, o_numel, itemsize, o_dtype = _symmetric(output_tensor, "output_tensor")
    i_addr, i_numel, _, i_dtype = _tensor(input_tensor, "input_tensor")
    if o_dtype != i_dtype:
        raise _type_error(f"output_tensor ({o_dtype}) and input_tensor ({i_dtype}) must have the same dtype")
    _require_init("shmem_allgather()")
    w = _state.world
    if o_numel != w * i_numel:
        raise _value_error(f"output_tensor must have world_size x numel(input_tensor) = {w} x {i_numel} = "
                           f"{w * i_numel} elements, has {o_numel}")
    collectives.allgather(o_addr, i_addr, i_numel * itemsize, _mode(mode), _block_dim(block_dim))
    return output_tensor


def shmem_alltoall(send_tensor_list, receive_tensor, receive_list, *, mode="push", block_dim=None):
    """Collective. ``send_tensor_list[p]`` goes to rank p; ``receive_tensor`` (symmetric) receives
    the pieces packed in source-rank order, ``receive_list[q]`` elements (a list of ints or an
    integer tensor) from rank q. Uneven and empty pieces are fine; the offsets are exchanged
    by the library, and a size that disagrees with the sender raises CollectiveMismatchError
    on both sides. In ``mode="pull"`` every send tensor must be symmetric. Returns ``receive_tensor``.
    """
    if _sync is not None:
        _sync()
    if _fast_alltoall(send_tensor_list, receive_tensor, receive_list, mode, block_dim):
        return receive_tensor
    r_addr, r_numel, itemsize, r_dtype = _symmetric(receive_tensor, "receive_tensor")
    _require_init("shmem_alltoall()")
    w = _state.world
    mode = _mode(mode)
    if not isinstance(send_tensor_list, (list, tuple)) or len(send_tensor_list) != w:
        raise _value_error(f"send_tensor_list must be a list of world_size = {w} tensors")
    check = _symmetric if mode == "pull" else _tensor
    addrs, elems = [], []
    for p, t in enumerate(send_tensor_list):
        addr, numel, _, dtype = check(t, _Indexed("send_tensor_list", p))
        if dtype != r_dtype:
            raise _type_error(f"send_tensor_list[{p}] ({dtype}) and receive_tensor ({r_dtype}) must have the same dtype")
        addrs.append(addr)
        elems.append(numel)
    if _handler.is_tensor(receive_list):
        if not _handler.is_integer_dtype(_handler.describe(receive_list)[3]):
            raise _type_error("receive_list must hold integers")
        counts = [int(v) for v in receive_list.tolist()]
    elif isinstance(receive_list, (list, tuple)):
        counts = list(receive_list) if all(type(v) is int for v in receive_list) else [
            _int(v, f"receive_list[{q}]") for q, v in enumerate(receive_list)]
    else:
        raise _type_error(f"receive_list must be a list of ints or an integer tensor, got {type(receive_list).__name__}")
    if len(counts) != w:
        raise _value_error(f"receive_list must have world_size = {w} entries, has {len(counts)}")
    if min(counts, default=0) < 0:
        q = next(q for q, v in enumerate(counts) if v < 0)
        raise _value_error(f"receive_list[{q}] must be >= 0, got {counts[q]}")
    if sum(counts) > r_numel:
        raise _value_error(f"receive_list adds up to {sum(counts)} elements; receive_tensor has {r_numel}")
    collectives.alltoall(addrs, elems, r_addr, counts, itemsize, mode, _block_dim(block_dim))
    return receive_tensor


def _matrix(x, name):
    info = _tensor(x, name)
    shape = _handler.ndim_shape(x)
    if len(shape) != 2:
        raise _value_error(f"{name} must be 2-D, has shape {shape}")
    return info, shape


def _default_block_rows(m: int, world: int) -> int:
    """The RFC's four blocks per rank, none under 256 rows (smaller CPU matmuls lose more than
    an earlier start gains: measured 4% at 256 rows, 22% at 128, fp32). On a host whose cores
    the ranks already fill nothing runs beside the matmuls, so one block per rank."""
    if not spare_cores(world):
        return max(1, m)
    return max(1, -(-m // 4), min(m, 256))


def _overlap(overlap, world: int) -> bool:
    if overlap is None:
        return spare_cores(world)
    if not isinstance(overlap, bool):
        raise _type_error(f"overlap must be True, False or None, got {overlap!r}")
    return overlap


def fused_all_gather_matmul(a, b, c, gather_out, signal, block_size=None, *, mode="push", overlap=None):
    """Collective. ``gather_out = AllGather(a)`` along dim 0 and ``c = gather_out @ b``, overlapped:
    each block of ``block_size`` rows of ``a`` is pushed with a signal of its own, and the
    matmul of a block starts as soon as its signal is seen while later blocks are in flight.

    Shapes: a (m, k); b (k, n); gather_out symmetric (W*m, k); c (W*m, n) or None (allocated);
    one dtype throughout. ``signal``: symmetric int32/int64 with at least W * ceil(m/block_size)
    elements, zeroed once after allocation (never again: calls use growing epochs).
    ``block_size`` defaults to max(ceil(m / 4), min(m, 256)) rows — the RFC's four blocks per rank,
    none smaller than 256 rows — on a host with a core to spare per rank, and to m (one block per
    rank) on a host the ranks already fill. The row partition is fixed by ``block_size``, so
    results never depend on arrival timing. ``overlap=True`` pushes from a worker thread while
    this thread computes; the default (None) does so only on hosts with a core to spare per rank.
    Returns (gather_out, c).
    """
    if _sync is not None:
        _sync()
    (_, _, itemsize, dtype), (m, k) = _matrix(a, "a")
    (_, _, _, b_dtype), (kb, n) = _matrix(b, "b")
    _require_init("fused_all_gather_matmul()")
    w = _state.world
    if kb != k:
        raise _value_error(f"a is ({m}, {k}) but b is ({kb}, {n}): inner dimensions differ")
    (_, _, _, g_dtype) = _symmetric(gather_out, "gather_out")
    if _handler.ndim_shape(gather_out) != (w * m, k):
        raise _value_error(f"gather_out must have shape (world_size*m, k) = ({w * m}, {k}), has {_handler.ndim_shape(gather_out)}")
    if c is None:
        c = _handler.new_empty((w * m, n), dtype)
    (_, _, _, c_dtype), c_shape = _matrix(c, "c")
    if c_shape != (w * m, n):
        raise _value_error(f"c must have shape (world_size*m, n) = ({w * m}, {n}), has {c_shape}")
    for name, dt in (("b", b_dtype), ("gather_out", g_dtype), ("c", c_dtype)):
        if dt != dtype:
            raise _type_error(f"{name} ({dt}) must have a's dtype ({dtype})")
    if block_size is None:
        block_rows = _default_block_rows(m, w)
    else:
        block_rows = _int(block_size, "block_size")
        if block_rows < 1:
            raise _value_error(f"block_size must be >= 1, got {block_rows}")
    nblocks = -(-m // block_rows)
    sig_addr, s_numel, width = _signal_tensor(signal)
    if s_numel < w * nblocks:
        raise _value_error(f"signal must have at least world_size * ceil(m / block_size) = {w} * {nblocks} = "
                           f"{w * nblocks} elements, has {s_numel}")
    return fused.all_gather_matmul(_handler, a, b, c, gather_out, (sig_addr, width), m=m, k=k,
                                   block_rows=block_rows, nblocks=nblocks, itemsize=itemsize, mode=_mode(mode),
                                   overlap=_overlap(overlap, w))


def fused_matmul_reduce_scatter(x1, x2, symm_tensor, signal, reduce_op="sum", *, mode="push", overlap=None):
    """Collective. Returns rows [r*m/W, (r+1)*m/W) of the sum (``reduce_op="sum"``) or mean
    (``"avg"``) over ranks of ``x1 @ x2``, on rank r. Partial products go out in the RFC's
    rotated order ``(rank + j) % W`` while the next one is computed; the receiver adds them
    up as they arrive (half precision in float32).

    Shapes: x1 (m, k), x2 (k, n), m divisible by W; ``symm_tensor`` symmetric, x1's dtype, at
    least m*n elements (the landing slots); ``signal`` symmetric int32/int64 with at least W
    elements, zeroed once after allocation. ``overlap=True`` computes one partial per target and
    pushes each from a worker thread while the next is computed; ``False`` computes all partials
    in one matmul (faster where the ranks fill the cores); None (default) picks by host.
    Returns a new (m/W, n) tensor.
    """
    if _sync is not None:
        _sync()
    (_, _, itemsize, dtype), (m, k) = _matrix(x1, "x1")
    (_, _, _, x2_dtype), (k2, n) = _matrix(x2, "x2")
    _require_init("fused_matmul_reduce_scatter()")
    w = _state.world
    if k2 != k:
        raise _value_error(f"x1 is ({m}, {k}) but x2 is ({k2}, {n}): inner dimensions differ")
    if x2_dtype != dtype:
        raise _type_error(f"x2 ({x2_dtype}) must have x1's dtype ({dtype})")
    if m % w:
        raise _value_error(f"x1 has {m} rows, not divisible by world_size {w}")
    if reduce_op not in ("sum", "avg"):
        raise _value_error(f"reduce_op must be 'sum' or 'avg', got {reduce_op!r}")
    _, s_numel, _, s_dtype = _symmetric(symm_tensor, "symm_tensor")
    if s_dtype != dtype:
        raise _type_error(f"symm_tensor ({s_dtype}) must have x1's dtype ({dtype})")
    if s_numel < m * n:
        raise _value_error(f"symm_tensor must have at least m*n = {m * n} elements, has {s_numel}")
    sig_addr, s_numel, width = _signal_tensor(signal)
    if s_numel < w:
        raise _value_error(f"signal must have at least world_size = {w} elements")
    return fused.matmul_reduce_scatter(_handler, x1, x2, symm_tensor, (sig_addr, width), m=m, n=n,
                                       itemsize=itemsize, reduce_op=reduce_op, mode=_mode(mode),
                                       overlap=_overlap(overlap, w))


# --------------------------------------------------------------------------- rendezvous
class SymmetricMemoryHandle:
    """Peer views of one symmetric tensor (in the spirit of torch's symmetric memory)."""

    def __init__(self, tensor, addr, dtype, alloc):
        self._tensor = tensor
        self._addr = addr
        self._dtype = dtype
        self._alloc = alloc
        self.rank = _C.my_pe()
        self.world_size = _C.n_pes()

    @property
    def buffer_ptrs(self):
        """Address of this tensor's copy on every rank, as mapped in this process; None for a rank
        that is not load/store reachable (on another host, or under HYPER_PARALLEL_SHMEM_TRANSPORT=ucx)."""
        return [_C.ptr(self._addr, p) or None for p in range(self.world_size)]

    def get_buffer(self, peer: int, shape, dtype=None, storage_offset: int = 0):
        """A zero-copy tensor over `peer`'s copy of the memory, starting `storage_offset`
        elements (of `dtype`) into it. Loads and stores on it reach the peer directly.

        Raises: ShmemValueError when the view would leave the allocation; ShmemUnsupportedError when
        `peer` is not load/store reachable (another host: use shmem_put/shmem_get instead).
        """
        p = _rank(peer, "peer")
        if dtype is None:
            dtype = self._dtype
        itemsize = _handler.itemsize(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        numel = 1
        for d in shape:
            numel *= _index(d, "shape")
        off = _index(storage_offset, "storage_offset") * itemsize
        begin = self._addr - self._alloc.addr + off
        if begin + numel * itemsize > self._alloc.nbytes:
            raise _value_error(f"a view of {numel} x {dtype} at storage_offset {storage_offset} runs past the "
                               f"{self._alloc.nbytes}-byte allocation")
        if self._alloc.addr not in _state.allocs:
            raise _value_error("the tensor behind this handle was freed")
        base = _C.ptr(self._alloc.addr, p)
        if not base:
            raise ShmemUnsupportedError(
                f"rank {p} is reached through {_C.peer_transport(p)}, not shared memory: it has no direct "
                "view here; use shmem_put/shmem_get")
        return _wrap(self._alloc, base + begin, numel * itemsize, shape, dtype)

    def barrier(self):
        barrier()


def rendezvous(tensor, group=None) -> SymmetricMemoryHandle:
    """Handle giving `rank`, `world_size`, `buffer_ptrs` and `get_buffer(peer, shape, dtype,
    storage_offset)` for a symmetric tensor. Needs no communication: symmetric allocation
    already puts the tensor at the same offset on every rank. `group` must be None or the
    whole job (sub-groups are not supported yet).
    """
    if group is not None:
        size = getattr(group, "size", None)
        if size is None or size() != get_world_size():
            raise NotImplementedError("rendezvous on a sub-group is not supported; pass group=None")
    addr, numel, itemsize, dtype = _symmetric(tensor, "tensor")
    return SymmetricMemoryHandle(tensor, addr, dtype, _state.find(addr, numel * itemsize))


# --------------------------------------------------------------------------- lifecycle / info
def _rank_and_world(what: str):
    """(rank, world size): the runtime's once initialized, the framework's before."""
    if _C.is_initialized():
        return _C.my_pe(), _C.n_pes()
    r = _handler.framework_rank()
    if r is None:
        raise NotInitializedError(f"no {what} yet: initialize the framework's process group first")
    return r


def get_rank() -> int:
    """This process's rank in the symmetric-memory job (the framework's rank before init)."""
    return _rank_and_world("rank")[0]


def get_world_size() -> int:
    """Number of ranks in the job (the framework's world size before init)."""
    return _rank_and_world("world size")[1]


def finalize() -> None:
    """Collective: barrier, then release the heap, threads and sockets. Every symmetric tensor
    becomes empty. A later :func:`empty` starts a new job. No-op when not initialized.
    """
    if _sync is not None:
        _sync()
    if not _C.is_initialized():
        return
    with _state.lock:
        for a in list(_state.allocs.values()):
            for ref in a.tensors:
                t = ref()
                if t is not None:
                    _handler.detach(t)
        _state.allocs.clear()
        _state.bases.clear()
        _state.last = None
        _state.world = 0
        _comm.reset()
        _C.finalize()


def debug_state() -> dict:
    """Config, heap size, bytes live and peak, live allocations, lost ranks, platform."""
    d = json.loads(_C.debug_state())
    d["platform"] = _handler.name
    with _state.lock:
        d["python_live_tensors"] = sum(1 for a in _state.allocs.values() for r in a.tensors if r() is not None)
    return d
