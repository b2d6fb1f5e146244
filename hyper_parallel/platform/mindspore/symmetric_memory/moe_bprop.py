"""MoE dispatch and combine for MindSpore's autodiff: each synchronous call runs inside a Cell
whose ``bprop`` sends the gradients back along the call's routing (the backward of a dispatch is
a combine, of a combine a dispatch), so ``mindspore.grad`` / ``value_and_grad`` train through
them in PyNative mode. A Cell call costs ~6 µs here; outside autodiff its bprop never runs.

The calls themselves are the unified API's (passed in as `ops`); a Cell's outputs must be tensors,
so the handle travels through it as a key tensor into a registry here that keeps the routing of
the last ``_KEEP`` calls (a backward older than that raises ShmemValueError)."""

from __future__ import annotations

import itertools
from collections import OrderedDict

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

_KEEP = 4096
_handles: "OrderedDict[int, object]" = OrderedDict()
_next_key = itertools.count(1)


def _keep(handle) -> Tensor:
    key = next(_next_key)
    _handles[key] = handle
    while len(_handles) > _KEEP:
        _handles.popitem(last=False)
    return Tensor(np.array([key], np.int64))


def _handle(key: Tensor, error):
    h = _handles.get(int(key.asnumpy()[0]))
    if h is None:
        raise error(
            f"this MoE call is older than the last {_KEEP} and its routing was released; run its backward sooner"
        )
    return h


def _f32(t) -> np.ndarray:
    return t.astype(ms.float32).asnumpy() if t.dtype != ms.float64 else t.asnumpy()


def _row_mask(handle) -> np.ndarray:
    """rows x k: which of a row's k weights the combine sums for it (see moe_autograd.py)."""
    idx = handle.recv_topk_idx.asnumpy()
    if handle.layout == "expert_major":
        counts = handle.recv_tokens_per_expert.asnumpy()
        row_expert = np.repeat(np.arange(counts.size), counts)
        return (idx == row_expert[:, None]).astype(np.float64)
    return (idx >= 0).astype(np.float64)


class _Dispatch(nn.Cell):
    """One instance serves every call (a Cell costs ~130 µs to make): the call's closure is set
    before it runs, and its bprop finds the call's routing by the key among its outputs."""

    def __init__(self):
        super().__init__()
        self.run = self.result = None
        self.ops = self.error = None

    def construct(self, x, topk_idx, weights):
        self.result = self.run()
        recv_x, recv_idx, recv_w, counts, handle = self.result
        if recv_w is None:
            recv_w = Tensor(np.zeros(recv_idx.shape, np.float32))
        handle.bprop_key = _keep(handle)
        return recv_x, recv_idx, recv_w, counts, handle.bprop_key

    def bprop(self, x, topk_idx, weights, out, dout):
        handle = _handle(out[4], self.error)
        g_x = self.ops.combine(dout[0], handle)
        g_w = Tensor(np.zeros(weights.shape, np.float32))
        if handle.weighted:
            # The weights' gradients travel home as rows of the buffer's width.
            g = _f32(dout[2]) * (handle.recv_topk_idx.asnumpy() >= 0)
            rows, k = g.shape
            hidden, dtype = handle.buffer.hidden, handle.buffer.dtype
            parts = []
            for c0 in range(0, k, hidden):
                n = min(hidden, k - c0)
                tmp = np.zeros((rows, hidden), np.float32)
                tmp[:, :n] = g[:, c0 : c0 + n]
                summed = self.ops.combine(Tensor(tmp).astype(dtype), handle)
                parts.append(_f32(summed)[:, :n])
            g_w = Tensor(np.concatenate(parts, axis=1).astype(np.float32))
        return g_x, Tensor(np.zeros(topk_idx.shape, topk_idx.asnumpy().dtype)), g_w


class _Combine(nn.Cell):
    """One instance serves every call, as _Dispatch; the dispatch's key is an input."""

    def __init__(self):
        super().__init__()
        self.run = self.ops = self.error = None

    def construct(self, expert_out, weights, key):
        return self.run()

    def bprop(self, expert_out, weights, key, out, dout):
        handle = _handle(key, self.error)
        g = self.ops.redispatch(dout, handle)  # rows x hidden, row for row as recv_x
        if weights.ndim == 1:  # no weights
            return g, Tensor(np.zeros(weights.shape, np.float32)), Tensor(np.zeros((1,), np.int64))
        mask = _row_mask(handle)
        acc = np.float64 if g.dtype == ms.float64 else np.float32
        g_np = _f32(g).astype(acc)
        factor = (_f32(weights).astype(acc) * mask).sum(axis=1, keepdims=True)
        g_e = Tensor((g_np * factor).astype(acc)).astype(g.dtype)
        dots = (_f32(expert_out).astype(acc) * g_np).sum(axis=1, keepdims=True)
        return g_e, Tensor((dots * mask).astype(np.float32)), Tensor(np.zeros((1,), np.int64))


_NO_WEIGHTS = None
_cells = {}


def _cell(cls, ops, error):
    c = _cells.get(cls)
    if c is None:
        c = _cells[cls] = cls()
        c.ops, c.error = ops, error
    return c


def _no_weights() -> Tensor:
    global _NO_WEIGHTS
    if _NO_WEIGHTS is None:
        _NO_WEIGHTS = Tensor(np.zeros((0,), np.float32))  # 1-D: "no weights" to the bprops
    return _NO_WEIGHTS


def dispatch(run, x, topk_idx, w, ops, error):
    """The dispatch's result tuple, recorded for MindSpore's autodiff."""
    cell = _cell(_Dispatch, ops, error)
    cell.run = run
    recv_x, recv_idx, recv_w, counts, _ = cell(x, topk_idx, w if w is not None else _no_weights())
    handle = cell.result[4]
    cell.run = cell.result = None
    return recv_x, recv_idx, recv_w if w is not None else None, counts, handle


def combine(run, expert_out, w, handle, ops, error):
    """The combine's result, recorded for MindSpore's autodiff."""
    cell = _cell(_Combine, ops, error)
    cell.run = run
    key = getattr(handle, "bprop_key", None)
    if key is None:  # an asynchronous dispatch's handle
        key = handle.bprop_key = _keep(handle)
    try:
        return cell(expert_out, w if w is not None else _no_weights(), key)
    finally:
        cell.run = None
