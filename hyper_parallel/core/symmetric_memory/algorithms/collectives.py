"""AllGather and AllToAll: one call each into the runtime's collective copies.

The data movement and the epoch protocol are C++ (``ccsrc/symmetric_memory/ops/collective_copy``,
shared with the fused ops through ``_comm``): one call per collective instead of a loop of
puts, signals and waits from Python. Arguments arrive already checked by the unified API.
Sizes here are BYTES unless named `*_elems`.
"""
from __future__ import annotations

from hyper_parallel import _hpshmem as _C


def allgather(out_addr: int, in_addr: int, nbytes: int, mode: str, block_dim: int):
    """out[r * nbytes : (r+1) * nbytes] on every rank = rank r's input (nbytes each)."""
    _C.allgather(out_addr, in_addr, nbytes, mode == "pull", block_dim)


def alltoall(send_addrs: list[int], send_elems: list[int], recv_addr: int, recv_counts: list[int], itemsize: int,
             mode: str, block_dim: int):
    """send_elems[p] elements at send_addrs[p] go to rank p; this rank's receive buffer gets the
    pieces packed in source-rank order, recv_counts[q] elements from rank q. In pull mode every
    send address must be symmetric."""
    _C.alltoall(send_addrs, send_elems, recv_addr, recv_counts, itemsize, mode == "pull", block_dim)
