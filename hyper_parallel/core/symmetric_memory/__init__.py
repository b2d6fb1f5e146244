"""One-sided communication over a symmetric heap, for PyTorch and MindSpore.

Example (ranks 0 and 1)::

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
* ``signal_op``: :class:`SignalOp` (SET = 0/"set", ADD = 1/"add").
  ``compare_op``: :class:`CompareOp` (EQ = 0/"eq", GT = 1/"gt", LT = 2/"lt", NE = 3/"ne",
  GE = 4/"ge", LE = 5/"le").
* Symmetric tensors come from :func:`empty`; a remote ``target``/``src``/``signal``
  must be one. Signals are int32 or int64 symmetric tensors.
* Tensors are treated as flat arrays and must be contiguous and on the CPU.
* Collectives take ``group=``: None (every rank), a list of global ranks, a torch
  ``ProcessGroup`` or a MindSpore group name. Only the group's members call; "world size",
  ranks, roots and list positions are then the group's, in the order its ranks are listed.
  Each group has its own epochs: groups run collectives concurrently and back to back, ranks
  outside a group never block on it, and a member's death fails only its groups' calls.

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
the documentation's page docs/several-hosts.md), ``HYPER_PARALLEL_PLATFORM``.

This module is the public surface; the shared pieces (binding, handler, errors), the process's
state, the argument checks and the rendezvous handle live in ``_base``, ``_state``, ``_checks``
and ``_handle``.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from hyper_parallel.core.signals import CompareOp, SignalOp
from hyper_parallel.core.symmetric_memory._base import (
    _C,
    BootstrapError,
    CollectiveMismatchError,
    CompareOpArg,
    Dtype,
    HeapExhaustedError,
    IntArg,
    InvalidFreeError,
    NotInitializedError,
    PeerDeadError,
    ShmemError,
    ShmemTimeoutError,
    ShmemTypeError,
    ShmemUnsupportedError,
    ShmemValueError,
    SignalOpArg,
    Tensor,
    _handler,
    _sync,
    _type_error,
    _value_error,
)

# Private helpers are imported by name too: tests reach some as symm._x.
from hyper_parallel.core.symmetric_memory._checks import (
    _algorithm,
    _block_dim,
    _compare_op,  # noqa: F401 (reached through this module: tests of the argument conversions)
    _copy_args,
    _default_block_rows,
    _group,
    _group_pes,  # noqa: F401 (the compiled ops reach it through this module)
    _group_rank,
    _index,  # noqa: F401 (the compiled ops reach it through this module)
    _Indexed,
    _int,
    _matrix,
    _mode,
    _overlap,
    _reduce_dtype,
    _reduce_op,
    _signal_op,  # noqa: F401 (reached through this module: tests of the argument conversions)
    _signal_request,
    _signal_tensor,
    _symmetric,
    _tensor,
    _wait_request,
)
from hyper_parallel.core.symmetric_memory._handle import SymmetricMemoryHandle
from hyper_parallel.core.symmetric_memory._moe import (
    MoeBuffer,
    MoeCombineWork,
    MoeDispatchWork,
    MoeHandle,
    moe_buffers,
    shmem_moe_buffer,
    shmem_moe_combine,
    shmem_moe_dispatch,
)
from hyper_parallel.core.symmetric_memory._state import _Allocation, _ensure_init, _require_init, _state, _wrap

# The algorithms import nothing from this package's API; imported once here, not per call (an
# import statement costs ~0.5 us even when the module is loaded).
from hyper_parallel.core.symmetric_memory.algorithms import _comm, collectives, fused

__all__ = [
    "empty",
    "free",
    "is_symmetric",
    "shmem_put",
    "shmem_get",
    "shmem_signal_op",
    "shmem_wait_for_signal",
    "shmem_put_with_signal",
    "barrier",
    "rendezvous",
    "get_rank",
    "get_world_size",
    "finalize",
    "debug_state",
    "shmem_allgather",
    "shmem_alltoall",
    "shmem_allreduce",
    "shmem_reduce_scatter",
    "shmem_broadcast",
    "fused_all_gather_matmul",
    "fused_matmul_reduce_scatter",
    "shmem_moe_buffer",
    "shmem_moe_dispatch",
    "shmem_moe_combine",
    "MoeBuffer",
    "MoeHandle",
    "MoeDispatchWork",
    "MoeCombineWork",
    "ShmemError",
    "ShmemValueError",
    "ShmemTypeError",
    "ShmemTimeoutError",
    "PeerDeadError",
    "HeapExhaustedError",
    "InvalidFreeError",
    "CollectiveMismatchError",
    "BootstrapError",
    "NotInitializedError",
    "ShmemUnsupportedError",
    "SignalOp",
    "CompareOp",
    "SymmetricMemoryHandle",
]

SIGNAL_SET, SIGNAL_ADD = SignalOp.SET, SignalOp.ADD
CMP_EQ, CMP_GT, CMP_LT, CMP_NE, CMP_GE, CMP_LE = (
    CompareOp.EQ,
    CompareOp.GT,
    CompareOp.LT,
    CompareOp.NE,
    CompareOp.GE,
    CompareOp.LE,
)
_fast_put, _fast_get, _fast_put_signal = _C.fast_put, _C.fast_get, _C.fast_put_signal
_fast_signal, _fast_wait = _C.fast_signal, _C.fast_wait
_fast_allgather, _fast_alltoall, _fast_allreduce = _C.fast_allgather, _C.fast_alltoall, _C.fast_allreduce
_fast_reduce_scatter, _fast_broadcast = _C.fast_reduce_scatter, _C.fast_broadcast


# --------------------------------------------------------------------------- allocation
def empty(*size: Any, dtype: Optional[Dtype] = None) -> Tensor:
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


def free(tensor: Tensor) -> None:
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
                f"freed already (free() leaves the tensor empty) or not made by symm.empty() ({e})"
            ) from None
        _state.remove(addr)
        a.token = token
        for ref in a.tensors:
            t = ref()
            if t is not None:
                _handler.detach(t)
        if not a.buffers:  # nothing else referenced it: the bytes are reusable at the next allocator call
            _C.release_deferred(token)


def is_symmetric(tensor: Tensor) -> bool:
    """True when `tensor` lies wholly inside a live allocation of the symmetric heap."""
    if not _handler.is_tensor(tensor) or not _C.is_initialized():
        return False
    addr, numel, itemsize = _handler.describe(tensor)[:3]
    return _C.in_live_allocation(addr, numel * itemsize)


# --------------------------------------------------------------------------- primitives
def shmem_put(
    target: Tensor,
    target_offset: IntArg,
    src: Tensor,
    src_offset: IntArg,
    size: IntArg,
    target_rank: IntArg,
    *,
    block_dim: Optional[int] = None,
) -> None:
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
    _C.put(*_copy_args(target, target_offset, src, src_offset, size, target_rank, block_dim, True))


def shmem_get(
    target: Tensor,
    target_offset: IntArg,
    src: Tensor,
    src_offset: IntArg,
    size: IntArg,
    target_rank: IntArg,
    *,
    block_dim: Optional[int] = None,
) -> None:
    """Copy `size` elements from symmetric ``src[src_offset:]`` on `target_rank` into local
    ``target[target_offset:]`` (pull). Same units, checks and errors as :func:`shmem_put`.
    """
    if _sync is not None:
        _sync()
    if _fast_get(target, target_offset, src, src_offset, size, target_rank, block_dim):
        return
    _C.get(*_copy_args(target, target_offset, src, src_offset, size, target_rank, block_dim, False))


def shmem_signal_op(
    signal: Tensor, signal_offset: IntArg, signal_value: IntArg, signal_op: SignalOpArg, target_rank: IntArg
) -> None:
    """Atomically SET (0) or ADD (1) `signal_value` on ``signal[signal_offset]`` at `target_rank`,
    ordered after every earlier put of this thread, waking that rank's waiters.
    """
    if _sync is not None:
        _sync()
    if _fast_signal(signal, signal_offset, signal_value, signal_op, target_rank):
        return
    _C.signal(*_signal_request(signal, signal_offset, signal_value, signal_op, target_rank))


def shmem_wait_for_signal(
    depend_tensor: Optional[Tensor],
    signal: Tensor,
    signal_offset: IntArg,
    compare_value: IntArg,
    compare_op: CompareOpArg,
) -> int:
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
    addr, width, value, cmp, off = _wait_request(signal, signal_offset, compare_value, compare_op)
    return _C.wait_until(addr, width, cmp, value, f"signal[{off}]")


def shmem_put_with_signal(
    target: Tensor,
    target_offset: IntArg,
    src: Tensor,
    src_offset: IntArg,
    size: IntArg,
    signal: Tensor,
    signal_offset: IntArg,
    signal_value: IntArg,
    signal_op: SignalOpArg,
    target_rank: IntArg,
    *,
    block_dim: Optional[int] = None,
) -> None:
    """:func:`shmem_put`, then a fence, then :func:`shmem_signal_op` on `target_rank`: a rank
    that observes the signal observes every element of the put. All arguments (signal ones
    included) are checked before anything is written.
    """
    if _sync is not None:
        _sync()
    if _fast_put_signal(
        target,
        target_offset,
        src,
        src_offset,
        size,
        signal,
        signal_offset,
        signal_value,
        signal_op,
        target_rank,
        block_dim,
    ):
        return
    dst, src_addr, nbytes, pe, bd = _copy_args(
        target, target_offset, src, src_offset, size, target_rank, block_dim, True
    )
    sig, width, value, op, _ = _signal_request(signal, signal_offset, signal_value, signal_op, pe)
    _C.put_signal(dst, src_addr, nbytes, sig, width, value, op, pe, bd)


def barrier(group: Any = None) -> None:
    """Collective: every earlier put of the group's members is complete at its target when any
    member leaves. `group`: as the collectives' (None: every rank).

    Raises: ShmemTimeoutError, PeerDeadError (names the dead rank), ShmemValueError/ShmemTypeError (group).
    """
    if _sync is not None:
        _sync()
    _require_init("barrier()")
    g = _group(group, "barrier()")
    if g is None:
        _C.barrier()
    else:
        _C.team_barrier(g.team)


# --------------------------------------------------------------------------- collectives
def shmem_allgather(
    output_tensor: Tensor,
    input_tensor: Tensor,
    *,
    mode: str = "push",
    block_dim: Optional[int] = None,
    group: Any = None,
) -> Tensor:
    """Collective. ``output_tensor`` (symmetric, W x numel(input) elements, same dtype) receives
    every rank's ``input_tensor`` concatenated in rank order (flat). Reusable back to back
    with no re-zeroing or barrier; this rank's output is not written by a faster peer before
    this rank enters its next call. ``mode="pull"`` reads the pieces in rank order instead of
    having them pushed. In place is fine: ``input_tensor`` may be this rank's slice of
    ``output_tensor``. `group`: None (every rank), a list of global ranks, a torch ProcessGroup or a MindSpore group
    name; only its members call, and ranks, roots and list positions are then group ranks. Returns ``output_tensor``.

    Raises: ShmemTypeError (dtypes), ShmemValueError (sizes, mode, group), ShmemTimeoutError, PeerDeadError.
    """
    if _sync is not None:
        _sync()
    if group is None and _fast_allgather(output_tensor, input_tensor, mode, block_dim):
        return output_tensor
    o_addr, o_numel, itemsize, o_dtype = _symmetric(output_tensor, "output_tensor")
    i_addr, i_numel, _, i_dtype = _tensor(input_tensor, "input_tensor")
    _require_init("shmem_allgather()")
    g = _group(group, "shmem_allgather()")
    w = _state.world if g is None else g.size
    o_addr, i_addr, _, nbytes = _C.parts_request(
        o_addr, o_numel, itemsize, o_dtype, "output_tensor", i_addr, i_numel, i_dtype, "input_tensor", True, w
    )
    collectives.allgather(o_addr, i_addr, nbytes, _mode(mode), _block_dim(block_dim), 0 if g is None else g.team)
    return output_tensor


def shmem_alltoall(
    send_tensor_list: Sequence[Tensor],
    receive_tensor: Tensor,
    receive_list: Union[Sequence[IntArg], Tensor],
    *,
    mode: str = "push",
    block_dim: Optional[int] = None,
    group: Any = None,
) -> Tensor:
    """Collective. ``send_tensor_list[p]`` goes to rank p; ``receive_tensor`` (symmetric) receives
    the pieces packed in source-rank order, ``receive_list[q]`` elements (a list of ints or an
    integer tensor) from rank q. Uneven and empty pieces are fine; the offsets are exchanged
    by the library, and a size that disagrees with the sender raises CollectiveMismatchError
    on both sides. In ``mode="pull"`` every send tensor must be symmetric. `group`: None (every
    rank), a list of global ranks, a torch ProcessGroup or a MindSpore group name; only its
    members call, and ranks, roots and list positions are then group ranks.
    Returns ``receive_tensor``.
    """
    if _sync is not None:
        _sync()
    if group is None and _fast_alltoall(send_tensor_list, receive_tensor, receive_list, mode, block_dim):
        return receive_tensor
    r_addr, r_numel, itemsize, r_dtype = _symmetric(receive_tensor, "receive_tensor")
    _require_init("shmem_alltoall()")
    g = _group(group, "shmem_alltoall()")
    w = _state.world if g is None else g.size
    mode = _mode(mode)
    if not isinstance(send_tensor_list, (list, tuple)) or len(send_tensor_list) != w:
        raise _value_error(f"send_tensor_list must be a list of world_size = {w} tensors")
    check = _symmetric if mode == "pull" else _tensor
    addrs, elems, dtypes = [], [], []
    for p, t in enumerate(send_tensor_list):
        addr, numel, _, dtype = check(t, _Indexed("send_tensor_list", p))
        addrs.append(addr)
        elems.append(numel)
        dtypes.append(dtype)
    if _handler.is_tensor(receive_list):
        if not _handler.is_integer_dtype(_handler.describe(receive_list)[3]):
            raise _type_error("receive_list must hold integers")
        counts = [int(v) for v in receive_list.tolist()]
    elif isinstance(receive_list, (list, tuple)):
        counts = (
            list(receive_list)
            if all(type(v) is int for v in receive_list)
            else [_int(v, f"receive_list[{q}]") for q, v in enumerate(receive_list)]
        )
    else:
        raise _type_error(
            f"receive_list must be a list of ints or an integer tensor, got {type(receive_list).__name__}"
        )
    if len(counts) != w:
        raise _value_error(f"receive_list must have world_size = {w} entries, has {len(counts)}")
    _C.alltoall_request(r_numel, itemsize, r_dtype, dtypes, elems, counts)
    collectives.alltoall(
        addrs, elems, r_addr, counts, itemsize, mode, _block_dim(block_dim), 0 if g is None else g.team
    )
    return receive_tensor


def shmem_allreduce(tensor: Tensor, op: str = "sum", *, algorithm: Optional[str] = None, group: Any = None) -> Tensor:
    """Collective, in place: `tensor` (symmetric) becomes on every rank the element-wise `op` ("sum",
    "avg", "max", "min", "prod") of every rank's `tensor`. Deterministic: the ranks' values are
    combined in rank order, so every rank gets the same bits, call after call; float16/bfloat16 are
    accumulated in float32 and rounded once; integers wrap; "avg" divides integers toward zero.
    `algorithm`: None (by size: one-shot up to 256 KiB, else two-shot), "one_shot"
    (every rank reduces the whole tensor from every rank's copy) or "two_shot" (rank r reduces
    block r, then puts it into everyone's block r). Reusable back to back with no re-zeroing or
    barrier. `group`: None (every rank), a list of global ranks, a torch ProcessGroup or a MindSpore group
    name; only its members call, and ranks, roots and list positions are then group ranks. Returns `tensor`.

    Raises: ShmemTypeError (a dtype it cannot reduce: bool, complex, unsigned wider than 8 bits),
    ShmemValueError (op, algorithm, not symmetric), CollectiveMismatchError on every rank when
    ranks pass different sizes, dtypes or ops (nothing written), ShmemTimeoutError, PeerDeadError.
    """
    if _sync is not None:
        _sync()
    if group is None and _fast_allreduce(tensor, op, algorithm):
        return tensor
    addr, numel, _, dtype = _symmetric(tensor, "tensor")
    code, op_code, algo = _reduce_dtype(dtype, "tensor"), _reduce_op(op), _algorithm(algorithm)
    _require_init("shmem_allreduce()")
    g = _group(group, "shmem_allreduce()")
    collectives.allreduce(addr, numel, code, op_code, algo, 0 if g is None else g.team)
    return tensor


def shmem_reduce_scatter(
    output: Tensor,
    input: Tensor,
    op: str = "sum",
    *,  # noqa: A002 (torch's name)
    group: Any = None,
) -> Tensor:
    """Collective. `output` (any CPU tensor, n elements) on rank r = elements [r*n, (r+1)*n) of the
    element-wise `op` of every rank's `input` (symmetric, world_size x n elements, same dtype).
    Same ops, order and rounding as :func:`shmem_allreduce`; `input` is left unchanged.
    `group`: None (every rank), a list of global ranks, a torch ProcessGroup or a MindSpore group
    name; only its members call, and ranks, roots and list positions are then group ranks. Returns `output`.

    Raises: as shmem_allreduce; ShmemValueError when input is not world_size x numel(output).
    """
    if _sync is not None:
        _sync()
    if group is None and _fast_reduce_scatter(output, input, op):
        return output
    o_addr, o_numel, itemsize, o_dtype = _tensor(output, "output")
    i_addr, i_numel, _, i_dtype = _symmetric(input, "input")
    _require_init("shmem_reduce_scatter()")
    g = _group(group, "shmem_reduce_scatter()")
    w = _state.world if g is None else g.size
    i_addr, o_addr, o_numel, _ = _C.parts_request(
        i_addr, i_numel, itemsize, i_dtype, "input", o_addr, o_numel, o_dtype, "output", False, w
    )
    code, op_code = _reduce_dtype(i_dtype, "input"), _reduce_op(op)
    collectives.reduce_scatter(o_addr, i_addr, o_numel, code, op_code, 0 if g is None else g.team)
    return output


def shmem_broadcast(tensor: Tensor, root: IntArg, *, group: Any = None) -> Tensor:
    """Collective: `tensor` (symmetric) on every rank becomes `root`'s. `group`: None (every
    rank), a list of global ranks, a torch ProcessGroup or a MindSpore group name; only its
    members call, and ranks, roots and list positions are then group ranks.
    (`root` is a group rank, as in OpenSHMEM; torch's ``broadcast`` calls it ``group_src``.)
    Returns `tensor`.

    Raises: ShmemValueError (root out of range, not symmetric), CollectiveMismatchError on every
    rank when ranks pass different sizes or roots (nothing written), ShmemTimeoutError, PeerDeadError.
    """
    if _sync is not None:
        _sync()
    if group is None and _fast_broadcast(tensor, root):
        return tensor
    addr, numel, itemsize, _ = _symmetric(tensor, "tensor")
    _require_init("shmem_broadcast()")
    g = _group(group, "shmem_broadcast()")
    r = _group_rank(root, g, "root")
    collectives.broadcast(addr, numel * itemsize, r, 0 if g is None else g.team)
    return tensor


def fused_all_gather_matmul(
    a: Tensor,
    b: Tensor,
    c: Optional[Tensor],
    gather_out: Tensor,
    signal: Tensor,
    block_size: Optional[IntArg] = None,
    *,
    mode: str = "push",
    overlap: Optional[bool] = None,
    group: Any = None,
) -> Tuple[Tensor, Tensor]:
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
    `group`: None (every rank), a list of global ranks, a torch ProcessGroup or a MindSpore group
    name; only its members call, and ranks, roots and list positions are then group ranks. (W is
    then the group's size.) Returns (gather_out, c).
    """
    if _sync is not None:
        _sync()
    (_, _, itemsize, dtype), (m, k) = _matrix(a, "a")
    (_, _, _, b_dtype), (kb, n) = _matrix(b, "b")
    _require_init("fused_all_gather_matmul()")
    g = _group(group, "fused_all_gather_matmul()")
    w = _state.world if g is None else g.size
    if kb != k:
        raise _value_error(f"a is ({m}, {k}) but b is ({kb}, {n}): inner dimensions differ")
    (_, _, _, g_dtype) = _symmetric(gather_out, "gather_out")
    if _handler.ndim_shape(gather_out) != (w * m, k):
        raise _value_error(
            f"gather_out must have shape (world_size*m, k) = ({w * m}, {k}), has {_handler.ndim_shape(gather_out)}"
        )
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
        raise _value_error(
            f"signal must have at least world_size * ceil(m / block_size) = {w} * {nblocks} = "
            f"{w * nblocks} elements, has {s_numel}"
        )
    return fused.all_gather_matmul(
        _handler,
        a,
        b,
        c,
        gather_out,
        (sig_addr, width),
        m=m,
        k=k,
        block_rows=block_rows,
        nblocks=nblocks,
        itemsize=itemsize,
        mode=_mode(mode),
        overlap=_overlap(overlap, _state.world),
        team=0 if g is None else g.team,
    )


def fused_matmul_reduce_scatter(
    x1: Tensor,
    x2: Tensor,
    symm_tensor: Tensor,
    signal: Tensor,
    reduce_op: str = "sum",
    *,
    mode: str = "push",
    overlap: Optional[bool] = None,
    group: Any = None,
) -> Tensor:
    """Collective. Returns rows [r*m/W, (r+1)*m/W) of the sum (``reduce_op="sum"``) or mean
    (``"avg"``) over ranks of ``x1 @ x2``, on rank r. Partial products go out in the RFC's
    rotated order ``(rank + j) % W`` while the next one is computed; the receiver adds them
    up as they arrive (half precision in float32).

    Shapes: x1 (m, k), x2 (k, n), m divisible by W; ``symm_tensor`` symmetric, x1's dtype, at
    least m*n elements (the landing slots); ``signal`` symmetric int32/int64 with at least W
    elements, zeroed once after allocation. ``overlap=True`` computes one partial per target and
    pushes each from a worker thread while the next is computed; ``False`` computes all partials
    in one matmul (faster where the ranks fill the cores); None (default) picks by host.
    `group`: None (every rank), a list of global ranks, a torch ProcessGroup or a MindSpore group
    name; only its members call, and ranks, roots and list positions are then group ranks. (W is
    then the group's size.) Returns a new (m/W, n) tensor.
    """
    if _sync is not None:
        _sync()
    (_, _, itemsize, dtype), (m, k) = _matrix(x1, "x1")
    (_, _, _, x2_dtype), (k2, n) = _matrix(x2, "x2")
    _require_init("fused_matmul_reduce_scatter()")
    g = _group(group, "fused_matmul_reduce_scatter()")
    w = _state.world if g is None else g.size
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
    return fused.matmul_reduce_scatter(
        _handler,
        x1,
        x2,
        symm_tensor,
        (sig_addr, width),
        m=m,
        n=n,
        itemsize=itemsize,
        reduce_op=reduce_op,
        mode=_mode(mode),
        overlap=_overlap(overlap, _state.world),
        team=0 if g is None else g.team,
    )


# --------------------------------------------------------------------------- rendezvous
def rendezvous(tensor: Tensor, group: Any = None) -> SymmetricMemoryHandle:
    """Handle giving `rank`, `world_size`, `buffer_ptrs` and `get_buffer(peer, shape, dtype,
    storage_offset)` for a symmetric tensor. Symmetric allocation already puts the tensor at the
    same offset on every rank, so this needs no communication beyond making the group's team on
    its first use. With `group` (a list of global ranks, a torch ProcessGroup or a MindSpore group
    name; only members call), `rank`, `world_size`, `peer` and `buffer_ptrs` are the group's, in
    group-rank order, and ``handle.barrier()`` is the group's barrier.

    Raises: ShmemValueError (not symmetric, bad group), ShmemTypeError (group).
    """
    addr, numel, itemsize, dtype = _symmetric(tensor, "tensor")
    _require_init("rendezvous()")
    g = _group(group, "rendezvous()")
    return SymmetricMemoryHandle(tensor, addr, dtype, _state.find(addr, numel * itemsize), g)


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
        _state.groups.clear()
        _comm.reset()
        _C.finalize()


def debug_state() -> Dict[str, Any]:
    """Config, heap size, bytes live and peak, live allocations, lost ranks, platform."""
    d = json.loads(_C.debug_state())
    d["platform"] = _handler.name
    with _state.lock:
        d["python_live_tensors"] = sum(1 for a in _state.allocs.values() for r in a.tensors if r() is not None)
    d["moe_buffers"] = moe_buffers()
    return d


_handler.api_loaded(sys.modules[__name__])
