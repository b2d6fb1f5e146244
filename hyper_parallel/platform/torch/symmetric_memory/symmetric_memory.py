"""PyTorch adapter: torch tensors <-> (address, elements, itemsize).

Thin on purpose. Everything that is not about torch (validation, units, the
algorithms) lives in :mod:`hyper_parallel.core.symmetric_memory`; this file
only knows how to look inside a torch tensor, how to wrap heap memory as one
without copying, and how to find the job's peers through torch.distributed.
"""

from __future__ import annotations

import datetime
import os

import torch

_INTEGER_DTYPES = {torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8}
for _name in ("uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        _INTEGER_DTYPES.add(getattr(torch, _name))


class TorchSymmetricMemoryHandler:
    """The torch side of the handler contract used by the unified API."""

    name = "torch"
    int32 = torch.int32
    int64 = torch.int64
    float32 = torch.float32

    _store_generation = 0
    sync = None  # eager torch on the CPU has finished an op when it returns: nothing to drain

    def api_loaded(self, api) -> None:
        """The public API module `api` is complete: torch.compile may now trace its functions."""
        from hyper_parallel.platform.torch.symmetric_memory import _compile

        _compile.install(api)

    # ------------------------------------------------------------ rendezvous
    def rendezvous_info(self, make_unique_id, timeout_sec: float):
        """(rank, world_size, unique_id or None, endpoint) of this process's job.

        With ``HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT`` set, rank and world size come
        from torch.distributed (or RANK/WORLD_SIZE) and rank 0 listens on the endpoint.
        Otherwise rank 0 opens a listener on a port the kernel picks and publishes
        the unique id (address, port, job secret) in the default process group's store.
        """
        import torch.distributed as dist

        endpoint = os.environ.get("HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT", "")
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
        elif endpoint and "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        else:
            raise RuntimeError(
                "symmetric memory needs the job's ranks: call torch.distributed.init_process_group() "
                "before the first symm.empty(), or set HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT=tcp://host:port "
                "together with RANK and WORLD_SIZE"
            )
        if endpoint:
            return rank, world, None, endpoint
        store = dist.distributed_c10d._get_default_store()
        TorchSymmetricMemoryHandler._store_generation += 1
        key = f"hyper_parallel/symmetric_memory/unique_id/{TorchSymmetricMemoryHandler._store_generation}"
        if rank == 0:
            uid = make_unique_id()
            store.set(key, uid)
        else:
            try:
                # inf ("wait forever") has no timedelta; a billion seconds is as good.
                store.wait([key], datetime.timedelta(seconds=min(timeout_sec, 1e9)))
            except Exception as e:  # the store raises its own timeout type per backend
                raise TimeoutError(
                    f"rank {rank}: rank 0 did not publish the symmetric-memory unique id within "
                    f"{timeout_sec} s (did every rank call symm.empty()?): {e}"
                ) from e
            uid = store.get(key)
        return rank, world, bytes(uid), ""

    def framework_rank(self):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return None

    def group_ranks(self, group):
        import torch.distributed as dist

        if not dist.is_available():
            raise TypeError("group: torch.distributed is not available; pass a list of ranks")
        if group is dist.GroupMember.NON_GROUP_MEMBER:
            raise ValueError("group: this rank is not a member of the process group")
        if not isinstance(group, dist.ProcessGroup):
            raise TypeError(f"group must be a torch ProcessGroup, a list of ranks or None, got {type(group).__name__}")
        if group is dist.GroupMember.WORLD:
            return None
        return dist.get_process_group_ranks(group)

    # ------------------------------------------------------------ tensors
    def is_tensor(self, x) -> bool:
        return isinstance(x, torch.Tensor)

    def describe(self, t: torch.Tensor):
        """(addr, numel, itemsize, dtype, contiguous, device type): sizes in elements, addr in bytes.

        A plain tuple: this runs on every call, where an object would cost a microsecond.
        """
        if t.layout != torch.strided:
            raise TypeError(f"a {t.layout} tensor has no flat memory to address; use a dense tensor (.to_dense())")
        if t.is_meta:
            raise TypeError("a tensor on the meta device holds no memory")
        n = t.numel()
        if n:
            return t.data_ptr(), n, t.element_size(), t.dtype, t.is_contiguous(), "cpu" if t.is_cpu else t.device.type
        # torch reports data_ptr() == 0 for empty tensors; their place is still in the storage.
        item = t.element_size()
        return (
            t.untyped_storage().data_ptr() + t.storage_offset() * item,
            0,
            item,
            t.dtype,
            t.is_contiguous(),
            "cpu" if t.is_cpu else t.device.type,
        )

    def fast_protocol(self):
        """What the binding's fast path reads: (kind, tensor type, {dtype: itemsize}, int32, int64, reader, names).

        With the tensor reader built (it is when torch was importable at build time), tensors are
        read from their C++ objects and int32/int64 are given as the reader's dtype codes.
        """
        dtypes = {d for d in vars(torch).values() if isinstance(d, torch.dtype)}
        itemsizes = {d: d.itemsize for d in dtypes if d.itemsize}
        try:
            from hyper_parallel import _torch_tensor_reader as reader
        except ImportError:  # built without torch: the Python methods are read instead
            return "torch", torch.Tensor, itemsizes, torch.int32, torch.int64, None, None
        return (
            "torch",
            torch.Tensor,
            itemsizes,
            reader.dtype_code(torch.int32),
            reader.dtype_code(torch.int64),
            reader.capsule(),
            None,
        )

    def fast_dtype_ids(self):
        """{dtype: what the fast path's tensor reader reports for it}, or None without the reader."""
        try:
            from hyper_parallel import _torch_tensor_reader as reader
        except ImportError:
            return None
        return {d: reader.dtype_code(d) for d in vars(torch).values() if isinstance(d, torch.dtype) and d.itemsize}

    def is_dtype(self, x) -> bool:
        return isinstance(x, torch.dtype)

    def itemsize(self, dtype) -> int:
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
        return torch.empty((), dtype=dtype).element_size()

    def default_dtype(self):
        return torch.get_default_dtype()

    def is_integer_dtype(self, dtype) -> bool:
        return dtype in _INTEGER_DTYPES

    def scalar_int(self, t: torch.Tensor, name: str) -> int:
        if t.numel() != 1:
            raise ValueError(
                f"{name} must be an int or a one-element integer tensor, got a tensor of shape {tuple(t.shape)}"
            )
        if t.dtype not in _INTEGER_DTYPES:
            raise TypeError(f"{name} must be an int or a one-element integer tensor, got dtype {t.dtype}")
        if t.is_meta or t.layout != torch.strided:
            raise TypeError(
                f"{name} must be an int or a one-element integer tensor with a value, got a "
                f"{'meta' if t.is_meta else str(t.layout)} tensor"
            )
        return int(t.item())

    def wrap(self, buf, nbytes: int, shape, dtype) -> torch.Tensor:
        """A tensor of `shape`/`dtype` whose storage IS the memory of ctypes buffer `buf` (no copy).

        The storage keeps `buf` alive as long as any tensor or view over it lives; the tensor
        is not itself a view (no ``_base``), so :meth:`detach` drops the last reference it holds.
        """
        storage = torch.frombuffer(buf, dtype=torch.uint8).untyped_storage()
        return torch.empty((0,), dtype=dtype).set_(storage, 0, shape)

    def detach(self, t: torch.Tensor) -> None:
        """Cut a freed tensor off the heap: it becomes an empty tensor with storage of its own."""
        with torch.no_grad():
            t.set_()

    # ------------------------------------------------------------ tensor ops (algorithms)
    # The protocol the algorithms compute through; nothing else of torch is used there.
    def rows(self, t, r0: int, r1: int):
        """Rows [r0, r1) of a 2-D tensor, without copying."""
        return t[r0:r1]

    def flat_view(self, t, count: int, shape):
        """The first `count` elements of `t`, viewed as `shape`, without copying."""
        return t.reshape(-1)[:count].view(shape)

    def matmul(self, a, b):
        return torch.matmul(a, b)

    def matmul_into(self, a, b, out, r0: int, r1: int):
        """out[r0:r1] = a @ b, written in place."""
        torch.matmul(a, b, out=out[r0:r1])

    def accumulate(self, acc, x):
        """acc += x; returns the accumulator to use from now on (acc itself here)."""
        return acc.add_(x)

    def add(self, x, y, dtype):
        """A new tensor x + y in `dtype` (computed in one pass)."""
        return torch.add(x if x.dtype == dtype else x.to(dtype), y)

    def scale(self, acc, factor: float):
        """acc * factor in place (integers: divided by 1/factor, rounded toward zero); returns acc."""
        if acc.dtype.is_floating_point:
            return acc.mul_(factor)
        return acc.div_(round(1 / factor), rounding_mode="trunc")

    def copy_as(self, t, dtype):
        """A new tensor with t's values in `dtype` (always a copy)."""
        return t.to(dtype, copy=True)

    def new_empty(self, shape, dtype):
        return torch.empty(shape, dtype=dtype)

    def cast(self, t, dtype):
        return t if t.dtype == dtype else t.to(dtype)

    def accumulate_dtype(self, t):
        """Half-precision partial sums are accumulated in float32."""
        return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype

    def ndim_shape(self, t):
        return tuple(t.shape)

    # ------------------------------------------------------------ autograd
    records_moe = False  # MoE calls are recorded for autograd only when wants_grad says so

    def wants_grad(self, *tensors) -> bool:
        """Whether a call on these tensors (None: absent) must be recorded for autograd."""
        return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)

    @property
    def moe_autograd(self):
        """How MoE dispatch and combine are differentiated (dispatch / combine wrappers)."""
        from hyper_parallel.platform.torch.symmetric_memory import moe_autograd

        return moe_autograd
