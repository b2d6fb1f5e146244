"""MoE dispatch and combine as PyTorch custom operators, so ``torch.compile(fullgraph=True)`` keeps
them (and their backward) in its graph.

The table of ``_compile.py`` does not fit them: a dispatch returns a handle and takes a buffer,
neither of which a schema can carry, and its row count is known only once the tokens have
arrived. So here a buffer travels as a key (an int, constant in the graph), a dispatch's handle
as a key tensor (the handle itself stays in a registry here, with the tensors the backward
needs), and the row count is an unbacked size (``new_dynamic_size``). Eager calls never come here.

In a graph the twin of :func:`shmem_moe_dispatch` returns a :class:`CompiledMoeHandle` (a named
tuple) in place of the handle; the twin of :func:`shmem_moe_combine` takes it. The registry keeps
a dispatch's handle for the next ``_KEEP`` dispatches: a combine (or backward) older than that
raises ShmemValueError.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from typing import NamedTuple, Optional

import torch

_NS = "hyper_parallel"
_KEEP = 4096
_symm = None
_buffers: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
_handles: "OrderedDict[int, object]" = OrderedDict()
_next_key = itertools.count(1)


class CompiledMoeHandle(NamedTuple):
    """A dispatch's handle inside a compiled graph: its key and what the combine's shapes need."""

    key: torch.Tensor  # int64 (1,): the registry's key of the eager handle
    recv_topk_idx: torch.Tensor
    counts: torch.Tensor
    tokens: int
    layout: str
    buffer: object


def buffer_key(buffer) -> int:
    """The buffer's key in graphs (given once, kept on the buffer)."""
    key = getattr(buffer, "_compile_key", None)
    if key is None:
        key = buffer._compile_key = next(_next_key)
        _buffers[key] = buffer
    return key


def _buffer(key: int):
    b = _buffers.get(key)
    if b is None:
        raise _symm.ShmemValueError("the MoE buffer this compiled graph names was released")
    return b


def _handle(key: torch.Tensor):
    h = _handles.get(int(key.reshape(-1)[0]))
    if h is None:
        raise _symm.ShmemValueError(
            f"this MoE handle is older than the last {_KEEP} dispatches in compiled graphs and was released; "
            "combine (and run the backward of) a dispatch before that many more"
        )
    return h


def _keep(handle) -> torch.Tensor:
    key = next(_next_key)
    _handles[key] = handle
    while len(_handles) > _KEEP:
        _handles.popitem(last=False)
    return torch.tensor([key], dtype=torch.int64)


# --------------------------------------------------------------------------- the operators
@torch.library.custom_op(f"{_NS}::moe_dispatch", mutates_args=())
def _dispatch(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: Optional[torch.Tensor],
    buffer: int,
    layout: str,
    alignment: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    buf = _buffer(buffer)
    recv_x, recv_idx, recv_w, counts, handle = _symm.shmem_moe_dispatch(
        x, topk_idx, topk_weights, buffer=buf, layout=layout, expert_alignment=alignment
    )
    if recv_w is None:
        recv_w = torch.zeros(recv_idx.shape, dtype=torch.float32)
    return recv_x, recv_idx, recv_w, counts, _keep(handle)


@_dispatch.register_fake
def _dispatch_fake(x, topk_idx, topk_weights, buffer, layout, alignment):
    buf = _buffer(buffer)
    rows = torch.library.get_ctx().new_dynamic_size()
    k = buf.topk
    return (
        x.new_empty((rows, buf.hidden)),
        x.new_empty((rows, k), dtype=torch.int64),
        x.new_empty((rows, k), dtype=torch.float32),
        x.new_empty((buf.local_experts,), dtype=torch.int64),
        x.new_empty((1,), dtype=torch.int64),
    )


@torch.library.custom_op(f"{_NS}::moe_combine", mutates_args=())
def _combine(
    expert_out: torch.Tensor, handle: torch.Tensor, topk_weights: Optional[torch.Tensor], tokens: int
) -> torch.Tensor:
    return _symm.shmem_moe_combine(expert_out, _handle(handle), topk_weights=topk_weights)


@_combine.register_fake
def _combine_fake(expert_out, handle, topk_weights, tokens):
    return expert_out.new_empty((tokens, expert_out.shape[1]))


@torch.library.custom_op(f"{_NS}::moe_redispatch", mutates_args=())
def _redispatch(grad: torch.Tensor, handle: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """grad (tokens x hidden) sent along the handle's routing: one row per row of its recv_x."""
    from hyper_parallel.core.symmetric_memory import _moe

    return _moe._GRAD_OPS.redispatch(grad.contiguous(), _handle(handle))


@_redispatch.register_fake
def _redispatch_fake(grad, handle, like):
    return like.new_empty(like.shape)


@torch.library.custom_op(f"{_NS}::moe_dispatch_backward", mutates_args=())
def _dispatch_backward_op(
    g_recv_x: torch.Tensor,
    g_recv_w: torch.Tensor,
    recv_idx: torch.Tensor,
    handle: torch.Tensor,
    tokens: int,
    weighted: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of a dispatch's x and topk_weights, in one operator: a graph that uses only one
    of them still makes every combine (the other ranks make them all)."""
    from hyper_parallel.core.symmetric_memory import _moe

    h = _handle(handle)
    g_x = _moe._GRAD_OPS.combine(g_recv_x, h)
    if not weighted:
        return g_x, g_recv_w.new_empty((tokens, recv_idx.shape[1]))
    hidden, k = g_recv_x.shape[1], recv_idx.shape[1]
    g = g_recv_w.masked_fill(recv_idx < 0, 0.0)
    parts = []
    for c0 in range(0, k, hidden):  # the weights' gradients travel as rows of the buffer's width
        n = min(hidden, k - c0)
        tmp = torch.zeros((g.shape[0], hidden), dtype=g_recv_x.dtype)
        tmp[:, :n] = g[:, c0 : c0 + n]
        parts.append(_moe._GRAD_OPS.combine(tmp, h)[:, :n].to(torch.float32))
    return g_x, torch.cat(parts, dim=1)


@_dispatch_backward_op.register_fake
def _dispatch_backward_fake(g_recv_x, g_recv_w, recv_idx, handle, tokens, weighted):
    return g_recv_x.new_empty((tokens, g_recv_x.shape[1])), g_recv_w.new_empty((tokens, recv_idx.shape[1]))


# Never dropped: ranks may compile different graphs (a rank with 0 tokens specializes on them,
# and folds a 0-row combine's use away), and a collective call one rank's graph drops while the
# others make it would hang them. The operators of _compile.py are ordered effects for this;
# here that does not compile (inductor loses the origin of the unbacked row count inside an
# effect's wrapper), so they are marked impure instead: kept, in their data-dependency order
# (dispatch -> combine -> backward's dispatch -> backward's combine). `has_side_effect` is torch.fx's
# public marker, flagged as not yet backward-compatible.
for _name in ("moe_dispatch", "moe_combine", "moe_redispatch", "moe_dispatch_backward"):
    torch.fx.node.has_side_effect(getattr(torch.ops.hyper_parallel, _name).default)


# --------------------------------------------------------------------------- autograd
def _dispatch_setup(ctx, inputs, output):
    x, topk_idx, topk_weights, buffer, layout, alignment = inputs
    recv_x, recv_idx, recv_w, counts, key = output
    ctx.tokens, ctx.hidden, ctx.weighted = x.shape[0], x.shape[1], topk_weights is not None
    ctx.save_for_backward(recv_idx, key)


def _dispatch_backward(ctx, g_recv_x, g_idx, g_recv_w, g_counts, g_key):
    recv_idx, key = ctx.saved_tensors
    if g_recv_x is None:
        g_recv_x = torch.zeros((recv_idx.shape[0], ctx.hidden))
    if g_recv_w is None:
        g_recv_w = torch.zeros(recv_idx.shape)
    g_x, g_w = torch.ops.hyper_parallel.moe_dispatch_backward(
        g_recv_x.contiguous(), g_recv_w.contiguous(), recv_idx, key, ctx.tokens, ctx.weighted
    )
    return g_x, None, (g_w if ctx.weighted else None), None, None, None


_dispatch.register_autograd(_dispatch_backward, setup_context=_dispatch_setup)


def _row_mask(layout, recv_idx, counts):
    if layout == "expert_major":
        row_expert = torch.repeat_interleave(
            torch.arange(counts.shape[0], dtype=torch.int64), counts, output_size=recv_idx.shape[0]
        )
        return recv_idx == row_expert[:, None]
    return recv_idx >= 0


class _CombineFn(torch.autograd.Function):
    """The combine's backward needs the dispatch's receive ids and counts, which the combine
    operator does not take: it is recorded here, around the operator."""

    @staticmethod
    def forward(ctx, expert_out, w, key, recv_idx, counts, tokens, layout):
        ctx.save_for_backward(expert_out, w, key, recv_idx, counts)
        ctx.layout, ctx.has_w = layout, w is not None
        return torch.ops.hyper_parallel.moe_combine(expert_out, key, w, tokens)

    @staticmethod
    def backward(ctx, g_out):
        expert_out, w, key, recv_idx, counts = ctx.saved_tensors
        g = torch.ops.hyper_parallel.moe_redispatch(g_out.contiguous(), key, expert_out)
        if not ctx.has_w:
            return g, None, None, None, None, None, None
        acc = torch.float64 if g.dtype == torch.float64 else torch.float32
        mask = _row_mask(ctx.layout, recv_idx, counts).to(acc)
        g_e = (g.to(acc) * (w.to(acc) * mask).sum(dim=1, keepdim=True)).to(g.dtype)
        g_w = ((expert_out.to(acc) * g.to(acc)).sum(dim=1, keepdim=True) * mask).to(torch.float32)
        return g_e, g_w, None, None, None, None, None


# --------------------------------------------------------------------------- what Dynamo traces
def _dispatch_twin(x, topk_idx, topk_weights=None, *, buffer, expert_alignment=1, layout="rank_major", async_op=False):
    if async_op:
        return torch.ops.hyper_parallel.argument_error("async_op=True cannot run inside torch.compile")
    recv_x, recv_idx, recv_w, counts, key = torch.ops.hyper_parallel.moe_dispatch(
        x, topk_idx, topk_weights, _constant_key(buffer), layout, expert_alignment
    )
    handle = CompiledMoeHandle(key, recv_idx, counts, x.shape[0], layout, buffer)
    return recv_x, recv_idx, recv_w if topk_weights is not None else None, counts, handle


def _combine_twin(expert_out, handle, *, buffer=None, topk_weights=None, async_op=False):
    if async_op:
        return torch.ops.hyper_parallel.argument_error("async_op=True cannot run inside torch.compile")
    return _CombineFn.apply(
        expert_out, topk_weights, handle.key, handle.recv_topk_idx, handle.counts, handle.tokens, handle.layout
    )


_constant_key = torch.compiler.assume_constant_result(buffer_key)


def register(api) -> None:
    """Tells TorchDynamo to trace the MoE calls as these operators (called with torch._dynamo loaded)."""
    global _symm
    _symm = api
    torch.compiler.substitute_in_graph(api.shmem_moe_dispatch)(_dispatch_twin)
    torch.compiler.substitute_in_graph(api.shmem_moe_combine)(_combine_twin)
