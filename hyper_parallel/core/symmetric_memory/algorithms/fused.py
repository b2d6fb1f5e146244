"""Fused compute + communication (the RFC's section 10), written once for every framework.

Communication is the runtime's put/get/signal by address; computation goes through the
handler's tensor-ops protocol (``rows``, ``flat_view``, ``matmul_into``, ``matmul``, ``accumulate``,
``add``, ``scale``, ``copy_as``, ``new_empty``, ``cast``, ``accumulate_dtype``); ``matmul``'s result
is complete when it returns (the runtime reads it by address), and ``accumulate``/``scale``
return the tensor to use next (frameworks without in-place kernels return a new one).
Pushes run on a background thread while the calling thread computes (both release the GIL,
so they overlap for real) when the host has a core to spare per rank; otherwise the calling
thread issues them between its matmuls.

Signals: the caller's signal tensor is set to the call's epoch (never reset between calls),
and waits compare ``>=`` it. It must be zero when first used, as in the RFC's example.
"""

from __future__ import annotations

import os

from hyper_parallel import _hpshmem as _C
from hyper_parallel.core.symmetric_memory.algorithms._comm import _GE, _SET, comm


def _check_signal_clear(c, sig_addr: int, width: int, count: int, e: int, what: str):
    """Before announcing call e, no slot we will wait on may already read >= e (garbage)."""
    for i in range(count):
        v = _C.signal_fetch(sig_addr + i * width, width)
        if v >= e:
            raise _C.ShmemValueError(
                f"{what}: signal[{i}] holds {v} before call #{e}; zero the signal tensor once after "
                f"allocating it (it is never reset between calls)"
            )


def spare_cores(world: int) -> bool:
    """The default of `overlap`: pushes go to a worker thread only when the host has cores
    beyond one per rank; on a host the ranks already fill, a second thread per rank slows the
    matmuls down more than the overlap gains (measured: benchmarks/bench_collectives.py)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return cores >= 2 * world


def all_gather_matmul(
    h,
    a,
    b,
    c_out,
    gather_out,
    sig,
    *,
    m: int,
    k: int,
    block_rows: int,
    nblocks: int,
    itemsize: int,
    mode: str,
    overlap: bool,
    team: int = 0,
):
    """gather_out = AllGather(a) (dim 0); c_out = gather_out @ b, block by block.

    a: (m, k) local; gather_out: (W*m, k) symmetric; c_out: (W*m, n); sig = (addr, width) of
    W*nblocks signal words: slot src*nblocks + blk says "block blk of rank src has arrived".
    A rank computes its own blocks first, then each source's blocks as they arrive. Ranks here
    are team ranks; `g` maps them to the global ranks the runtime's verbs take.
    """
    c = comm(team)
    me, w, g = c.rank, c.world, c.pes
    sig_addr, width = sig
    a_addr = h.describe(a)[0]
    g_addr = h.describe(gather_out)[0]
    row_bytes = k * itemsize
    e = c.epoch + 1
    _check_signal_clear(c, sig_addr, width, w * nblocks, e, "fused_all_gather_matmul")
    c.wait_consumed()  # pull readers of our gather_out slot from an earlier call
    _C.put(g_addr + me * m * row_bytes, a_addr, m * row_bytes, g[me], 0)
    c.begin()

    def announce_all():
        for j in range(1, w):
            p = (me + j) % w
            c.wait_ready(p, e)
            for blk in range(nblocks):  # block-major order is kept per peer
                r0 = blk * block_rows
                r1 = min(m, r0 + block_rows)
                slot = sig_addr + (me * nblocks + blk) * width
                if mode == "push":
                    off = (me * m + r0) * row_bytes
                    _C.put_signal(
                        g_addr + off, a_addr + r0 * row_bytes, (r1 - r0) * row_bytes, slot, width, e, _SET, g[p], 0
                    )
                else:  # pull: our slot is in place; tell the consumer the block may be read
                    _C.signal(slot, width, e, _SET, g[p])

    pending = None
    if w > 1 and mode == "push" and overlap:
        pending = c.pusher().submit(announce_all)
    elif w > 1:
        announce_all()
    try:
        # One matmul per block, always: the row partition (and so every bit of c) does not
        # depend on when blocks arrive. Our own blocks need no wait.
        for blk in range(nblocks):
            r0, r1 = blk * block_rows, min(m, (blk + 1) * block_rows)
            h.matmul_into(h.rows(a, r0, r1), b, c_out, me * m + r0, me * m + r1)
        # Peers' blocks in the order they are expected to arrive, but a block that has already
        # arrived is taken before one still in flight: a descheduled peer (ranks outnumbering
        # cores) then does not hold up the blocks that are here. Order of computation cannot
        # change any result: every block is its own matmul.
        sources = range(w) if mode == "pull" else [(me - j) % w for j in range(1, w)]
        todo = [(src, blk) for src in sources if src != me for blk in range(nblocks)]
        left = {src: nblocks for src in sources if src != me}
        if mode == "pull" and nblocks == 0:  # nothing to read, but readers must still say so
            for src in left:
                c.done_reading(src)
        while todo:
            pick = 0
            for i, (src, blk) in enumerate(todo):
                if _C.signal_fetch(sig_addr + (src * nblocks + blk) * width, width) >= e:
                    pick = i
                    break
            src, blk = todo.pop(pick)
            slot = src * nblocks + blk
            _C.wait_until(sig_addr + slot * width, width, _GE, e, f"signal[{slot}]", team)
            g0, g1 = src * m + blk * block_rows, src * m + min(m, (blk + 1) * block_rows)
            if mode == "pull":
                _C.get(g_addr + g0 * row_bytes, g_addr + g0 * row_bytes, (g1 - g0) * row_bytes, g[src], 0)
            h.matmul_into(h.rows(gather_out, g0, g1), b, c_out, g0, g1)
            left[src] -= 1
            if mode == "pull" and left[src] == 0:
                c.done_reading(src)  # done reading src's slot
    finally:
        if pending is not None:
            pending.result()  # re-raises a failed push
    if mode == "pull":
        c.wait_consumed(w - 1)  # our buffers are the caller's again only once every reader is done
    return gather_out, c_out


def matmul_reduce_scatter(
    h, x1, x2, symm_out, sig, *, m: int, n: int, itemsize: int, reduce_op: str, mode: str, overlap: bool, team: int = 0
):
    """Rows [r*m/W, (r+1)*m/W) of sum_ranks(x1 @ x2) (mean for "avg"), on rank r.

    symm_out: symmetric, >= m*n elements of the result dtype; push: rank s deposits its
    partial for rank t in t's rows [s*mr, (s+1)*mr); pull: rank s keeps its partial for t in
    its own rows [t*mr, (t+1)*mr) and t reads it. sig: W signal words, slot s = "from rank s".
    Partials are computed for the targets in the RFC's rotated order (rank + j) % W, each sent
    as soon as it is ready; the receiver sums in rank order, so the result does not depend on
    arrival timing or on the mode (push and pull agree bit for bit). Ranks are team ranks (see
    all_gather_matmul).
    """
    c = comm(team)
    me, w, g = c.rank, c.world, c.pes
    mr = m // w
    sig_addr, width = sig
    s_addr = h.describe(symm_out)[0]
    slot_bytes = mr * n * itemsize
    e = c.epoch + 1
    _check_signal_clear(c, sig_addr, width, w, e, "fused_matmul_reduce_scatter")
    c.wait_consumed()
    c.begin()
    own = None
    pending = []
    pool = c.pusher() if mode == "push" and overlap else None

    def push(t, part):
        c.wait_ready(t, e)
        _C.put_signal(
            s_addr + me * slot_bytes, h.describe(part)[0], slot_bytes, sig_addr + me * width, width, e, _SET, g[t], 0
        )

    # overlap: one matmul per target, each partial pushed by the worker thread while the next
    # is computed. Without: one matmul for all targets (a split matmul is slower on a busy
    # core and nothing would run beside it), then the pushes. The partition depends on
    # `overlap` only, never on timing or on the mode: push and pull agree bit for bit.
    whole = None if overlap else h.matmul(x1, x2)
    try:
        for t in [(me + j) % w for j in range(w)]:
            part = (
                h.matmul(h.rows(x1, t * mr, (t + 1) * mr), x2) if whole is None else h.rows(whole, t * mr, (t + 1) * mr)
            )
            if t == me:
                own = part
            elif mode == "push":
                if pool is not None:
                    pending.append(pool.submit(push, t, part))  # overlaps the next matmul
                else:
                    push(t, part)
            else:
                _C.put(s_addr + t * slot_bytes, h.describe(part)[0], slot_bytes, g[me], 0)
                c.wait_ready(t, e)
                _C.signal(sig_addr + me * width, width, e, _SET, g[t])
        acc_dtype = h.accumulate_dtype(own)
        acc = first = None
        for src in range(w):  # rank order, whatever the arrival order
            if src == me:
                part = own
            else:
                _C.wait_until(sig_addr + src * width, width, _GE, e, f"signal[{src}]", team)
                if mode == "pull":
                    part = h.new_empty((mr, n), h.describe(own)[3])
                    _C.get(h.describe(part)[0], s_addr + me * slot_bytes, slot_bytes, g[src], 0)
                    c.done_reading(src)
                else:
                    part = h.rows(h.flat_view(symm_out, mr * n * w, (w * mr, n)), src * mr, (src + 1) * mr)
            if src == 0:
                first = part
            elif src == 1:
                acc = h.add(first, part, acc_dtype)  # a new tensor: one pass, no copy
            else:
                acc = h.accumulate(acc, part)
    finally:
        for f in pending:
            f.result()
    if mode == "pull":
        c.wait_consumed(w - 1)  # our buffers are the caller's again only once every reader is done
    if w == 1:
        acc = h.copy_as(first, acc_dtype)
    if reduce_op == "avg":
        acc = h.scale(acc, 1.0 / w)
    return h.cast(acc, h.describe(own)[3])
