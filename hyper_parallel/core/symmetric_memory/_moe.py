"""The public MoE calls: shmem_moe_buffer, shmem_moe_dispatch, shmem_moe_combine. This module
reads their arguments; the calls themselves are the algorithms layer's (algorithms/moe.py) over
the runtime's ops (ccsrc/symmetric_memory/ops/moe).

A call whose arguments this rank refuses still ends the call on every member of the group
(the refusal travels in place of the token count), so all of them raise and none waits for a
rank that gave up; nothing is written into any output."""

from __future__ import annotations

import weakref
from typing import Any, Optional

from hyper_parallel.core.symmetric_memory._base import _C, _handler, _sync, _type_error, _value_error
from hyper_parallel.core.symmetric_memory._base import ShmemValueError as _ShmemValueError
from hyper_parallel.core.symmetric_memory._checks import _group, _int, _reduce_code_of, _tensor
from hyper_parallel.core.symmetric_memory._state import _ensure_init, _require_init, _state
from hyper_parallel.core.symmetric_memory.algorithms import moe as _algo
from hyper_parallel.core.symmetric_memory.algorithms.moe import MoeBuffer, MoeCombineWork, MoeDispatchWork, MoeHandle

Tensor = Any

# The dtypes a buffer may hold: the combine sums tokens (float32 accumulation for half precision).
_FLOAT_CODES = (0, 1, 2, 3)  # the runtime's float32, float64, float16, bfloat16

_buffers: "weakref.WeakSet[MoeBuffer]" = weakref.WeakSet()


def moe_buffers():
    """The live buffers, for debug_state()."""
    return [b.describe() for b in list(_buffers)]


def shmem_moe_buffer(
    max_tokens_per_rank: int, hidden: int, dtype: Any, num_experts: int, topk: int, *, group: Any = None
) -> MoeBuffer:
    """A reusable buffer for :func:`shmem_moe_dispatch` and :func:`shmem_moe_combine` among the
    ranks of `group`, sized for the worst case: every one of `max_tokens_per_rank` tokens
    (rows of `hidden` elements of `dtype`) of every rank routed to one rank. `num_experts`
    experts are split evenly over the group's ranks (group rank r owns experts
    [r * L, (r + 1) * L), L = num_experts / group size); each token selects `topk` of them.

    Collective over the whole job, like every symmetric allocation: every rank calls it, with
    the same sizes, passing its own group (for instance its expert-parallel group, when those
    groups partition the job; None: every rank). `group`: None, a list of global ranks, a torch
    ProcessGroup or a MindSpore group name. Memory per rank: about group size x
    max_tokens_per_rank x hidden x (itemsize + 4 or 8) bytes (see ``debug_state()["moe_buffers"]``).

    Raises: ShmemTypeError (dtype not float32/float64/float16/bfloat16), ShmemValueError (sizes,
    num_experts not a multiple of the group size, topk outside [1, 64]), HeapExhaustedError
    (raise SYMMETRIC_MEMORY_HEAP_SIZE), CollectiveMismatchError on every rank when ranks passed
    different configurations.
    """
    if _sync is not None:
        _sync()
    what = "shmem_moe_buffer()"
    if not _handler.is_dtype(dtype):
        raise _type_error(f"dtype must be a {_handler.name} dtype, got {type(dtype).__name__}")
    code = _reduce_code_of(dtype)
    if code not in _FLOAT_CODES:
        raise _type_error(f"dtype must be float32, float64, float16 or bfloat16 (the combine sums tokens), got {dtype}")
    sizes = [
        _int(max_tokens_per_rank, "max_tokens_per_rank"),
        _int(hidden, "hidden"),
        code,
        _int(num_experts, "num_experts"),
        _int(topk, "topk"),
    ]
    if not -(1 << 31) <= sizes[4] < (1 << 31):
        raise _value_error(f"topk must be in [1, 64], got {sizes[4]}")
    _ensure_init()
    g = _group(group, what)
    team, size = (0, _state.world) if g is None else (g.team, g.size)
    nbytes = _C.moe_buffer_bytes(*sizes, size)
    itemsize = _handler.itemsize(dtype)
    from hyper_parallel.core.symmetric_memory import empty  # the allocation every rank makes

    space = empty(-(-nbytes // itemsize), dtype=dtype)
    addr = _handler.describe(space)[0]
    core = _C.moe_buffer_create(*sizes, team, addr, nbytes)
    buf = MoeBuffer(
        _handler,
        core,
        space,
        max_tokens=sizes[0],
        hidden=sizes[1],
        dtype=dtype,
        num_experts=sizes[3],
        topk=sizes[4],
        group_size=size,
        dtype_code=code,
    )
    _buffers.add(buf)
    return buf


def _buffer(buffer) -> MoeBuffer:
    if not isinstance(buffer, MoeBuffer):
        raise _type_error(f"buffer must be what shmem_moe_buffer() returned, got {type(buffer).__name__}")
    _require_init("a MoE call")
    if not _C.in_live_allocation(_handler.describe(buffer._space)[0], 1):
        raise _value_error("buffer's memory was released (the runtime was finalized since it was made)")
    return buffer


def _matrix_arg(x, name: str):
    """(addr, rows, cols, itemsize, dtype) of a 2-D CPU contiguous tensor."""
    addr, numel, itemsize, dtype = _tensor(x, name)
    shape = _handler.ndim_shape(x)
    if len(shape) != 2:
        raise _value_error(f"{name} must be 2-D, has shape {tuple(shape)}")
    return addr, shape[0], shape[1], itemsize, dtype


def _weights_arg(w, name: str):
    if w is None:
        return 0, 0, 0
    addr, rows, cols, _, dtype = _matrix_arg(w, name)
    if dtype != _handler.float32:
        raise _type_error(f"{name} must be float32, got {dtype}")
    return addr, rows, cols


def _dispatch_args(buffer: MoeBuffer, x, topk_idx, topk_weights, layout, expert_alignment):
    """The dispatch's arguments read, as algorithms.moe.dispatch takes them (after the buffer)."""
    x_addr, tokens, hidden, _, x_dtype = _matrix_arg(x, "x")
    code = _reduce_code_of(x_dtype)
    if code is None or x_dtype != buffer.dtype:
        raise _type_error(f"x has dtype {x_dtype}; the buffer holds {buffer.dtype}")
    i_addr, i_rows, i_cols, i_bytes, i_dtype = _matrix_arg(topk_idx, "topk_idx")
    if not _handler.is_integer_dtype(i_dtype) or i_bytes not in (4, 8):
        raise _type_error(f"topk_idx must be an int32 or int64 tensor, got {i_dtype}")
    w_info = _weights_arg(topk_weights, "topk_weights")
    if layout not in _algo.LAYOUTS:
        raise _value_error(f"layout must be 'rank_major' or 'expert_major', got {layout!r}")
    alignment = _int(expert_alignment, "expert_alignment")
    return (
        x,
        (x_addr, tokens, hidden, code),
        topk_idx,
        (i_addr, i_rows, i_cols, i_bytes),
        topk_weights,
        w_info,
        _algo.LAYOUTS[layout],
        alignment,
    )


def _grad_check(async_op: bool, *tensors) -> bool:
    """Whether the call records a backward (autograd on, an input requiring grad); refuses an
    asynchronous one, whose result the graph could not wait for."""
    grad = _handler.wants_grad(*tensors)
    if grad and async_op:
        raise _value_error(
            "async_op=True calls are not differentiable; call it synchronously to train through it, "
            "or detach its inputs (or run under no_grad)"
        )
    return grad


def shmem_moe_dispatch(
    x: Tensor,
    topk_idx: Tensor,
    topk_weights: Optional[Tensor] = None,
    *,
    buffer: MoeBuffer,
    expert_alignment: int = 1,
    layout: str = "rank_major",
    async_op: bool = False,
):
    """Collective over the buffer's group: sends each token of `x` (tokens x hidden, the
    buffer's dtype) to every rank owning one of its experts, `topk_idx` (tokens x topk, int32
    or int64 expert ids, -1 = dropped), with `topk_weights` (tokens x topk float32, optional).
    A token reaches a rank once, however many of its experts live there.

    Returns ``(recv_x, recv_topk_idx, recv_topk_weights, recv_tokens_per_expert, handle)``:
    the received rows (rows x hidden); for each row its token's topk experts as this rank's
    local expert ids (int64, -1 where the expert lives elsewhere) and the matching weights
    (float32, 0 there; None when no weights were sent); the rows each local expert has (int64,
    rounded up to `expert_alignment`); and the handle :func:`shmem_moe_combine` takes.
    `layout="rank_major"`: one row per received token, by source rank, then in the source's
    token order. `"expert_major"`: one row per (token, local expert), grouped by local expert in
    that order, each group padded with zero rows (topk ids -1) to a multiple of
    `expert_alignment`. Deterministic. The counts travel with the data: no count exchange,
    no barrier. `async_op=True` returns a work object whose ``wait()`` returns the same tuple
    and whose ``arrived()`` lists the group ranks whose tokens are already here.

    Differentiable (torch): with autograd on and `x` or `topk_weights` requiring grad, the
    backward of ``recv_x`` is a combine (each token's gradient is the sum of its rows' from
    every rank) and of ``recv_topk_weights`` a combine of the weights' gradients. Every rank of
    the group must then run the backward; `topk_idx` must not change before it does.

    Raises: ShmemTypeError / ShmemValueError naming the argument (expert ids out of range, more
    tokens than the buffer holds, a hidden size or dtype other than the buffer's, async_op with
    autograd) on this rank, and CollectiveMismatchError on the other ranks of the group, nothing
    written; ShmemTimeoutError, PeerDeadError.
    """
    if _sync is not None:
        _sync()
    buffer = _buffer(buffer)
    try:
        args = _dispatch_args(buffer, x, topk_idx, topk_weights, layout, expert_alignment)
        grad = _grad_check(bool(async_op), x, topk_weights)
    except Exception:
        _algo.refuse_dispatch(buffer)
        raise
    if grad or (_handler.records_moe and not async_op):
        return _handler.moe_autograd.dispatch(
            lambda: _algo.dispatch(buffer, *args, False), x, topk_idx, topk_weights, _GRAD_OPS, _ShmemValueError
        )
    return _algo.dispatch(buffer, *args, bool(async_op))


def _combine_args(expert_out, handle: MoeHandle, topk_weights):
    e_addr, rows, hidden, _, e_dtype = _matrix_arg(expert_out, "expert_out")
    code = _reduce_code_of(e_dtype)
    if code is None or e_dtype != handle.buffer.dtype:
        raise _type_error(f"expert_out has dtype {e_dtype}; the buffer holds {handle.buffer.dtype}")
    return (e_addr, rows, hidden, code), _weights_arg(topk_weights, "topk_weights")


def shmem_moe_combine(
    expert_out: Tensor,
    handle: MoeHandle,
    *,
    buffer: Optional[MoeBuffer] = None,
    topk_weights: Optional[Tensor] = None,
    async_op: bool = False,
):
    """Collective over the buffer's group: the inverse of the dispatch that returned `handle`.
    `expert_out` has one row per row of that dispatch's ``recv_x`` (this rank's experts' output
    for it, the buffer's dtype). Returns, on each rank, one row per token it dispatched (tokens x
    hidden): the sum of that token's rows from every rank, in rank order and, within a rank, in
    row order (float32 accumulation for float16/bfloat16, rounded once), so the result is the
    same bits run after run; zero for a token that selected no expert. With `topk_weights`
    (rows x topk float32, as the dispatch's ``recv_topk_weights``) each row is first multiplied
    by its token's weights summed over the row's experts (its one expert in expert_major; the
    token's experts on this rank in rank_major). Padding rows are ignored. `buffer` defaults to
    the handle's. `async_op=True` returns a work object whose ``wait()`` returns the result.

    Differentiable (torch): the backward of the result is a dispatch of its gradient along the
    handle's routing (then weighted as the forward was), and `topk_weights` gets the dot product
    of each row's output and its gradient. Every rank of the group must then run the backward.

    Raises: as :func:`shmem_moe_dispatch` (ShmemValueError when expert_out's shape is not
    (rows of recv_x, hidden)).
    """
    if _sync is not None:
        _sync()
    if not isinstance(handle, MoeHandle):
        raise _type_error(f"handle must be the last item shmem_moe_dispatch() returned, got {type(handle).__name__}")
    if buffer is not None and buffer is not handle.buffer:
        raise _value_error("buffer is not the buffer of the dispatch that returned handle")
    _buffer(handle.buffer)
    try:
        e_info, w_info = _combine_args(expert_out, handle, topk_weights)
        grad = _grad_check(bool(async_op), expert_out, topk_weights)
    except Exception:
        _algo.refuse_combine(handle)
        raise
    if grad or (_handler.records_moe and not async_op):
        return _handler.moe_autograd.combine(
            lambda: _algo.combine(handle, e_info, w_info, False),
            expert_out,
            topk_weights,
            handle,
            _GRAD_OPS,
            _ShmemValueError,
        )
    return _algo.combine(handle, e_info, w_info, bool(async_op))


class _GradOps:
    """The plain (non-differentiable) calls the backward passes make: the backward of a dispatch
    is a combine along its handle, the backward of a combine a dispatch along the same routing."""

    @staticmethod
    def combine(expert_out, handle: MoeHandle):
        """Sums expert_out's rows home along handle (no weights): tokens x hidden."""
        try:
            e_info, w_info = _combine_args(expert_out, handle, None)
        except Exception:
            _algo.refuse_combine(handle)
            raise
        return _algo.combine(handle, e_info, w_info, False)

    @staticmethod
    def redispatch(x, handle: MoeHandle):
        """Sends x (tokens x hidden) along handle's routing: rows x hidden, row for row as the
        dispatch's recv_x (the dispatch is deterministic)."""
        buffer = handle.buffer
        try:
            args = _dispatch_args(buffer, x, handle.topk_idx, None, handle.layout, handle.expert_alignment)
        except Exception:
            _algo.refuse_dispatch(buffer)
            raise
        recv = _algo.dispatch(buffer, *args, False)[0]
        if _handler.ndim_shape(recv)[0] != handle.num_recv_rows:
            raise _value_error(
                f"the backward's dispatch received {_handler.ndim_shape(recv)[0]} rows where the forward "
                f"received {handle.num_recv_rows}: topk_idx changed between the forward and the backward"
            )
        return recv


_GRAD_OPS = _GradOps()


__all__ = [
    "MoeBuffer",
    "MoeCombineWork",
    "MoeDispatchWork",
    "MoeHandle",
    "moe_buffers",
    "shmem_moe_buffer",
    "shmem_moe_combine",
    "shmem_moe_dispatch",
]
