"""MindSpore adapter: MindSpore tensors <-> (address, elements, itemsize).

As thin as the torch adapter, with two things torch does not need:

* PyNative mode runs operators asynchronously: a tensor returned by an op may not
  hold its values yet, and an op queued before a put may read memory the put is about
  to change. :meth:`sync` drains the queue; the unified API calls it before every
  operation that reads or writes memory by address, and the tensor ops below that
  produce data the runtime will read (``matmul``) return only once it is there.
* MindSpore's CPU build has no in-place arithmetic kernels that work on tensors over
  external memory (``add_``/``fill_``/``zero_`` fail or leave the memory unchanged), so
  accumulation here is out of place and writes into existing tensors go through
  ``t[a:b] = x``, which does write in place (``t[...] = x`` does not: it rebinds ``t`` to
  new memory). bfloat16 has no CPU slice-copy kernel, so bfloat16 writes go through a
  uint16 view of the same memory.

Never imports torch.
"""

from __future__ import annotations

import os

import mindspore as ms
import numpy as np
from mindspore.common.api import _pynative_executor

# Every fixed-size MindSpore dtype and its NumPy twin (bfloat16 travels as uint16 bits).
_NP_OF = {
    ms.bool_: np.bool_,
    ms.int8: np.int8,
    ms.int16: np.int16,
    ms.int32: np.int32,
    ms.int64: np.int64,
    ms.uint8: np.uint8,
    ms.uint16: np.uint16,
    ms.uint32: np.uint32,
    ms.uint64: np.uint64,
    ms.float16: np.float16,
    ms.float32: np.float32,
    ms.float64: np.float64,
    ms.complex64: np.complex64,
    ms.complex128: np.complex128,
    ms.bfloat16: np.uint16,
}
_ITEMSIZE = {d: np.dtype(n).itemsize for d, n in _NP_OF.items()}
_INTEGER_DTYPES = {ms.int8, ms.int16, ms.int32, ms.int64, ms.uint8, ms.uint16, ms.uint32, ms.uint64}
_HALF = {ms.float16, ms.bfloat16}
_PORT_OFFSET = 13  # the RFC's bootstrap port: the msrun scheduler's port + 13


def _store_view(t):
    """`t` itself, or for bfloat16 a uint16 view of the same memory (CPU setitem lacks bfloat16)."""
    return t.view(ms.uint16) if t.dtype == ms.bfloat16 else t


def _refuse_graph_mode():
    """The API drives the runtime from Python between operators (PyNative). In a function that
    MindSpore compiles into a graph (``ms.jit``, GRAPH_MODE) it cannot run; registering the
    module makes the compiler say so by name instead of failing deep inside the parser."""
    try:
        from mindspore.graph._utils.check_jit_forbidden_api import add_jit_forbidden_module
    except ImportError:  # the registry moved: graph compilation then fails less clearly
        return
    add_jit_forbidden_module("hyper_parallel.core.symmetric_memory")


_refuse_graph_mode()


def _known_dtype(x) -> bool:
    return isinstance(x, ms.dtype.Type) and x in _NP_OF


class MindSporeSymmetricMemoryHandler:
    """The MindSpore side of the handler contract used by the unified API."""

    name = "mindspore"
    int32 = ms.int32
    int64 = ms.int64
    float32 = ms.float32

    # ------------------------------------------------------------ rendezvous
    @staticmethod
    def _comm_rank():
        """(rank, world) from mindspore.communication when it is initialised, else None."""
        from mindspore.communication import GlobalComm

        if not GlobalComm.INITED:
            return None
        from mindspore.communication import get_group_size, get_rank

        return get_rank(), get_group_size()

    @staticmethod
    def _env_rank():
        """(rank, world) from msrun's RANK_ID/RANK_SIZE, or RANK/WORLD_SIZE, else None."""
        for r, w in (("RANK_ID", "RANK_SIZE"), ("RANK", "WORLD_SIZE")):
            if r in os.environ and w in os.environ:
                try:
                    return int(os.environ[r]), int(os.environ[w])
                except ValueError:
                    raise RuntimeError(f"{r}={os.environ[r]!r} / {w}={os.environ[w]!r} are not integers") from None
        return None

    def rendezvous_info(self, make_unique_id, timeout_sec: float):
        """(rank, world_size, unique_id or None, endpoint) of this process's job, in this order:

        1. ``HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT`` set: rank 0 listens there (authenticated
           with ``HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET`` when set).
        2. ``mindspore.communication`` initialised: rank 0 makes a unique id (fresh 128-bit
           secret) and every rank receives it through the framework's all-gather.
        3. Launched by ``msrun`` (``RANK_ID``, ``RANK_SIZE``, ``MS_SCHED_HOST``, ``MS_SCHED_PORT``):
           rank 0 listens on ``MS_SCHED_PORT + 13`` as in the RFC (``- 13`` past 65535), never the
           scheduler's own port; authenticated only with ``HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET``
           (exported before msrun), since msrun shares nothing else that strangers could not read.
           msrun also runs the script in its scheduler process; without step 2 the script must
           end there by itself (``MS_ROLE == "MS_SCHED"``), and this raises if it does not.
        """
        endpoint = os.environ.get("HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT", "")
        comm = self._comm_rank()
        ranks = comm or self._env_rank()
        if ranks is None:
            raise RuntimeError(
                "symmetric memory needs the job's ranks: launch with msrun, call "
                "mindspore.communication.init() before the first symm.empty(), or set "
                "HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT=tcp://host:port together with RANK_ID and RANK_SIZE"
            )
        rank, world = ranks
        if endpoint:
            return rank, world, None, endpoint
        if comm is not None:
            from mindspore.mint.distributed import all_gather_object

            mine = make_unique_id() if rank == 0 else b""
            gathered = [None] * world
            all_gather_object(gathered, mine)
            return rank, world, bytes(gathered[0]), ""
        if os.environ.get("MS_ROLE") == "MS_SCHED":
            raise RuntimeError(
                "this process is msrun's scheduler (MS_ROLE=MS_SCHED), which runs the script too: call "
                "mindspore.communication.init() before the first symm.empty() (the scheduler serves the job "
                "inside it), or end the script early when MS_ROLE is MS_SCHED"
            )
        host, port = os.environ.get("MS_SCHED_HOST"), os.environ.get("MS_SCHED_PORT")
        if not host or not port:
            raise RuntimeError(
                "RANK_ID/RANK_SIZE are set but MS_SCHED_HOST/MS_SCHED_PORT are not: launch with msrun, "
                "call mindspore.communication.init(), or set HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT"
            )
        p = int(port)
        derived = p + _PORT_OFFSET if p + _PORT_OFFSET <= 65535 else p - _PORT_OFFSET
        return rank, world, None, f"tcp://{host}:{derived}"

    def framework_rank(self):
        return self._comm_rank() or self._env_rank()

    def fast_dtype_ids(self):
        """None: the fast path compares MindSpore's dtype objects themselves."""
        return None

    def api_loaded(self, api) -> None:
        """Nothing to hook: MindSpore's graph mode uses the kernels of graph.py."""

    def group_ranks(self, group):
        if not isinstance(group, str):
            raise TypeError(
                f"group must be a MindSpore group name, a list of ranks or None, got {type(group).__name__}"
            )
        from mindspore import communication as comm

        if group in (comm.HCCL_WORLD_COMM_GROUP, comm.NCCL_WORLD_COMM_GROUP, comm.MCCL_WORLD_COMM_GROUP):
            return None
        try:
            return list(comm.get_process_group_ranks(group))
        except Exception as e:  # MindSpore raises RuntimeError/ValueError by backend
            raise ValueError(
                f"group {group!r}: MindSpore cannot list its ranks ({e}); pass a list of ranks instead"
            ) from None

    # ------------------------------------------------------------ tensors
    def is_tensor(self, x) -> bool:
        return isinstance(x, ms.Tensor)

    def sync(self) -> None:
        """Wait for every queued operator of this process (PyNative runs them asynchronously)."""
        _pynative_executor.sync()

    def describe(self, t):
        """(addr, numel, itemsize, dtype, contiguous, device type): sizes in elements, addr in bytes."""
        dev = t.device
        return (
            t.data_ptr(),
            t.size,
            t.itemsize,
            t.dtype,
            t.is_contiguous(),
            "cpu" if dev == "CPU" else str(dev).split(":")[0].lower(),
        )

    def fast_protocol(self):
        """What the binding's fast path reads: (kind, tensor type, {dtype: itemsize}, int32, int64, reader,
        names). MindSpore tensors are read through their properties; the C++ tensor's own ``_dtype``,
        ``_size`` and ``_data_ptr`` (half the cost of the public Python wrappers) where this MindSpore
        has them and they agree with the public ones on a probe tensor."""
        names = None
        try:
            probe = ms.Tensor(np.arange(3, dtype=np.int32))
            if probe._dtype is probe.dtype and probe._size == probe.size and probe._data_ptr() == probe.data_ptr():
                names = {"dtype": "_dtype", "numel": "_size", "data_ptr": "_data_ptr"}
        except Exception:  # noqa: BLE001 - another MindSpore: the public properties are read
            names = None
        return "mindspore", ms.Tensor, dict(_ITEMSIZE), ms.int32, ms.int64, None, names

    def is_dtype(self, x) -> bool:
        return _known_dtype(x)

    def itemsize(self, dtype) -> int:
        if not _known_dtype(dtype):
            raise TypeError(f"dtype must be a fixed-size mindspore dtype (e.g. mindspore.float32), got {dtype!r}")
        return _ITEMSIZE[dtype]

    def default_dtype(self):
        return ms.float32

    def is_integer_dtype(self, dtype) -> bool:
        return dtype in _INTEGER_DTYPES

    def scalar_int(self, t, name: str) -> int:
        if t.size != 1:
            raise ValueError(
                f"{name} must be an int or a one-element integer tensor, got a tensor of shape {tuple(t.shape)}"
            )
        if t.dtype not in _INTEGER_DTYPES:
            raise TypeError(f"{name} must be an int or a one-element integer tensor, got dtype {t.dtype}")
        return int(t.item())

    def wrap(self, buf, nbytes: int, shape, dtype):
        """A tensor of `shape`/`dtype` whose memory IS the memory of ctypes buffer `buf` (no copy).

        The tensor holds the NumPy array over `buf`, and every view of it holds that too.
        """
        arr = np.frombuffer(buf, dtype=np.uint8)[:nbytes].view(_NP_OF[dtype]).reshape(shape)
        t = ms.Tensor.from_numpy(arr)
        return t.view(ms.bfloat16) if dtype == ms.bfloat16 else t

    def detach(self, t) -> None:
        """Cut a freed tensor off the heap: it becomes an empty tensor with memory of its own."""
        t.set_(ms.mint.empty((0,), dtype=t.dtype))

    # ------------------------------------------------------------ tensor ops (algorithms)
    # Results the runtime reads by address (matmul) are complete when returned.
    def rows(self, t, r0: int, r1: int):
        return t[r0:r1]

    def flat_view(self, t, count: int, shape):
        return t.reshape(-1)[:count].reshape(shape)

    def matmul(self, a, b):
        if a.dtype == ms.bfloat16:  # the CPU MatMul kernel has no bfloat16: float32, rounded once
            out = ms.ops.matmul(a.astype(ms.float32), b.astype(ms.float32)).astype(ms.bfloat16)
        else:
            out = ms.ops.matmul(a, b)
        _pynative_executor.sync()
        return out

    def matmul_into(self, a, b, out, r0: int, r1: int):
        """out[r0:r1] = a @ b, written in place (slice assignment writes into out's memory)."""
        _store_view(out)[r0:r1] = _store_view(self.matmul(a, b))

    def accumulate(self, acc, x):
        """acc + x; returns the accumulator to use from now on (a new tensor here)."""
        return acc + x

    def add(self, x, y, dtype):
        """A new tensor x + y in `dtype`."""
        return (x if x.dtype == dtype else x.astype(dtype)) + y

    def scale(self, acc, factor: float):
        """acc * factor (integers: divided by 1/factor, rounded toward zero); returns the result."""
        if acc.is_floating_point():
            return acc * factor
        return ms.ops.div(acc, round(1 / factor), rounding_mode="trunc").astype(acc.dtype)

    def copy_as(self, t, dtype):
        return t.copy() if t.dtype == dtype else t.astype(dtype)

    def new_empty(self, shape, dtype):
        return ms.mint.empty(tuple(shape), dtype=dtype)

    def cast(self, t, dtype):
        return t if t.dtype == dtype else t.astype(dtype)

    def accumulate_dtype(self, t):
        """Half-precision partial sums are accumulated in float32."""
        return ms.float32 if t.dtype in _HALF else t.dtype

    def ndim_shape(self, t):
        return tuple(t.shape)

    # ------------------------------------------------------------ autograd
    # MindSpore's autodiff records Cells, not tensors that require grad: every synchronous MoE
    # call runs inside a Cell with a bprop (moe_bprop.py), whether or not a gradient follows.
    records_moe = True

    def wants_grad(self, *tensors) -> bool:
        """Nothing marks a MindSpore tensor as needing grad in PyNative: see records_moe."""
        return False

    @property
    def moe_autograd(self):
        """How MoE dispatch and combine are differentiated (dispatch / combine wrappers)."""
        from hyper_parallel.platform.mindspore.symmetric_memory import moe_bprop

        return moe_bprop
