"""AllGather, AllToAll, AllReduce, ReduceScatter and Broadcast: one call each into the C++ collectives.

Unlike the fused ops (``fused.py``), these algorithms are not written here: they are C++, one
file each under ``ccsrc/symmetric_memory/ops/`` (``allgather/``, ``alltoall/``, ``allreduce/``,
``reduce_scatter/``, ``broadcast/``), over the epoch protocol of ``ops/collective/`` that the
fused ops share through ``_comm``: one call per collective instead of a loop of puts, signals
and waits from Python. This module is their Python entry. Arguments arrive already checked by the unified API.
Sizes here are BYTES unless named `*_elems`. `team` is the runtime's id of the group the call
runs in (0: every rank); ranks, roots and list positions are then group ranks.
"""

from __future__ import annotations

from hyper_parallel import _hpshmem as _C


def allgather(out_addr: int, in_addr: int, nbytes: int, mode: str, block_dim: int, team: int = 0):
    """out[r * nbytes : (r+1) * nbytes] on every rank = rank r's input (nbytes each)."""
    _C.allgather(out_addr, in_addr, nbytes, mode == "pull", block_dim, team)


def alltoall(
    send_addrs: list[int],
    send_elems: list[int],
    recv_addr: int,
    recv_counts: list[int],
    itemsize: int,
    mode: str,
    block_dim: int,
    team: int = 0,
):
    """send_elems[p] elements at send_addrs[p] go to rank p; this rank's receive buffer gets the
    pieces packed in source-rank order, recv_counts[q] elements from rank q. In pull mode every
    send address must be symmetric."""
    _C.alltoall(send_addrs, send_elems, recv_addr, recv_counts, itemsize, mode == "pull", block_dim, team)


def allreduce(addr: int, count: int, dtype_code: int, op_code: int, algorithm_code: int, team: int = 0):
    """In place on `count` elements at symmetric `addr` (codes: see _checks._REDUCE_DTYPES etc.)."""
    _C.allreduce(addr, count, dtype_code, op_code, algorithm_code, team)


def reduce_scatter(out_addr: int, in_addr: int, count: int, dtype_code: int, op_code: int, team: int = 0):
    """`count` elements at out_addr = this rank's block of the reduction of W*count at symmetric in_addr."""
    _C.reduce_scatter(out_addr, in_addr, count, dtype_code, op_code, team)


def broadcast(addr: int, nbytes: int, root: int, team: int = 0):
    """nbytes at symmetric `addr` on every rank = root's."""
    _C.broadcast(addr, nbytes, root, team)
