"""Shared machinery of the collectives: the per-call epoch, the clear-to-send
handshake and the workspace words, over the runtime's symmetric workspace.

Why epochs: signals are never reset. Call number ``e`` (counted the same way on every
rank, since collectives are called in the same order everywhere) sets or adds signals
so that "call e is done" is a ``>=`` comparison against a value that only grows. A
caller never re-zeroes anything between calls (the RFC's EQ-on-a-counter design
deadlocks there).

Why clear-to-send: as with MPI collectives, a rank's outputs from call ``e`` must stay
as they are until that rank itself enters call ``e+1``. A rank entering a call first
announces it to every peer (``ready[me] = e`` on each of them); a peer writes into
this rank's buffers only after it has seen that announcement.

Workspace layout (int64 words, symmetric, zero at init), for W ranks:

    ready[W]        ready[p] = last call rank p has entered
    arrivals        total put-with-signal ADDs received (push collectives)
    consumed        total reads of this rank's buffers completed by peers (pull mode)
    mismatch        count of peers that found this rank's sizes inconsistent
    counts[W]       alltoall push: elements this rank expects from each peer, this call
    send_off[W]     alltoall pull: symmetric offset of this rank's piece for each peer
    send_n[W]       alltoall pull: elements of that piece
"""
from __future__ import annotations

import concurrent.futures
import threading

from hyper_parallel import _hpshmem as _C

WORD = 8
_SET, _ADD = 0, 1
_GE = 4  # compare_op codes as in the runtime; collectives only ever wait with >=


class Comm:
    """Epoch, workspace addresses and a background pusher for one initialized job."""

    def __init__(self):
        self.rank = _C.my_pe()
        self.world = _C.n_pes()
        base, nbytes = _C.workspace()
        needed = (4 * self.world + 3) * WORD
        if needed > nbytes:
            raise _C.ShmemUnsupportedError(
                f"collectives support up to {(nbytes // WORD - 3) // 4} ranks (workspace of {nbytes} bytes)")
        self.base = base
        self.ready = base
        self.arrivals = base + self.world * WORD
        self.consumed = self.arrivals + WORD
        self.mismatch = self.consumed + WORD
        self.counts = self.mismatch + WORD
        self.send_off = self.counts + self.world * WORD
        self.send_n = self.send_off + self.world * WORD
        self.epoch = 0
        self.expected_arrivals = 0
        self.expected_consumed = 0
        self.mismatch_seen = 0
        self._pool = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ epochs
    def begin(self) -> int:
        """Enter the next collective call: returns its epoch and announces it to every peer."""
        self.epoch += 1
        e = self.epoch
        for j in range(self.world):  # ourselves included: code may wait on any rank uniformly
            p = (self.rank + j) % self.world
            _C.signal(self.ready + self.rank * WORD, WORD, e, _SET, p)
        return e

    def wait_ready(self, peer: int, e: int):
        """Block until `peer` has entered call `e` (so its buffers may be written)."""
        _C.wait_until(self.ready + peer * WORD, WORD, _GE, e, f"collective ready[{peer}]")

    def wait_arrivals(self, n: int):
        """Block until `n` more put-with-signal ADDs have reached this rank's arrival counter."""
        self.expected_arrivals += n
        _C.wait_until(self.arrivals, WORD, _GE, self.expected_arrivals, "collective arrivals")

    def wait_consumed(self, extra: int = 0):
        """Block until peers have finished every read of this rank's buffers announced so far
        (plus `extra` more, which are then counted as announced)."""
        self.expected_consumed += extra
        _C.wait_until(self.consumed, WORD, _GE, self.expected_consumed, "collective consumed")

    def check_mismatch(self, what: str):
        seen = _C.signal_fetch(self.mismatch, WORD)
        if seen != self.mismatch_seen:
            self.mismatch_seen = seen
            raise _C.CollectiveMismatchError(
                f"{what}: rank {self.rank}'s receive sizes disagree with what its peers send")

    # ------------------------------------------------------------------ background pushes
    def pusher(self) -> concurrent.futures.ThreadPoolExecutor:
        """One thread that issues puts while the calling thread computes (both drop the GIL)."""
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                                   thread_name_prefix="hpshmem-push")
            return self._pool

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


_comm: Comm | None = None


def comm() -> Comm:
    """The Comm of the live job (made on first use after init, dropped at finalize)."""
    global _comm
    if _comm is None:
        _comm = Comm()
    return _comm


def reset():
    """Forget the job (finalize): the next job starts at epoch 0 with a zeroed workspace."""
    global _comm
    if _comm is not None:
        _comm.close()
    _comm = None
