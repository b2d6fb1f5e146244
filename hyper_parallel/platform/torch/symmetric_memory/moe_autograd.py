"""Autograd for MoE dispatch and combine: the backward of a dispatch is a combine along its
routing, the backward of a combine a dispatch along the same routing. The calls themselves are
the unified API's (passed in as `ops`); this module only says how gradients flow.

Gradients through expert_major padding rows are dropped (those rows carry no token)."""

from __future__ import annotations

import torch


def _row_mask(handle, recv_idx: torch.Tensor) -> torch.Tensor:
    """rows x k: which of a row's k weights the combine sums for it (float32 0/1) — its one
    expert in expert_major, the token's experts on this rank in rank_major."""
    if handle.layout == "expert_major":
        counts = handle.recv_tokens_per_expert
        row_expert = torch.repeat_interleave(torch.arange(counts.numel(), dtype=torch.int64), counts)
        return (recv_idx == row_expert[:, None]).to(torch.float32)
    return (recv_idx >= 0).to(torch.float32)


class _Dispatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, run, ops, box):
        recv_x, recv_idx, recv_w, counts, handle = run()
        box.append(handle)
        ctx.handle, ctx.ops, ctx.hidden = handle, ops, x.shape[1]
        ctx.mark_non_differentiable(recv_idx, counts)
        if recv_w is None:
            return recv_x, recv_idx, counts
        return recv_x, recv_idx, counts, recv_w

    @staticmethod
    def backward(ctx, g_recv_x, _g_idx, _g_counts, g_recv_w=None):
        handle, ops = ctx.handle, ctx.ops
        g_x = ops.combine(g_recv_x.contiguous(), handle) if ctx.needs_input_grad[0] else None
        g_w = None
        if ctx.needs_input_grad[1]:
            # The weights' gradients travel home as rows of the buffer's width: ceil(k / hidden)
            # combines, summed in float32 (rounded to the buffer's dtype for half precision).
            rows, k = g_recv_w.shape
            g = g_recv_w.masked_fill(handle.recv_topk_idx < 0, 0.0)
            hidden, dtype = ctx.hidden, handle.buffer.dtype
            parts = []
            for c0 in range(0, k, hidden):
                n = min(hidden, k - c0)
                tmp = torch.zeros((rows, hidden), dtype=dtype)
                tmp[:, :n] = g[:, c0 : c0 + n]
                parts.append(ops.combine(tmp, handle)[:, :n].to(torch.float32))
            g_w = torch.cat(parts, dim=1) if parts else torch.zeros((handle.num_tokens, k), dtype=torch.float32)
        return g_x, g_w, None, None, None


class _Combine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, expert_out, w, run, handle, ops):
        out = run()
        ctx.handle, ctx.ops = handle, ops
        ctx.save_for_backward(expert_out if w is not None else None, w)
        return out

    @staticmethod
    def backward(ctx, g_out):
        handle, ops = ctx.handle, ctx.ops
        expert_out, w = ctx.saved_tensors
        g = ops.redispatch(g_out.contiguous(), handle)  # rows x hidden, row for row as recv_x
        if w is None:
            return (g if ctx.needs_input_grad[0] else None), None, None, None, None
        # As the forward: float64 rows in float64, the others in float32.
        acc = torch.float64 if g.dtype == torch.float64 else torch.float32
        mask = _row_mask(handle, handle.recv_topk_idx).to(acc)
        g_e = None
        if ctx.needs_input_grad[0]:
            factor = (w.to(acc) * mask).sum(dim=1, keepdim=True)
            g_e = (g.to(acc) * factor).to(g.dtype)
        g_w = None
        if ctx.needs_input_grad[1]:
            dots = (expert_out.to(acc) * g.to(acc)).sum(dim=1, keepdim=True)
            g_w = (dots * mask).to(torch.float32)
        return g_e, g_w, None, None, None


def dispatch(run, x, topk_idx, w, ops, error):
    """The dispatch's result tuple, recorded for autograd."""
    box = []
    outs = _Dispatch.apply(x, w, run, ops, box)
    recv_x, recv_idx, counts = outs[:3]
    recv_w = outs[3] if w is not None else None
    return recv_x, recv_idx, recv_w, counts, box[0]


def combine(run, expert_out, w, handle, ops, error):
    """The combine's result, recorded for autograd."""
    return _Combine.apply(expert_out, w, run, handle, ops)
