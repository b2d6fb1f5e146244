"""The epoch protocol the fused ops share with the collectives, over the runtime.

The protocol (per-call epochs compared with ``>=``, clear-to-send announcements, the
workspace words) is the C++ collective layer's, described in
``ccsrc/symmetric_memory/ops/ops.h``; its counters live in the runtime, so a new job starts
from zero. This module only names those calls for the Python algorithms and owns the
background pusher thread of the fused ops.
"""

from __future__ import annotations

import concurrent.futures
import threading

from hyper_parallel import _hpshmem as _C

_SET = 0
_GE = 4  # compare_op codes as in the runtime; collectives only ever wait with >=


class Comm:
    """One team's view of the job: this rank's team rank and the team's size, the global rank of
    each member (`pes[p]`, for puts and signals), the team's epoch calls, and the background
    pusher. Team 0 is every rank. Peers below are team ranks. (The C++ calls raise
    ShmemUnsupportedError past the ranks the workspace holds.)"""

    def __init__(self, team: int = 0):
        self.team = team
        self.rank, pes = _C.team_info(team)
        self.pes = tuple(pes)
        self.world = len(self.pes)
        self._pool = None
        self._lock = threading.Lock()

    @property
    def epoch(self) -> int:
        """Collective calls of this team this rank has entered (the same count on every member)."""
        return _C.coll_epoch(self.team)

    def begin(self) -> int:
        """Enter the team's next collective call: returns its epoch and announces it to every member."""
        return _C.coll_begin(self.team)

    def wait_ready(self, peer: int, e: int):
        """Block until member `peer` has entered call `e` (so its buffers may be written)."""
        _C.coll_wait_ready(peer, e, self.team)

    def wait_consumed(self, extra: int = 0):
        """Block until peers have finished every read of this rank's buffers announced so far
        (plus `extra` more, which are then counted as announced)."""
        _C.coll_wait_consumed(extra, self.team)

    def done_reading(self, peer: int):
        """Tell member `peer` this rank has finished reading its buffers (pull mode)."""
        _C.coll_consumed(peer, self.team)

    # ------------------------------------------------------------------ background pushes
    def pusher(self) -> concurrent.futures.ThreadPoolExecutor:
        """One thread that issues puts while the calling thread computes (both drop the GIL)."""
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpshmem-push")
            return self._pool

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


_comms: dict = {}  # team id -> Comm


def comm(team: int = 0) -> Comm:
    """The Comm of a team of the live job (made on first use after init, dropped at finalize)."""
    c = _comms.get(team)
    if c is None:
        c = _comms[team] = Comm(team)
    return c


def reset():
    """Forget the job (finalize); the runtime's counters start again from zero at the next init."""
    for c in _comms.values():
        c.close()
    _comms.clear()
