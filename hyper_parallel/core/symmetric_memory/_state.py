"""The process's view of the runtime: live allocations and the tensors over them, and lazy
initialization (only :func:`empty` starts a runtime)."""

from __future__ import annotations

import bisect
import ctypes
import itertools
import os
import threading
import weakref

from hyper_parallel.core.symmetric_memory._base import _C, NotInitializedError, _handler


class _Allocation:
    """One block of the heap and every framework object that can reach it.

    Each tensor handed out over the block (by :func:`empty` or ``get_buffer``) sits on a
    ctypes buffer object that the framework keeps alive for exactly as long as any tensor,
    view or NumPy array over that memory exists. ``buffers`` holds the keys of those still
    alive; :func:`free` detaches the tensors the library knows, and when views remain the
    runtime keeps the bytes out of the heap (on every rank) until the last one is gone, so a
    stale view never aliases a later allocation.
    """

    __slots__ = ("addr", "nbytes", "tensors", "buffers", "token")

    def __init__(self, addr: int, nbytes: int):
        self.addr = addr
        self.nbytes = nbytes
        self.tensors: list = []  # weakrefs to the tensors handed out over this memory
        self.buffers: set = set()  # keys of the live buffer objects under them
        self.token = None  # the runtime's deferral token once freed

    def buffer_gone(self, key) -> None:
        # Runs when the framework drops a buffer (any thread, under the GIL; set ops are atomic).
        self.buffers.discard(key)
        if not self.buffers and self.token:
            _C.release_deferred(self.token)


_buffer_keys = itertools.count()


def _wrap(a: _Allocation, addr: int, nbytes: int, shape, dtype):
    """A framework tensor over heap bytes [addr, addr + nbytes), tracked by allocation `a`."""
    buf = (ctypes.c_uint8 * max(nbytes, 1)).from_address(addr)
    key = next(_buffer_keys)
    a.buffers.add(key)
    weakref.finalize(buf, a.buffer_gone, key)
    t = _handler.wrap(buf, nbytes, shape, dtype)
    a.tensors.append(weakref.ref(t))
    return t


class _State:
    """Process-wide view of the runtime: live allocations, sorted by address."""

    def __init__(self):
        self.lock = threading.RLock()
        self.allocs: dict[int, _Allocation] = {}
        self.bases: list[int] = []
        self.world = 0  # world size while initialized, else 0 (cached: read on every call)
        self.last = None  # the allocation find() returned last
        self.groups: dict = {}  # member ranks (tuple) -> _Group, made on first use; dropped at finalize

    def add(self, a: _Allocation):
        self.allocs[a.addr] = a
        bisect.insort(self.bases, a.addr)

    def remove(self, addr: int) -> _Allocation:
        a = self.allocs.pop(addr)
        del self.bases[bisect.bisect_left(self.bases, addr)]
        self.last = None
        return a

    def find(self, addr: int, nbytes: int):
        """The live allocation holding [addr, addr + nbytes), or None."""
        a = self.last  # programs touch the same few tensors over and over
        if a is not None and a.addr <= addr and addr + nbytes <= a.addr + a.nbytes:
            return a
        i = bisect.bisect_right(self.bases, addr) - 1
        if i < 0:
            return None
        a = self.allocs[self.bases[i]]
        if addr + nbytes <= a.addr + a.nbytes:
            self.last = a
            return a
        return None


_state = _State()


class _Group:
    """A subset of the job's ranks as the runtime's team: `team` (this rank's id for it),
    `rank` (this rank's group rank), `size`, `pes` (global ranks in group-rank order)."""

    __slots__ = ("team", "rank", "size", "pes")

    def __init__(self, team: int, pes):
        self.team = team
        self.pes = tuple(pes)
        self.rank = self.pes.index(_C.my_pe())
        self.size = len(self.pes)


def _bootstrap_host() -> str:
    """Where rank 0's bootstrap listener binds and what it advertises: HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST
    when set, else this host's address on the route toward the framework's rendezvous host (torch's
    MASTER_ADDR, msrun's MS_SCHED_HOST), which the other hosts reach it from; "" (loopback) otherwise."""
    if os.environ.get("HYPER_PARALLEL_SHMEM_BOOTSTRAP_HOST"):
        return ""  # the runtime reads it
    toward = os.environ.get("MASTER_ADDR") or os.environ.get("MS_SCHED_HOST")
    return _C.local_address_toward(toward) if toward else ""


def _ensure_init():
    if _state.world:
        return
    with _state.lock:
        if _C.is_initialized():
            _state.world = _C.n_pes()
            return
        try:
            timeout = _C.environment_settings()["timeout_sec"]
        except _C.ShmemError:
            # A refused setting: the runtime's init below raises it, after telling the job, so
            # that the other ranks fail at once naming this rank instead of waiting for it.
            timeout = 120.0
        rank, world, uid, endpoint = _handler.rendezvous_info(lambda: _C.get_unique_id(_bootstrap_host()), timeout)
        _C.init(rank, world, uid, endpoint)
        _state.world = _C.n_pes()


def _require_init(what: str):
    """Only empty() starts the runtime: any other call before it, or after finalize(), raises
    at once rather than starting a bootstrap that waits for peers who are not coming."""
    if _state.world:
        return
    if _C.is_initialized():
        _state.world = _C.n_pes()
        return
    raise NotInitializedError(
        f"{what}: the runtime is not initialized (symm.empty() starts it; after "
        "finalize() only empty() starts a new one)"
    )
