"""The RFC's primitives inside MindSpore graphs (``ms.jit``, GRAPH_MODE).

    from hyper_parallel.platform.mindspore.symmetric_memory import graph as sg

    @ms.jit
    def produce(data_buf, signal, x):           # symmetric tensors come in as arguments
        y = x * 2
        return sg.shmem_put_with_signal(data_buf, 0, y, 0, 4096, signal, 0, 1, 0, 1)

    @ms.jit
    def consume(data_buf, signal, depend):
        seen = sg.shmem_wait_for_signal(depend, signal, 0, 1, 0)
        return ops.depend(data_buf, seen).sum()   # reads of data_buf ordered after the wait

The unified API (``hyper_parallel.core.symmetric_memory``) drives the runtime from Python between
operators, which a compiled graph cannot do; these functions are MindSpore custom operators
(CPU "AOT" kernels compiled into the extension module) that the graph runs itself, with the
real addresses of their tensors. Same names, argument order and units (elements) as the
unified API; offsets, sizes, ranks, signal values and op codes are Python ints (constants of
the graph) or one-element int32/int64 tensors.

Ordering, as the RFC intends: every op is a memory side effect, so the graph keeps them in
program order and never drops one whose result is unused; ``depend_tensor`` is an input of the
wait, so the wait runs after that tensor's producer; each op returns an int64[1] tensor (the
wait: the observed value) for ``ops.depend`` to order later reads after it.

Allocate (``symm.empty``), zero signals and ``symm.barrier()`` in PyNative first, and pass the
symmetric tensors into the compiled function as arguments (a tensor captured from an outer scope
becomes a constant copy). A bad argument or a runtime failure prints
``hyper_parallel: <op>: <reason>``, MindSpore raises a RuntimeError, and :func:`last_error`
returns the reason; nothing is written.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import ops

from hyper_parallel import _hpshmem as _C
from hyper_parallel.core.signals import COMPARE_OP_NAMES, SIGNAL_OP_NAMES

__all__ = [
    "shmem_put",
    "shmem_get",
    "shmem_put_with_signal",
    "shmem_signal_op",
    "shmem_wait_for_signal",
    "barrier",
    "last_error",
]

_SIGNAL_OPS = SIGNAL_OP_NAMES
_COMPARE_OPS = COMPARE_OP_NAMES


def _one(*_):
    return (1,)


def _int64(*_):
    return ms.int64


def _kernel(name):
    op = ops.Custom(f"{_C.__file__}:{name}", out_shape=_one, out_dtype=_int64, func_type="aot")
    # A side effect on memory: kept in program order and never pruned when its result is unused.
    op.add_prim_attr("side_effect_mem", True)
    return op


_put = _kernel("HpMsPutMem")
_get = _kernel("HpMsGetMem")
_put_signal = _kernel("HpMsPutMemSignal")
_signal = _kernel("HpMsSignalOp")
_wait = _kernel("HpMsSignalWaitUntil")
_barrier = _kernel("HpMsBarrier")


def _i(x):
    """A graph constant int (or an op name already mapped) as a one-element int64 tensor."""
    if isinstance(x, int):
        return ms.Tensor([int(x)], ms.int64)  # int(): SignalOp/CompareOp members are ints too
    return x


def _code(x, table):
    if isinstance(x, str):
        return ms.Tensor([table[x.lower()]], ms.int64)
    return _i(x)


def shmem_put(target, target_offset, src, src_offset, size, target_rank):
    """``size`` elements of ``src[src_offset:]`` into symmetric ``target[target_offset:]`` on
    ``target_rank``. Returns an int64[1] token."""
    return _put(target, _i(target_offset), src, _i(src_offset), _i(size), _i(target_rank))


def shmem_get(target, target_offset, src, src_offset, size, target_rank):
    """``size`` elements of symmetric ``src[src_offset:]`` on ``target_rank`` into ``target``
    (a tensor the graph received as an argument). Returns an int64[1] token."""
    return _get(target, _i(target_offset), src, _i(src_offset), _i(size), _i(target_rank))


def shmem_put_with_signal(
    target, target_offset, src, src_offset, size, signal, signal_offset, signal_value, signal_op, target_rank
):
    """Put, fence, then SET/ADD ``signal[signal_offset]`` on ``target_rank``. Returns a token."""
    return _put_signal(
        target,
        _i(target_offset),
        src,
        _i(src_offset),
        _i(size),
        signal,
        _i(signal_offset),
        _i(signal_value),
        _code(signal_op, _SIGNAL_OPS),
        _i(target_rank),
    )


def shmem_signal_op(signal, signal_offset, signal_value, signal_op, target_rank):
    """Atomic SET (0/"set") or ADD (1/"add") on ``signal[signal_offset]`` at ``target_rank``."""
    return _signal(signal, _i(signal_offset), _i(signal_value), _code(signal_op, _SIGNAL_OPS), _i(target_rank))


def shmem_wait_for_signal(depend_tensor, signal, signal_offset, compare_value, compare_op):
    """Runs after ``depend_tensor``'s producer; blocks until the local ``signal[signal_offset]``
    compares true. Returns the observed value as an int64[1] tensor."""
    return _wait(depend_tensor, signal, _i(signal_offset), _i(compare_value), _code(compare_op, _COMPARE_OPS))


def barrier(depend_tensor):
    """Collective barrier, after ``depend_tensor``'s producer. Returns a token."""
    return _barrier(depend_tensor)


def last_error() -> str:
    """Why the last graph-mode op of this process failed ("" if none has): MindSpore's own
    RuntimeError only says that a kernel returned an error code. Not for use inside a graph."""
    return _C.graph_last_error()
