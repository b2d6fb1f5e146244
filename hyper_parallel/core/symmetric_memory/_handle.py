"""The handle :func:`rendezvous` returns: rank, world size, the peers' addresses and zero-copy
views of their copies."""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

from hyper_parallel.core.symmetric_memory._base import _C, Dtype, ShmemUnsupportedError, Tensor, _handler, _value_error
from hyper_parallel.core.symmetric_memory._checks import _group_rank, _index
from hyper_parallel.core.symmetric_memory._state import _state, _wrap


class SymmetricMemoryHandle:
    """Peer views of one symmetric tensor (in the spirit of torch's symmetric memory)."""

    def __init__(self, tensor, addr, dtype, alloc, group=None):
        self._tensor = tensor
        self._addr = addr
        self._dtype = dtype
        self._alloc = alloc
        self._group = group  # _Group, or None for every rank
        self._pes = tuple(range(_C.n_pes())) if group is None else group.pes
        self.rank = _C.my_pe() if group is None else group.rank
        self.world_size = len(self._pes)

    @property
    def buffer_ptrs(self) -> List[Optional[int]]:
        """Address of this tensor's copy on every rank (of the group, in group-rank order), as mapped in
        this process; None for a rank that is not load/store reachable (on another host, or under
        HYPER_PARALLEL_SHMEM_TRANSPORT=ucx)."""
        return [_C.ptr(self._addr, p) or None for p in self._pes]

    def get_buffer(
        self, peer: int, shape: Union[int, Sequence[int]], dtype: Optional[Dtype] = None, storage_offset: int = 0
    ) -> Tensor:
        """A zero-copy tensor over `peer`'s (a group rank) copy of the memory, starting `storage_offset`
        elements (of `dtype`) into it. Loads and stores on it reach the peer directly.

        Raises: ShmemValueError when the view would leave the allocation; ShmemUnsupportedError when
        `peer` is not load/store reachable (another host: use shmem_put/shmem_get instead).
        """
        p = self._pes[_group_rank(peer, self._group, "peer")]
        if dtype is None:
            dtype = self._dtype
        itemsize = _handler.itemsize(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        numel = 1
        for d in shape:
            numel *= _index(d, "shape")
        off = _index(storage_offset, "storage_offset") * itemsize
        begin = self._addr - self._alloc.addr + off
        if begin + numel * itemsize > self._alloc.nbytes:
            raise _value_error(
                f"a view of {numel} x {dtype} at storage_offset {storage_offset} runs past the "
                f"{self._alloc.nbytes}-byte allocation"
            )
        if self._alloc.addr not in _state.allocs:
            raise _value_error("the tensor behind this handle was freed")
        base = _C.ptr(self._alloc.addr, p)
        if not base:
            raise ShmemUnsupportedError(
                f"rank {p} is reached through {_C.peer_transport(p)}, not shared memory: it has no direct "
                "view here; use shmem_put/shmem_get"
            )
        return _wrap(self._alloc, base + begin, numel * itemsize, shape, dtype)

    def barrier(self) -> None:
        """The barrier of the handle's group (the job's when made without one)."""
        from hyper_parallel.core.symmetric_memory import barrier  # the API module imports this one

        barrier(None if self._group is None else list(self._group.pes))
