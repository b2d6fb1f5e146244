"""The API as PyTorch custom operators, so ``torch.compile(fullgraph=True)`` keeps every call in its graph.

Eager calls never come here: they run the plain functions of
:mod:`hyper_parallel.core.symmetric_memory` (the C++ fast path). When TorchDynamo traces a
function that calls them, each API function is replaced (``torch.compiler.substitute_in_graph``)
by its twin below, which records one ``torch.ops.hyper_parallel.*`` operator; at run time that
operator calls the same plain function, so checks, errors and results are those of eager mode.

Ordering in the graph:

* Every operator is registered as an ordered side effect: the compiler threads one token through
  them, so they run in program order among themselves (a put before the signal that publishes it)
  and none is dropped although most return nothing.
* Local tensors an operator writes are declared in its schema (``get``'s target, the collectives'
  outputs, ``shmem_wait_for_signal``'s ``depend_tensor``): reads of them after the call depend on it.
  Pass the buffer a signal guards as ``depend_tensor``; that is what orders its reads after the wait.
* Operands an operator reads (a put's ``src``) are its inputs, so their producers run first.

Registering the replacements imports ``torch._dynamo`` (about a second), so it happens when torch
itself imports that module (the first ``torch.compile``), not when this library is imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import List, Optional, Sequence

import torch
from torch._higher_order_ops.effects import EffectType, _register_effectful_op

_NS = "hyper_parallel"
_symm = None  # the public API module, bound by install()


def _api():
    return _symm


# Offsets, sizes, ranks, signal values and op codes may be ints, one-element tensors or (op codes)
# names: an operator schema has one type per argument, so each travels as an int, an optional
# tensor and a name ("" for none); the plain function receives whichever was given.
def _scalars(names, *values):
    """(ints, tensors, op names, error): error is (message) for a value no schema type holds, raised
    as eager mode raises it when the operator runs."""
    ints, tensors, strs = [], [], []
    for name, v in zip(names, values):
        if isinstance(v, torch.Tensor):
            ints.append(0), tensors.append(v), strs.append("")
        elif isinstance(v, str) and name.endswith("_op"):
            ints.append(0), tensors.append(None), strs.append(v)
        elif isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool):
            ints.append(v), tensors.append(None), strs.append("")
        else:
            return None, None, None, (f"{name} must be an int or a one-element integer tensor, got {type(v).__name__}")
    return ints, tensors, "\0".join(strs), None


def _unpack(ints: Sequence[int], tensors: Sequence[Optional[torch.Tensor]], strs: str):
    return [s or (t if t is not None else i) for i, t, s in zip(ints, tensors, strs.split("\0"))]


# A collective's group travels as its global ranks ([] for the whole job); the plain function
# gets them back as a list (the same group: the API names groups by their ranks).
def _group_ranks(group) -> List[int]:
    """Evaluated once while tracing (the group is a constant of the graph)."""
    pes = _api()._group_pes(group, "group")
    if pes == []:  # [] travels as "the whole job": refuse it here, as eager mode does
        raise _api().ShmemValueError("group has no ranks")
    return pes or []


def _group_of(group_ranks: Sequence[int]):
    return list(group_ranks) if group_ranks else None


# --------------------------------------------------------------------------- operators
# The scalars of each operator, in order, travel as (ints, tensors, strs); see _scalars.
# (A schema has no list of strings: the names travel joined by NULs.)
Ints, Tensors, Strs = List[int], List[Optional[torch.Tensor]], str


@torch.library.custom_op(f"{_NS}::put", mutates_args=())
def _put(
    target: torch.Tensor, src: torch.Tensor, ints: Ints, tensors: Tensors, strs: Strs, block_dim: Optional[int]
) -> None:
    t_off, s_off, size, rank = _unpack(ints, tensors, strs)
    _api().shmem_put(target, t_off, src, s_off, size, rank, block_dim=block_dim)


@torch.library.custom_op(f"{_NS}::get", mutates_args=("target",))
def _get(
    target: torch.Tensor, src: torch.Tensor, ints: Ints, tensors: Tensors, strs: Strs, block_dim: Optional[int]
) -> None:
    t_off, s_off, size, rank = _unpack(ints, tensors, strs)
    _api().shmem_get(target, t_off, src, s_off, size, rank, block_dim=block_dim)


@torch.library.custom_op(f"{_NS}::put_with_signal", mutates_args=())
def _put_with_signal(
    target: torch.Tensor,
    src: torch.Tensor,
    signal: torch.Tensor,
    ints: Ints,
    tensors: Tensors,
    strs: Strs,
    block_dim: Optional[int],
) -> None:
    t_off, s_off, size, sig_off, value, op, rank = _unpack(ints, tensors, strs)
    _api().shmem_put_with_signal(target, t_off, src, s_off, size, signal, sig_off, value, op, rank, block_dim=block_dim)


@torch.library.custom_op(f"{_NS}::signal_op", mutates_args=())
def _signal_op(signal: torch.Tensor, ints: Ints, tensors: Tensors, strs: Strs) -> None:
    _api().shmem_signal_op(signal, *_unpack(ints, tensors, strs))


@torch.library.custom_op(f"{_NS}::wait_for_signal", mutates_args=("depend_tensor",))
def _wait(
    depend_tensor: Optional[torch.Tensor], signal: torch.Tensor, ints: Ints, tensors: Tensors, strs: Strs
) -> torch.Tensor:
    seen = _api().shmem_wait_for_signal(depend_tensor, signal, *_unpack(ints, tensors, strs))
    return torch.tensor(seen, dtype=torch.int64)


@torch.library.custom_op(f"{_NS}::barrier", mutates_args=())
def _barrier(group_ranks: Ints) -> None:
    _api().barrier(_group_of(group_ranks))


@torch.library.custom_op(f"{_NS}::allgather", mutates_args=("output_tensor",))
def _allgather(
    output_tensor: torch.Tensor, input_tensor: torch.Tensor, copy_mode: str, block_dim: Optional[int], group_ranks: Ints
) -> None:
    _api().shmem_allgather(
        output_tensor, input_tensor, mode=copy_mode, block_dim=block_dim, group=_group_of(group_ranks)
    )


@torch.library.custom_op(f"{_NS}::alltoall", mutates_args=("receive_tensor",))
def _alltoall(
    send_tensor_list: List[torch.Tensor],
    receive_tensor: torch.Tensor,
    receive_counts: Ints,
    receive_list_tensor: Optional[torch.Tensor],
    copy_mode: str,
    block_dim: Optional[int],
    group_ranks: Ints,
) -> None:
    counts = receive_list_tensor if receive_list_tensor is not None else receive_counts
    _api().shmem_alltoall(
        send_tensor_list, receive_tensor, counts, mode=copy_mode, block_dim=block_dim, group=_group_of(group_ranks)
    )


@torch.library.custom_op(f"{_NS}::allreduce", mutates_args=("tensor",))
def _allreduce(tensor: torch.Tensor, op: str, algorithm: Optional[str], group_ranks: Ints) -> None:
    _api().shmem_allreduce(tensor, op, algorithm=algorithm, group=_group_of(group_ranks))


@torch.library.custom_op(f"{_NS}::reduce_scatter", mutates_args=("output",))
def _reduce_scatter(
    output: torch.Tensor,
    input: torch.Tensor,
    op: str,  # noqa: A002 (the API's name)
    group_ranks: Ints,
) -> None:
    _api().shmem_reduce_scatter(output, input, op, group=_group_of(group_ranks))


@torch.library.custom_op(f"{_NS}::broadcast", mutates_args=("tensor",))
def _broadcast(tensor: torch.Tensor, ints: Ints, tensors: Tensors, strs: Strs, group_ranks: Ints) -> None:
    (root,) = _unpack(ints, tensors, strs)
    _api().shmem_broadcast(tensor, root, group=_group_of(group_ranks))


@torch.library.custom_op(f"{_NS}::fused_all_gather_matmul", mutates_args=("gather_out", "c"))
def _fused_agmm(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    gather_out: torch.Tensor,
    signal: torch.Tensor,
    ints: Ints,
    tensors: Tensors,
    strs: Strs,
    copy_mode: str,
    overlap: Optional[bool],
    group_ranks: Ints,
) -> None:
    block = _unpack(ints, tensors, strs)[0] if ints else None
    _api().fused_all_gather_matmul(
        a, b, c, gather_out, signal, block, mode=copy_mode, overlap=overlap, group=_group_of(group_ranks)
    )


@torch.library.custom_op(f"{_NS}::fused_matmul_reduce_scatter", mutates_args=("symm_tensor",))
def _fused_mmrs(
    x1: torch.Tensor,
    x2: torch.Tensor,
    symm_tensor: torch.Tensor,
    signal: torch.Tensor,
    reduce_op: str,
    copy_mode: str,
    overlap: Optional[bool],
    group_ranks: Ints,
) -> torch.Tensor:
    return _api().fused_matmul_reduce_scatter(
        x1, x2, symm_tensor, signal, reduce_op, mode=copy_mode, overlap=overlap, group=_group_of(group_ranks)
    )


@torch.library.custom_op(f"{_NS}::argument_error", mutates_args=())
def _argument_error(message: str) -> None:
    """Where a call's argument fits no schema type: raises eager mode's error when the call runs."""
    raise _api().ShmemTypeError(message)


# --------------------------------------------------------------------------- shapes for tracing
# Tracing runs these on fake tensors: they describe the outputs and check nothing (the values
# are unknown); the operators check everything when they run.
for _op in (
    _put,
    _get,
    _put_with_signal,
    _signal_op,
    _barrier,
    _allgather,
    _alltoall,
    _allreduce,
    _reduce_scatter,
    _broadcast,
    _fused_agmm,
    _argument_error,
):
    _op.register_fake(lambda *args, **kwargs: None)


@_wait.register_fake
def _(depend_tensor, signal, ints, tensors, strs):
    return signal.new_empty((), dtype=torch.int64)


@_fused_mmrs.register_fake
def _(x1, x2, symm_tensor, signal, reduce_op, copy_mode, overlap, group_ranks):
    w = len(group_ranks) or _api().get_world_size()
    return x1.new_empty((x1.shape[0] // w, x2.shape[1]))


for _op in (
    _put,
    _get,
    _put_with_signal,
    _signal_op,
    _wait,
    _barrier,
    _allgather,
    _alltoall,
    _allreduce,
    _reduce_scatter,
    _broadcast,
    _fused_agmm,
    _fused_mmrs,
    _argument_error,
):
    _register_effectful_op(_op._opoverload, EffectType.ORDERED)


# --------------------------------------------------------------------------- what Dynamo traces
_PUT = ("target_offset", "src_offset", "size", "target_rank")
_PUT_SIGNAL = ("target_offset", "src_offset", "size", "signal_offset", "signal_value", "signal_op", "target_rank")
_SIGNAL = ("signal_offset", "signal_value", "signal_op", "target_rank")
_WAIT = ("signal_offset", "compare_value", "compare_op")


def _register_substitutes():
    """Tells TorchDynamo to trace each API function as a call of its operator."""
    symm = _api()
    substitute = torch.compiler.substitute_in_graph
    group_ranks = torch._dynamo.assume_constant_result(_group_ranks)

    @substitute(symm.shmem_put)
    def shmem_put(target, target_offset, src, src_offset, size, target_rank, *, block_dim=None):
        ints, tensors, strs, error = _scalars(_PUT, target_offset, src_offset, size, target_rank)
        if error:
            return torch.ops.hyper_parallel.argument_error(error)
        torch.ops.hyper_parallel.put(target, src, ints, tensors, strs, block_dim)

    @substitute(symm.shmem_get)
    def shmem_get(target, target_offset, src, src_offset, size, target_rank, *, block_dim=None):
        ints, tensors, strs, error = _scalars(_PUT, target_offset, src_offset, size, target_rank)
        if error:
            return torch.ops.hyper_parallel.argument_error(error)
        torch.ops.hyper_parallel.get(target, src, ints, tensors, strs, block_dim)

    @substitute(symm.shmem_put_with_signal)
    def shmem_put_with_signal(
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
        *,
        block_dim=None,
    ):
        ints, tensors, strs, error = _scalars(
            _PUT_SIGNAL, target_offset, src_offset, size, signal_offset, signal_value, signal_op, target_rank
        )
        if error:
            return torch.ops.hyper_parallel.argument_error(error)
        torch.ops.hyper_parallel.put_with_signal(target, src, signal, ints, tensors, strs, block_dim)

    @substitute(symm.shmem_signal_op)
    def shmem_signal_op(signal, signal_offset, signal_value, signal_op, target_rank):
        ints, tensors, strs, error = _scalars(_SIGNAL, signal_offset, signal_value, signal_op, target_rank)
        if error:
            return torch.ops.hyper_parallel.argument_error(error)
        torch.ops.hyper_parallel.signal_op(signal, ints, tensors, strs)

    @substitute(symm.shmem_wait_for_signal)
    def shmem_wait_for_signal(depend_tensor, signal, signal_offset, compare_value, compare_op):
        ints, tensors, strs, error = _scalars(_WAIT, signal_offset, compare_value, compare_op)
        if error:
            return torch.ops.hyper_parallel.argument_error(error)
        return torch.ops.hyper_parallel.wait_for_signal(depend_tensor, signal, ints, tensors, strs)

    @substitute(symm.barrier)
    def barrier(group=None):
        torch.ops.hyper_parallel.barrier(group_ranks(group))

    @substitute(symm.shmem_allgather)
    def shmem_allgather(output_tensor, input_tensor, *, mode="push", block_dim=None, group=None):
        torch.ops.hyper_parallel.allgather(output_tensor, input_tensor, mode, block_dim, group_ranks(group))
        return output_tensor

    @substitute(symm.shmem_alltoall)
    def shmem_alltoall(send_tensor_list, receive_tensor, receive_list, *, mode="push", block_dim=None, group=None):
        ranks = group_ranks(group)
        if isinstance(receive_list, torch.Tensor):
            torch.ops.hyper_parallel.alltoall(
                list(send_tensor_list), receive_tensor, [], receive_list, mode, block_dim, ranks
            )
        elif not isinstance(receive_list, (list, tuple)):
            return torch.ops.hyper_parallel.argument_error(
                f"receive_list must be a list of ints or an integer tensor, got {type(receive_list).__name__}"
            )
        else:
            names = tuple(f"receive_list[{q}]" for q in range(len(receive_list)))
            counts, _, _, error = _scalars(names, *receive_list)
            if error:
                return torch.ops.hyper_parallel.argument_error(error)
            torch.ops.hyper_parallel.alltoall(
                list(send_tensor_list), receive_tensor, counts, None, mode, block_dim, ranks
            )
        return receive_tensor

    @substitute(symm.shmem_allreduce)
    def shmem_allreduce(tensor, op="sum", *, algorithm=None, group=None):
        torch.ops.hyper_parallel.allreduce(tensor, op, algorithm, group_ranks(group))
        return tensor

    @substitute(symm.shmem_reduce_scatter)
    def shmem_reduce_scatter(output, input, op="sum", *, group=None):  # noqa: A002
        torch.ops.hyper_parallel.reduce_scatter(output, input, op, group_ranks(group))
        return output

    @substitute(symm.shmem_broadcast)
    def shmem_broadcast(tensor, root, *, group=None):
        ints, tensors, strs, error = _scalars(("root",), root)
        if error:
            return torch.ops.hyper_parallel.argument_error(error)
        torch.ops.hyper_parallel.broadcast(tensor, ints, tensors, strs, group_ranks(group))
        return tensor

    @substitute(symm.fused_all_gather_matmul)
    def fused_all_gather_matmul(a, b, c, gather_out, signal, block_size=None, *, mode="push", overlap=None, group=None):
        if c is None:
            c = a.new_empty((gather_out.shape[0], b.shape[1]))
        if block_size is None:
            ints, tensors, strs = [], [], ""
        else:
            ints, tensors, strs, error = _scalars(("block_size",), block_size)
            if error:
                return torch.ops.hyper_parallel.argument_error(error)
        torch.ops.hyper_parallel.fused_all_gather_matmul(
            a, b, c, gather_out, signal, ints, tensors, strs, mode, overlap, group_ranks(group)
        )
        return gather_out, c

    @substitute(symm.fused_matmul_reduce_scatter)
    def fused_matmul_reduce_scatter(
        x1, x2, symm_tensor, signal, reduce_op="sum", *, mode="push", overlap=None, group=None
    ):
        return torch.ops.hyper_parallel.fused_matmul_reduce_scatter(
            x1, x2, symm_tensor, signal, reduce_op, mode, overlap, group_ranks(group)
        )


class _AfterDynamoImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs _register_substitutes right after ``torch._dynamo`` has been imported."""

    def __init__(self):
        self._loader = None

    def find_spec(self, name, path, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)  # the real finders locate the module
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _register_substitutes()


def install(api) -> None:
    """Binds the public API module `api` and registers the replacements of its functions now
    when ``torch._dynamo`` is loaded, or as soon as it is."""
    global _symm
    _symm = api
    if "torch._dynamo" in sys.modules:
        _register_substitutes()
    elif not any(isinstance(f, _AfterDynamoImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterDynamoImport())
