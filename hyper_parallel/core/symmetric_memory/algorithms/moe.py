"""Expert-parallel dispatch and combine (mixture of experts), written once for every framework.

The data movement, routing and sums are the runtime's (``ccsrc/symmetric_memory/ops/moe``): each
rank writes its tokens straight into the receive space of the ranks owning their experts and
signals how many it wrote, so no count exchange or barrier precedes the data. This layer only
allocates the outputs through the handler's ``new_empty`` once the counts are known, and keeps
each call's routing (the handle) for the combine.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from hyper_parallel import _hpshmem as _C

LAYOUTS = {"rank_major": 0, "expert_major": 1}


class MoeBuffer:
    """The symmetric receive and signal space of one group's dispatches and combines, sized for
    the worst case (every token of every rank routed to one rank). Made by
    :func:`~hyper_parallel.core.symmetric_memory.shmem_moe_buffer`; reused call after call."""

    def __init__(self, handler, core, space, *, max_tokens, hidden, dtype, num_experts, topk, group_size, dtype_code):
        self._h = handler
        self._core = core  # None on a rank outside the group
        self._space = space  # the symmetric tensor under it: kept alive as long as the buffer
        self.max_tokens_per_rank = max_tokens
        self.hidden = hidden
        self.dtype = dtype
        self.num_experts = num_experts
        self.topk = topk
        self.group_size = group_size
        self.local_experts = num_experts // group_size
        self._dtype_code = dtype_code

    @property
    def nbytes(self) -> int:
        """Bytes of symmetric memory the buffer holds on each rank."""
        _, numel, itemsize, *_ = self._h.describe(self._space)
        return numel * itemsize

    def describe(self) -> dict:
        """The buffer's configuration and memory, as ``debug_state()`` lists it."""
        return {
            "max_tokens_per_rank": self.max_tokens_per_rank,
            "hidden": self.hidden,
            "dtype": str(self.dtype),
            "num_experts": self.num_experts,
            "topk": self.topk,
            "group_size": self.group_size,
            "bytes": self.nbytes,
            "dispatches": self._core.dispatches if self._core is not None else 0,
            "combines": self._core.combines if self._core is not None else 0,
        }

    def __repr__(self) -> str:
        d = self.describe()
        return "MoeBuffer(" + ", ".join(f"{k}={v}" for k, v in d.items()) + ")"


class MoeHandle:
    """One dispatch's routing: what :func:`shmem_moe_combine` needs to send each row home, and
    what the backward passes need to send gradients along the same routes."""

    def __init__(self, buffer: MoeBuffer, core, *, weighted: bool, route, recv_topk_idx, counts):
        self.buffer = buffer
        self._core = core
        self.weighted = weighted
        # The dispatch's topk_idx (referenced, not copied), layout name and alignment.
        self.topk_idx, self.layout, self.expert_alignment = route
        self.recv_topk_idx = recv_topk_idx
        self.recv_tokens_per_expert = counts

    @property
    def num_recv_rows(self) -> int:
        return self._core.rows

    @property
    def num_tokens(self) -> int:
        """Tokens this rank dispatched (the rows of the combine's result)."""
        return self._core.tokens

    @property
    def recv_counts(self) -> List[int]:
        """Rows received from each group rank."""
        return list(self._core.received_from)

    @property
    def send_counts(self) -> List[int]:
        """Rows sent to each group rank."""
        return list(self._core.sent)

    def arrived(self) -> List[int]:
        """The group ranks whose tokens of this call have arrived here (never blocks)."""
        return list(_C.moe_dispatch_arrived(self.buffer._core, self._core))


_LAYOUT_NAMES = {v: k for k, v in LAYOUTS.items()}


def _unpack(buffer: MoeBuffer, core, weighted: bool, route):
    """Allocates the outputs of a received call and copies it out; releases the space on failure."""
    h = buffer._h
    try:
        rows, k = core.rows, buffer.topk
        recv_x = h.new_empty((rows, buffer.hidden), buffer.dtype)
        recv_idx = h.new_empty((rows, k), h.int64)
        recv_w = h.new_empty((rows, k), h.float32) if weighted else None
        counts = h.new_empty((buffer.local_experts,), h.int64)
        addr = [h.describe(t)[0] if t is not None else 0 for t in (recv_x, recv_idx, recv_w, counts)]
    except BaseException:
        _C.moe_dispatch_release(buffer._core, core)
        raise
    _C.moe_dispatch_unpack(buffer._core, core, *addr)
    handle = MoeHandle(buffer, core, weighted=weighted, route=route, recv_topk_idx=recv_idx, counts=counts)
    return recv_x, recv_idx, recv_w, counts, handle


class MoeDispatchWork:
    """An asynchronous dispatch: :meth:`wait` completes it and returns what the synchronous
    call returns; :meth:`arrived` lists the group ranks whose tokens are already here."""

    def __init__(self, buffer: MoeBuffer, core, weighted: bool, route):
        self._buffer, self._core, self._weighted, self._route = buffer, core, weighted, route
        self._result: Optional[Tuple[Any, ...]] = None

    def arrived(self) -> List[int]:
        return list(_C.moe_dispatch_arrived(self._buffer._core, self._core))

    def is_completed(self) -> bool:
        return self._result is not None or len(self.arrived()) == self._buffer.group_size

    def wait(self):
        if self._result is None:
            _C.moe_dispatch_wait(self._buffer._core, self._core)
            self._result = _unpack(self._buffer, self._core, self._weighted, self._route)
        return self._result


def dispatch(buffer: MoeBuffer, x, x_info, idx, idx_info, weights, w_info, layout: int, alignment: int, async_op: bool):
    """The call, its arguments read: *_info = (addr, rows, cols, itemsize or dtype code)."""
    core = _C.MoeDispatchHandle()
    x_addr, tokens, hidden, code = x_info
    i_addr, i_rows, i_cols, i_bytes = idx_info
    w_addr, w_rows, w_cols = w_info
    _C.moe_dispatch(
        buffer._core,
        core,
        x_addr,
        tokens,
        hidden,
        code,
        i_addr,
        i_rows,
        i_cols,
        i_bytes,
        w_addr,
        w_rows,
        w_cols,
        layout,
        alignment,
        not async_op,
    )
    route = (idx, _LAYOUT_NAMES[layout], alignment)
    if async_op:
        return MoeDispatchWork(buffer, core, weights is not None, route)
    return _unpack(buffer, core, weights is not None, route)


def refuse_dispatch(buffer: MoeBuffer) -> None:
    """Ends a dispatch whose arguments this rank refused, so that every member fails it."""
    _C.moe_dispatch_refuse(buffer._core, _C.MoeDispatchHandle())


class MoeCombineWork:
    """An asynchronous combine: :meth:`wait` completes it and returns the summed tokens."""

    def __init__(self, handle: MoeHandle, core, out):
        self._handle, self._core, self._out = handle, core, out
        self._done = False

    def is_completed(self) -> bool:
        return self._done

    def wait(self):
        if not self._done:
            h = self._handle
            _C.moe_combine_wait(h.buffer._core, h._core, self._core, h.buffer._h.describe(self._out)[0])
            self._done = True
        return self._out


def combine(handle: MoeHandle, expert_out_info, w_info, async_op: bool):
    """The call, its arguments read: expert_out_info = (addr, rows, hidden, dtype code)."""
    buffer = handle.buffer
    h = buffer._h
    try:
        out = h.new_empty((handle.num_tokens, buffer.hidden), buffer.dtype)
        out_addr = h.describe(out)[0]
    except BaseException:
        refuse_combine(handle)
        raise
    core = _C.MoeCombineHandle()
    e_addr, rows, hidden, code = expert_out_info
    w_addr, w_rows, w_cols = w_info
    _C.moe_combine(
        buffer._core,
        handle._core,
        core,
        e_addr,
        rows,
        hidden,
        code,
        w_addr,
        w_rows,
        w_cols,
        out_addr,
        not async_op,
    )
    if async_op:
        return MoeCombineWork(handle, core, out)
    return out


def refuse_combine(handle: MoeHandle) -> None:
    _C.moe_combine_refuse(handle.buffer._core, handle._core, _C.MoeCombineHandle())
