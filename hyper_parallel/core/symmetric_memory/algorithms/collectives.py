"""AllGather and AllToAll over one-sided puts and gets, written once for every framework.

Data moves only through the runtime's put/get/signal by address; arguments arrive
already checked by the unified API. Sizes here are BYTES unless named `*_elems`.

Push (default): the owner of the data writes it into every peer and bumps the peer's
arrival counter. Pull: the owner announces the call (its data is in place), and each
consumer reads the pieces itself, in rank order (deterministic), then tells the owner
it is done reading.
"""
from __future__ import annotations

from array import array

from hyper_parallel import _hpshmem as _C
from hyper_parallel.core.symmetric_memory.algorithms._comm import WORD, _ADD, comm


def allgather(out_addr: int, in_addr: int, nbytes: int, mode: str, block_dim: int):
    """out[r * nbytes : (r+1) * nbytes] on every rank = rank r's input (nbytes each)."""
    c = comm()
    me, w = c.rank, c.world
    c.wait_consumed()  # peers may still be reading our slot from an earlier pull call
    if in_addr != out_addr + me * nbytes:  # in place (input is our slot): nothing to copy
        _C.put(out_addr + me * nbytes, in_addr, nbytes, me, block_dim)
    e = c.begin()
    if mode == "push":
        for j in range(1, w):  # rotated start spreads the traffic over the peers
            p = (me + j) % w
            c.wait_ready(p, e)
            _C.put_signal(out_addr + me * nbytes, in_addr, nbytes, c.arrivals, WORD, 1, _ADD, p, block_dim)
        c.wait_arrivals(w - 1)
        return
    for p in range(w):  # pull: our slot was filled before we announced the call
        if p != me:
            c.wait_ready(p, e)
            _C.get(out_addr + p * nbytes, out_addr + p * nbytes, nbytes, p, block_dim)
            _C.signal(c.consumed, WORD, 1, _ADD, p)
    c.wait_consumed(w - 1)  # our buffers are the caller's again only once every reader is done


def _mismatch(me, p, n, want):
    return _C.CollectiveMismatchError(
        f"shmem_alltoall: rank {p} sends {n} elements to rank {me}, whose receive_list expects {want}")


def alltoall(sends, recv_addr: int, recv_counts: list[int], itemsize: int, mode: str, block_dim: int):
    """sends[p] = (addr, elements) goes to rank p; this rank's receive buffer gets the pieces
    packed in source-rank order, recv_counts[q] elements from rank q. In pull mode every
    send address must be symmetric."""
    c = comm()
    me, w = c.rank, c.world
    bad = None
    if mode == "push":
        # Publish what we expect before announcing the call: a peer reads it right after.
        counts = array("q", recv_counts)
        _C.put(c.counts, counts.buffer_info()[0], w * WORD, me, 0)
        e = c.begin()
        theirs = array("q", bytes(w * WORD))
        for j in range(w):
            p = (me + j) % w
            c.wait_ready(p, e)
            _C.get(theirs.buffer_info()[0], c.counts, w * WORD, p, 0)
            addr, n = sends[p]
            if n != theirs[me]:
                bad = bad or _mismatch(p, me, n, theirs[me])
                _C.signal(c.mismatch, WORD, 1, _ADD, p)
                _C.signal(c.arrivals, WORD, 1, _ADD, p)  # still arrive: nobody may hang
                continue
            offset = sum(theirs[:me]) * itemsize
            _C.put_signal(recv_addr + offset, addr, n * itemsize, c.arrivals, WORD, 1, _ADD, p, block_dim)
        c.wait_arrivals(w)
    else:
        table = array("q", [a - c.base for a, _ in sends] + [n for _, n in sends])
        _C.put(c.send_off, table.buffer_info()[0], 2 * w * WORD, me, 0)
        e = c.begin()
        entry = array("q", bytes(2 * WORD))
        offset = 0
        for p in range(w):
            c.wait_ready(p, e)
            _C.get(entry.buffer_info()[0], c.send_off + me * WORD, WORD, p, 0)
            _C.get(entry.buffer_info()[0] + WORD, c.send_n + me * WORD, WORD, p, 0)
            src_off, n = entry[0], entry[1]
            if n != recv_counts[p]:
                bad = bad or _mismatch(me, p, n, recv_counts[p])
                _C.signal(c.mismatch, WORD, 1, _ADD, p)
            else:
                _C.get(recv_addr + offset, c.base + src_off, n * itemsize, p, block_dim)
            offset += recv_counts[p] * itemsize
            _C.signal(c.consumed, WORD, 1, _ADD, p)
        # The caller may reuse its send tensors once we return: wait for every reader.
        c.wait_consumed(w)
    if bad is not None:
        raise bad
    c.check_mismatch("shmem_alltoall")
