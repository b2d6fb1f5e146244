"""The ``hpshmem`` process group: torch.distributed's collectives as the runtime's collectives.

A front end beside the symmetric-memory API, over the same binding entry points (``_C.allreduce``,
``_C.allgather``, ``_C.alltoall``, ...): this module only turns c10d's arguments (tensor lists,
options, reduce ops, splits in rows) into those requests. The collectives, their checks (sizes,
dtypes and ops agreed by every rank, dead peers, deadlines) and their algorithms are the runtime's.

User tensors are not in the symmetric heap, so each group stages them through a block of it: a
group's *slot* in one symmetric arena made when the job's default group is made (the heap is
allocated collectively by every rank, which a subgroup cannot ask of ranks outside it). Members of
a new group agree on a slot free on all of them through the group's store. Tensors larger than a
slot's staging go through it in chunks; a tensor of the heap (``symm.empty``) is used in place for
all-reduce and broadcast (the runtime fails ranks that pass buffers at different places).

Sizes: ``*_bytes`` are bytes, everything else elements of the tensor's dtype.
"""

from __future__ import annotations

import datetime
import os
import threading
import time

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d
from torch.futures import Future

from hyper_parallel import _hpshmem as _C

from . import BACKEND_NAME

_ROp = dist.ReduceOp.RedOpType
_PREMUL = int(_ROp.PREMUL_SUM)
# The runtime's reduce op codes (ops::ReduceOp: sum avg max min prod and or xor), by torch's op
# value (pybind enums compare and hash slowly; their ints do not).
_OPS = {
    int(_ROp.SUM): 0,
    int(_ROp.AVG): 1,
    int(_ROp.MAX): 2,
    int(_ROp.MIN): 3,
    int(_ROp.PRODUCT): 4,
    int(_ROp.BAND): 5,
    int(_ROp.BOR): 6,
    int(_ROp.BXOR): 7,
    _PREMUL: 0,
}
# bool is reduced as uint8 0/1 values: a sum is an OR, a product an AND.
_BOOL_OPS = {
    int(_ROp.SUM): 2,
    int(_ROp.MAX): 2,
    int(_ROp.MIN): 3,
    int(_ROp.PRODUCT): 3,
    int(_ROp.BAND): 5,
    int(_ROp.BOR): 6,
    int(_ROp.BXOR): 7,
}
# The runtime's dtype codes (ops::DType).
_DTYPES = {
    torch.float32: 0,
    torch.float64: 1,
    torch.float16: 2,
    torch.bfloat16: 3,
    torch.int8: 4,
    torch.uint8: 5,
    torch.int16: 6,
    torch.int32: 7,
    torch.int64: 8,
    torch.bool: 5,
    torch.complex64: 13,
    torch.complex128: 14,
}
for _name, _code in (("uint16", 9), ("uint32", 10), ("uint64", 11)):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _code

_STAGING_VAR = "HYPER_PARALLEL_SHMEM_BACKEND_STAGING"
_GROUPS_VAR = "HYPER_PARALLEL_SHMEM_BACKEND_GROUPS"
_DEFAULT_STAGING = 16 << 20
_DEFAULT_GROUPS = 8
_P2P_CHUNK = 256 << 10  # bytes of one point-to-point inbox (per sender, per group)
_MONITORED_TAG = -0x6D62  # monitored_barrier's messages: a tag torch's own calls never use (theirs are >= 0)


# --------------------------------------------------------------------------- works
class _Work(dist.Work):
    """A completed operation: ``wait()`` returns True at once, ``get_future()`` holds its tensors."""

    def __init__(self, result=None, source: int = -1):
        super().__init__()
        self._result = result if result is not None else []
        self._source = source

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self):
        return None

    def source_rank(self) -> int:
        return self._source

    def result(self):
        return self._result

    def get_future(self) -> Future:
        f = Future()
        f.set_result(self._result)
        return f


# What a blocking call (``opts.asyncOp`` False) gets: the caller only waits on it.
_DONE = _Work()


def _done(result, opts):
    return _Work(result) if opts.asyncOp else _DONE


# --------------------------------------------------------------------------- the arena
class _Arena:
    """One symmetric block carved into equal group slots: [staging][point-to-point area] each."""

    def __init__(self, world: int):
        from hyper_parallel.core.symmetric_memory import empty

        self.staging_bytes = _byte_setting(_STAGING_VAR, _DEFAULT_STAGING)
        self.nslots = _int_setting(_GROUPS_VAR, _DEFAULT_GROUPS)
        from hyper_parallel.platform.torch.distributed.p2p import area_bytes

        self.p2p_bytes = area_bytes(world, _P2P_CHUNK)
        self.slot_bytes = self.staging_bytes + self.p2p_bytes
        self.tensor = empty(self.nslots * self.slot_bytes, dtype=torch.uint8)  # collective over every rank
        self.addr = self.tensor.data_ptr()
        self.free = set(range(self.nslots))
        self.world = world

    def slot(self, i: int):
        """(staging tensor, staging address, p2p area address) of slot i."""
        base = i * self.slot_bytes
        return (self.tensor[base : base + self.staging_bytes], self.addr + base, self.addr + base + self.staging_bytes)


_arena: _Arena | None = None
_lock = threading.Lock()
_owns_runtime = False  # the default group started the runtime, so its shutdown finalizes it
_default_timeout = None  # the default group's; a group made with another one bounds its own waits by it


def _byte_setting(var: str, default: int) -> int:
    text = os.environ.get(var, "").strip()
    v = _C.parse_byte_size(text, var) if text else default
    if v < 4096 or v % 64:
        raise ValueError(f"{var}={text!r}: the staging block must be a multiple of 64 bytes, at least 4 KiB")
    return v


def _int_setting(var: str, default: int) -> int:
    text = os.environ.get(var, "").strip()
    try:
        v = int(text) if text else default
    except ValueError:
        raise ValueError(f"{var}={text!r} is not a whole number") from None
    if not 1 <= v <= 64:
        raise ValueError(f"{var}={v}: between 1 and 64 groups may hold a staging slot at once")
    return v


def _start_runtime(store, rank: int, world: int, timeout: datetime.timedelta):
    """Initializes the runtime among the default group's ranks through the store torch handed us."""
    global _owns_runtime
    from hyper_parallel.core.symmetric_memory._state import _bootstrap_host, _state

    with _state.lock:
        if _C.is_initialized():
            if _C.n_pes() != world or _C.my_pe() != rank:
                raise ValueError(
                    f"hpshmem: the symmetric-memory runtime already runs as rank {_C.my_pe()} of "
                    f"{_C.n_pes()}, not rank {rank} of {world}"
                )
            _state.world = _C.n_pes()
            return
        key = "hpshmem/unique_id"
        if rank == 0:
            store.set(key, _C.get_unique_id(_bootstrap_host()))
        uid = bytes(store.get(key))
        env_timeout = os.environ.get("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC")
        seconds = 0.0 if env_timeout else timeout.total_seconds()
        _C.init(rank, world, uid, "", timeout_sec=seconds)
        _state.world = _C.n_pes()
        _owns_runtime = True


def _agree_slot(store, group_rank: int, group_size: int) -> int:
    """The lowest slot free on every member, agreed through the group's own (prefixed) store."""
    mine = sum(1 << i for i in _arena.free)
    store.set(f"hpshmem/free_slots/{group_rank}", str(mine))
    common = mine
    for r in range(group_size):
        if r != group_rank:
            common &= int(store.get(f"hpshmem/free_slots/{r}"))
    if not common:
        raise RuntimeError(
            f"hpshmem: no staging slot is free on every member of this group ({_arena.nslots} "
            f"groups hold one; raise {_GROUPS_VAR} or destroy groups no longer used)"
        )
    slot = (common & -common).bit_length() - 1
    _arena.free.discard(slot)
    return slot


def create_process_group(opts, backend_options):
    """The creator torch calls for every group of this backend (extended API), collective over its members."""
    global _arena
    from hyper_parallel.core.symmetric_memory._checks import _group

    store, rank, size, timeout = opts.store, opts.group_rank, opts.group_size, opts.timeout
    ranks = list(opts.global_ranks_in_group) or list(range(size))
    with _lock:
        if _arena is None:
            if ranks != list(range(size)) or (_C.is_initialized() and _C.n_pes() != size):
                raise ValueError(
                    "hpshmem: make the default group with this backend first "
                    "(init_process_group('hpshmem') or 'cpu:hpshmem'); its ranks allocate the symmetric "
                    "staging every hpshmem group uses"
                )
            _start_runtime(store, rank, size, timeout)
            _arena = _Arena(size)
            slot = 0
            _arena.free.discard(0)
        else:
            slot = _agree_slot(store, rank, size)
        global _default_timeout
        if slot == 0:  # the default group: its timeout is the job's (the runtime was started with it)
            _default_timeout = timeout
        elif timeout is not None and timeout != _default_timeout and timeout.total_seconds() > 0:
            # A team of its own, even for every rank: a call that runs out of its time leaves its team
            # unusable, which must not take the world (or a twin group) down with it.
            return _TimedProcessGroup(rank, size, ranks, _C.team_create(ranks), slot, timeout.total_seconds())
        g = _group(ranks, "new_group(backend='hpshmem')")
        team = 0 if g is None else g.team
    return HpshmemProcessGroup(rank, size, ranks, team, slot)


def _release_slot(slot: int, owns_world: bool):
    global _arena, _owns_runtime
    with _lock:
        if _arena is None:
            return
        _arena.free.add(slot)
        if not owns_world:
            return
        _arena = None
        if _owns_runtime:
            _owns_runtime = False
            from hyper_parallel.core.symmetric_memory import finalize

            finalize()


# --------------------------------------------------------------------------- the process group
def _code(t: torch.Tensor, what: str) -> int:
    code = _DTYPES.get(t.dtype)
    if code is None:
        raise TypeError(f"hpshmem {what}: dtype {t.dtype} is not supported")
    return code


def _check_cpu(tensors, what: str):
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"hpshmem {what}: expected tensors, got {type(t).__name__}")
        if not t.is_cpu:
            raise ValueError(
                f"hpshmem {what}: tensor on {t.device}; this backend serves CPU tensors "
                f"(give other devices a backend of their own, e.g. 'cpu:hpshmem,cuda:nccl')"
            )
        if t.layout != torch.strided:
            raise TypeError(f"hpshmem {what}: a {t.layout} tensor has no dense memory; use .to_dense()")


def _one(tensors, what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise ValueError(f"hpshmem {what}: one tensor per call (a list of {len(tensors)} was given)")
    _check_cpu(tensors, what)
    return tensors[0]


def _op_value(red) -> int:
    """torch's op as an int, from a ReduceOp object (what options hold) or a RedOpType."""
    op = getattr(red, "op", None)  # (a RedOpType passes isinstance(_, ReduceOp) too)
    return (red if op is None else op).value


def _reduce_codes(t: torch.Tensor, red, what: str):
    """(dtype code, op code, tensor to reduce) for reduce op `red` on `t`; PREMUL_SUM pre-scales a copy."""
    op = _op_value(red)
    dtype = t.dtype
    if dtype is torch.bool:
        code = _BOOL_OPS.get(op)
        if code is None:
            raise ValueError(f"hpshmem {what}: {dist.ReduceOp.RedOpType(op)} does not apply to bool tensors")
        return 5, code, t
    dcode = _DTYPES.get(dtype)
    if dcode is None:
        raise TypeError(f"hpshmem {what}: dtype {dtype} is not supported")
    code = _OPS.get(op)
    if code is None:
        raise ValueError(f"hpshmem {what}: reduce op {dist.ReduceOp.RedOpType(op)} is not supported")
    if op == _PREMUL:
        factor = red.factor
        return dcode, 0, t.mul(factor.item() if isinstance(factor, torch.Tensor) else factor)
    return dcode, code, t


class _Flat:
    """A tensor's elements as one contiguous flat tensor to read or write, written back by ``done()``
    when the tensor itself is not contiguous."""

    __slots__ = ("t", "flat")

    def __init__(self, t: torch.Tensor, read: bool):
        self.t = t
        if t.is_contiguous():
            self.flat = t.view(-1) if t.dim() != 1 else t
        else:
            self.flat = t.reshape(-1).clone() if read else torch.empty(t.numel(), dtype=t.dtype)

    def done(self):
        if self.flat.data_ptr() != self.t.data_ptr() or not self.t.is_contiguous():
            self.t.copy_(self.flat.view(self.t.shape))


def _into_pieces(outs):
    """The writer of an all-to-all round whose pieces land in separate outputs: source q's `c` elements,
    packed in the staging by source, go to elements [lo, lo + c) of ``outs[q]`` (a _Flat)."""

    def write(view, lo, counts):
        pos = 0
        for q, c in enumerate(counts):
            if c:
                outs[q].flat[lo : lo + c].copy_(view[pos : pos + c])
            pos += c

    return write


class HpshmemProcessGroup(dist.ProcessGroup):
    """torch.distributed's process-group interface over the runtime's collectives, for CPU tensors.

    Operations run when issued, in issue order, on the calling thread (the runtime's waits release
    the GIL): a Work is complete when returned, so ``async_op=True`` works alike, and failures
    (mismatched calls, dead peers, deadlines) raise from the call on every rank concerned.
    Point-to-point operations complete asynchronously (:mod:`.p2p`).
    """

    def __init__(self, rank: int, size: int, ranks, team: int, slot: int):
        super().__init__(rank, size)
        self._me = rank
        self._w = size
        self._ranks = tuple(ranks)
        self._team = team
        self._slot = slot
        stage, self._stage_addr, p2p_addr = _arena.slot(slot)
        self._stage = stage
        # What calls stage at once: the block less a tail of 16 bytes per rank, which the size agreements of
        # chunked calls (_agree_gather, _agree_alltoall) need to move a little more than any call does.
        self._stage_bytes = stage.numel() - min((16 * size + 63) // 64 * 64, stage.numel() // 2)
        self._views = {}
        self._name = ""
        self._desc = ""
        self._coalescing = None
        self._closed = False
        from hyper_parallel.platform.torch.distributed.p2p import P2P

        self._p2p = P2P(p2p_addr, rank, self._ranks, team, _P2P_CHUNK)

    # ------------------------------------------------------------------ identity
    def getBackendName(self) -> str:
        return BACKEND_NAME

    def name(self) -> str:
        return BACKEND_NAME

    def _get_backend_name(self) -> str:
        return BACKEND_NAME

    @property
    def group_name(self) -> str:
        return self._name

    def getGroupName(self) -> str:
        return self._name

    def _set_group_name(self, name: str) -> None:
        self._name = name

    def setGroupName(self, name: str) -> None:
        self._name = name

    @property
    def group_desc(self) -> str:
        return self._desc

    def _set_group_desc(self, desc: str) -> None:
        self._desc = desc

    def __repr__(self) -> str:
        return f"HpshmemProcessGroup(rank={self._me}, size={self._w}, ranks={list(self._ranks)})"

    # ------------------------------------------------------------------ staging
    def _view(self, dtype) -> torch.Tensor:
        v = self._views.get(dtype)
        if v is None:
            item = torch.empty((), dtype=dtype).element_size()
            v = self._views[dtype] = self._stage[: self._stage_bytes // item * item].view(dtype)
        return v

    def _symmetric(self, t: torch.Tensor) -> bool:
        n = t.numel() * t.element_size()
        return n > 0 and t.is_contiguous() and _C.in_live_allocation(t.data_ptr(), n)

    # ------------------------------------------------------------------ size agreements of chunked calls
    # A call larger than the staging goes through it in chunks, and ranks whose totals differ have equal
    # first chunks: before its first chunk a rank agrees with the others on the call's whole size, so that a
    # disagreement fails every rank before anything is written. A peer whose tensor fits the staging makes
    # one call of the op itself meanwhile, so each agreement is a runtime call that the runtime fails against
    # any such call (on every rank: its checks compare every rank's words); calls that fit make no agreement.
    @staticmethod
    def _mismatch(what: str, text: str):
        e = _C.CollectiveMismatchError(
            f"hpshmem {what}: ranks disagree on the size of the call: {text}; nothing was written"
        )
        e.code = "collective_mismatch"
        return e

    def _agreeing(self, call, what: str, mine: str):
        """Runs an agreement's runtime call; the runtime's mismatch (a peer made another call) is told as such."""
        try:
            call()
        except _C.CollectiveMismatchError as e:
            raise self._mismatch(
                what,
                f"this rank (group rank {self._me}) passes {mine}, more than one call "
                f"through the staging moves, and another rank passes another size (the "
                f"runtime: {e})",
            ) from e

    def _agree_total(self, n: int, what: str, unit: str):
        """All-reduce, reduce-scatter, broadcast: every rank passes `n` (`unit`), or all raise. A MAX
        all-reduce of the int64 words [n, -n] at the staging's byte 64, a heap place that no single call uses:
        the runtime's agreement words (count, dtype, op, place, kind) then differ from those of a peer's single
        all-reduce, reduce-scatter or broadcast (at the staging's start or at a tensor of the heap)."""
        words = torch.tensor([n, -n], dtype=torch.int64)
        a = words.data_ptr()
        self._agreeing(
            lambda: _C.allreduce(
                self._stage_addr + 64, 2, _DTYPES[torch.int64], _OPS[int(_ROp.MAX)], 0, self._team, a, a
            ),
            what,
            f"{n} {unit}",
        )
        hi, lo = int(words[0]), -int(words[1])
        if hi != lo:
            raise self._mismatch(
                what, f"this rank (group rank {self._me}) passes {n} {unit}, the group's ranks between {lo} and {hi}"
            )

    def _agree_gather(self, nbytes: int, what: str):
        """All-gather: every rank gives `nbytes`, or all raise. An all-gather of more bytes per rank than a
        single call or a chunk ever moves (those move at most a W-th of the staging), so the runtime fails it
        against a peer's single call by size; each rank's piece starts with its total."""
        w = self._w
        s = self._stage_bytes // w // 8 * 8 + 8  # fits the block: the tail holds W x 8 bytes more
        words = self._stage[: w * s].view(torch.int64).view(w, s // 8)
        words[self._me, 0] = nbytes
        self._agreeing(
            lambda: _C.allgather(self._stage_addr, self._stage_addr + self._me * s, s, False, 0, self._team),
            what,
            f"{nbytes} bytes",
        )
        totals = words[:, 0].tolist()
        if min(totals) != max(totals):
            raise self._mismatch(
                what,
                f"this rank (group rank {self._me}) gives {nbytes} bytes, the group's "
                f"ranks between {min(totals)} and {max(totals)}",
            )

    def _agree_alltoall(self, send_elems, recv_elems, item: int, per: int, gate: bool, what: str) -> int:
        """All-to-all, gather, scatter: every rank's send and receive counts, checked as a whole on every rank
        (so all raise alike); returns the number of rounds of `per` elements the largest count takes.
        ``gate``: this rank runs several rounds where a peer may make one call (even splits, gather,
        scatter): the counts travel in an all-to-all of per + 1 elements per pair, more than a single call
        or a round ever moves, so the runtime fails it against a peer's single call on every rank (each
        such peer is in a pair whose counts differ with each rank here). Otherwise (uneven splits, where
        every rank agrees first whatever its sizes) an all-gather of the counts."""
        w = self._w
        row = torch.tensor(list(send_elems) + list(recv_elems), dtype=torch.int64)
        rows = None
        size = (per + 1) * item
        if gate and w * size <= self._stage.numel():
            buf = torch.empty(size, dtype=torch.uint8)
            carry = size >= 16 * w
            if carry:
                buf[: 16 * w].view(torch.int64).copy_(row)
            a = buf.data_ptr()
            self._agreeing(
                lambda: _C.alltoall(
                    [a] * w, [per + 1] * w, self._stage_addr, [per + 1] * w, item, False, 0, self._team
                ),
                what,
                f"{list(send_elems)} elements to send",
            )
            if carry:
                rows = self._stage[: w * size].view(w, size)[:, : 16 * w].contiguous().view(torch.int64)
        if rows is None:  # (no gate, or one too small to carry the counts: they follow it)
            got = rows = torch.empty(w, 2 * w, dtype=torch.int64)
            self._allgather_flat(row, lambda v, off, k: got[:, off : off + k].copy_(v), what)
        bad = (rows[:, :w] != rows[:, w:].t()).nonzero()
        if bad.numel():
            p, q = bad[0].tolist()
            raise self._mismatch(
                what,
                f"group rank {p} sends {int(rows[p, q])} elements to group rank {q}, which "
                f"expects {int(rows[q, w + p])} (this rank, group rank {self._me}, sends "
                f"{list(send_elems)} and expects {list(recv_elems)})",
            )
        return max(1, -(-int(rows.max()) // per))

    # ------------------------------------------------------------------ reductions
    def _allreduce_one(self, t: torch.Tensor, red, root: int = -1, what: str = "allreduce"):
        """All-reduce `t` in place (root >= 0: only that group rank's `t` receives the result)."""
        dcode, op, src = _reduce_codes(t, red, what)
        n = t.numel()
        item = t.element_size()
        if src is t and t.is_contiguous():
            addr = t.data_ptr()
            if root < 0 and n and _C.in_live_allocation(addr, n * item):
                _C.allreduce(addr, n, dcode, op, 0, self._team)  # a tensor of the heap: in place
                return
            if n * item <= self._stage_bytes:  # one staged call (the common case, kept short)
                _C.allreduce(
                    self._stage_addr, n, dcode, op, 0, self._team, addr, addr if root < 0 or root == self._me else 0
                )
                return
        f = _Flat(src, True)
        addr = f.flat.data_ptr()
        per = self._stage_bytes // item
        keep = root < 0 or root == self._me
        if n > per:
            self._agree_total(n, what, "elements")
        off = 0
        while True:  # an empty tensor still makes one call: every rank takes part and agrees on sizes
            k = min(per, n - off)
            a = addr + off * item
            _C.allreduce(self._stage_addr, k, dcode, op, 0, self._team, a, a if keep else 0)
            off += k
            if off >= n:
                break
        if keep:
            if src is not t:
                t.copy_(f.flat.view(t.shape))
            else:
                f.done()

    def allreduce(self, tensors, opts=None):
        opts = opts or _c10d.AllreduceOptions()
        if len(tensors) == 1 and isinstance(tensors[0], torch.Tensor) and tensors[0].layout == torch.sparse_coo:
            self._allreduce_sparse(tensors[0], opts.reduceOp)
            return _done(tensors, opts)
        t = _one(tensors, "allreduce")
        red = opts.reduceOp
        value = red.op.value
        op, dtype = _OPS.get(value), t.dtype
        dcode = _DTYPES.get(dtype)
        if op is not None and value != _PREMUL and dcode is not None and dtype is not torch.bool:
            # The common case in one crossing: a dense tensor that fits the staging, not of the heap.
            n, item = t.numel(), t.element_size()
            if t.is_contiguous() and n * item <= self._stage_bytes:
                addr = t.data_ptr()
                if not _C.is_symmetric(addr, n * item):
                    _C.allreduce(self._stage_addr, n, dcode, op, 0, self._team, addr, addr)
                    return _Work(tensors) if opts.asyncOp else _DONE
        self._allreduce_one(t, red)
        return _done(tensors, opts)

    def _allreduce_sparse(self, t: torch.Tensor, red):
        """A sparse COO tensor summed over the group, in place (as gloo: SUM only). Every rank's
        indices and values are gathered (padded to the largest count) and added in rank order."""
        if _op_value(red) != int(_ROp.SUM):
            raise ValueError(
                f"hpshmem allreduce: sparse tensors are summed only, not reduced with "
                f"{dist.ReduceOp.RedOpType(_op_value(red))}"
            )
        c = t.coalesce()
        _check_cpu([c.values()], "allreduce")
        idx, val, w = c.indices(), c.values(), self._w
        counts = torch.empty(w, dtype=torch.int64)
        self._allgather_into(counts, torch.tensor([idx.shape[1]], dtype=torch.int64), "allreduce (sparse)")
        most = int(counts.max())
        pad_idx = torch.zeros((idx.shape[0], most), dtype=torch.int64)
        pad_idx[:, : idx.shape[1]] = idx
        pad_val = torch.zeros((most, *val.shape[1:]), dtype=val.dtype)
        pad_val[: val.shape[0]] = val
        all_idx = torch.empty((w, *pad_idx.shape), dtype=torch.int64)
        all_val = torch.empty((w, *pad_val.shape), dtype=val.dtype)
        self._allgather_into(all_idx, pad_idx, "allreduce (sparse)")
        self._allgather_into(all_val, pad_val, "allreduce (sparse)")
        total = None
        for r in range(w):
            n = int(counts[r])
            part = torch.sparse_coo_tensor(all_idx[r, :, :n], all_val[r, :n], t.shape)
            total = part if total is None else total + part
        t.copy_(total.coalesce())

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts or _c10d.AllreduceCoalescedOptions()
        _check_cpu(tensors, "allreduce_coalesced")
        red = opts.reduceOp
        dtype = tensors[0].dtype if tensors else None
        total = sum(t.numel() for t in tensors)
        op = _op_value(red)
        if (
            tensors
            and all(t.dtype == dtype for t in tensors)
            and op != _PREMUL
            and dtype != torch.bool
            and total * tensors[0].element_size() <= self._stage_bytes
        ):
            dcode, code, _ = _reduce_codes(tensors[0], red, "allreduce_coalesced")
            view = self._view(dtype)[:total]
            torch.cat([t.reshape(-1) for t in tensors], out=view)
            _C.allreduce(self._stage_addr, total, dcode, code, 0, self._team)
            off = 0
            for t in tensors:
                n = t.numel()
                t.copy_(view[off : off + n].view(t.shape))
                off += n
        else:
            for t in tensors:
                self._allreduce_one(t, red, what="allreduce_coalesced")
        return _done(tensors, opts)

    def reduce(self, tensors, opts=None):
        opts = opts or _c10d.ReduceOptions()
        t = _one(tensors, "reduce")
        self._check_root(opts.rootRank, "reduce")
        self._allreduce_one(t, opts.reduceOp, root=opts.rootRank, what="reduce")
        return _done(tensors, opts)

    def _reduce_scatter_one(self, out: torch.Tensor, rows, red, what: str):
        """`out` (n elements) = this rank's block of the reduction; `rows(k, off)` copies elements
        [off, off + k) of every rank's block into a (W, k) staging view."""
        dcode, op, _ = _reduce_codes(out, red, what)
        if out.dtype == torch.bool:
            dcode = 5
        n = out.numel()
        item = out.element_size()
        f = _Flat(out, False)
        per = self._stage_bytes // (item * self._w)
        if n > per:
            self._agree_total(n, what, "output elements")
        view = self._view(out.dtype)
        off = 0
        while True:
            k = min(per, n - off)
            rows(view[: self._w * k].view(self._w, k), off, k)
            _C.reduce_scatter(f.flat.data_ptr() + off * item, self._stage_addr, k, dcode, op, self._team)
            off += k
            if off >= n:
                break
        f.done()

    def _premul(self, red, t):
        if _op_value(red) != _PREMUL:
            return t
        factor = red.factor
        return t * (factor.item() if isinstance(factor, torch.Tensor) else factor)

    def _reduce_scatter_tensor(self, out, inp, red, what):
        _check_cpu((out, inp), what)
        if inp.dtype != out.dtype:
            raise TypeError(f"hpshmem {what}: input ({inp.dtype}) and output ({out.dtype}) dtypes differ")
        n = out.numel()
        if inp.numel() != n * self._w:
            raise ValueError(
                f"hpshmem {what}: input has {inp.numel()} elements, expected group size x output = {self._w} x {n}"
            )
        inp = self._premul(red, inp)
        dcode, op, _ = _reduce_codes(out, red, what)
        if out.is_contiguous() and inp.is_contiguous():
            if self._symmetric(inp):
                _C.reduce_scatter(out.data_ptr(), inp.data_ptr(), n, dcode, op, self._team)
                return
            if inp.numel() * inp.element_size() <= self._stage_bytes:  # one staged call, copies in C++
                _C.reduce_scatter(out.data_ptr(), self._stage_addr, n, dcode, op, self._team, inp.data_ptr())
                return
        src = inp.reshape(self._w, n)
        self._reduce_scatter_one(out, lambda v, off, k: v.copy_(src[:, off : off + k]), red, what)

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 (torch's names)
        opts = opts or _c10d.ReduceScatterOptions()
        self._reduce_scatter_tensor(output, input, opts.reduceOp, "reduce_scatter_tensor")
        return _done([output], opts)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        out = _one(output_tensors, "reduce_scatter")
        pieces = self._pieces(
            input_lists, out, "reduce_scatter", "input_list", f"one input list of group size {self._w} tensors expected"
        )
        ins = [self._premul(opts.reduceOp, t) for t in pieces]
        flats = [t.reshape(-1) for t in ins]

        def rows(v, off, k):
            for p, f in enumerate(flats):
                v[p].copy_(f[off : off + k])

        self._reduce_scatter_one(out, rows, opts.reduceOp, "reduce_scatter")
        return _done(output_tensors, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_tensor(o, i, opts.reduceOp, "reduce_scatter_tensor_coalesced")
        return _done(outputs, opts)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # ------------------------------------------------------------------ broadcast and gathers
    def _pieces(self, lists, like: torch.Tensor, what: str, name: str, need: str):
        """``lists[0]``, checked: one CPU tensor per group rank, each with `like`'s elements and dtype.
        `name` is "input_list" or "output_list" (for the messages); `need` says what was expected."""
        if len(lists) != 1 or len(lists[0]) != self._w:
            raise ValueError(f"hpshmem {what}: {need}")
        pieces = lists[0]
        _check_cpu(pieces, what)
        n, other = like.numel(), "output" if name == "input_list" else "input"
        for p, t in enumerate(pieces):
            if t.numel() != n or t.dtype != like.dtype:
                raise ValueError(
                    f"hpshmem {what}: {name}[{p}] has {t.numel()} elements of {t.dtype}, "
                    f"the {other} {n} of {like.dtype}"
                )
        return pieces

    def _check_root(self, root: int, what: str):
        if not 0 <= root < self._w:
            raise ValueError(f"hpshmem {what}: root {root} is not a rank of this group of {self._w}")

    def broadcast(self, tensors, opts=None):
        opts = opts or _c10d.BroadcastOptions()
        t = _one(tensors, "broadcast")
        root = opts.rootRank
        self._check_root(root, "broadcast")
        item = t.element_size()
        nbytes = t.numel() * item
        if self._symmetric(t):
            _C.broadcast(t.data_ptr(), nbytes, root, self._team)
            return _done(tensors, opts)
        me_root = root == self._me
        f = _Flat(t, me_root)
        addr = f.flat.data_ptr()
        per = self._stage_bytes // item * item
        if nbytes > per:
            self._agree_total(nbytes, "broadcast", "bytes")
        off = 0
        while True:
            k = min(per, nbytes - off)
            a = addr + off
            _C.broadcast(self._stage_addr, k, root, self._team, a if me_root else 0, 0 if me_root else a)
            off += k
            if off >= nbytes:
                break
        if not me_root:
            f.done()
        return _done(tensors, opts)

    def _allgather_flat(self, inp: torch.Tensor, write, what: str):
        """Every rank's `inp` gathered; ``write(view (W, k), off, k)`` takes each chunk of k elements per rank."""
        _check_cpu((inp,), what)
        n = inp.numel()
        item = inp.element_size()
        src = inp.reshape(-1) if inp.is_contiguous() else inp.reshape(-1).contiguous()
        addr = src.data_ptr()
        per = self._stage_bytes // (item * self._w)
        if n > per:
            self._agree_gather(n * item, what)
        view = self._view(inp.dtype)
        off = 0
        while True:
            k = min(per, n - off)
            _C.allgather(self._stage_addr, addr + off * item, k * item, False, 0, self._team)
            write(view[: self._w * k].view(self._w, k), off, k)
            off += k
            if off >= n:
                break

    def allgather(self, output_lists, input_tensors, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        inp = _one(input_tensors, "allgather")
        outs = self._pieces(
            output_lists, inp, "allgather", "output_list", f"one output list of group size {self._w} tensors expected"
        )
        flats = [_Flat(o, False) for o in outs]

        def write(v, off, k):
            for p, f in enumerate(flats):
                f.flat[off : off + k].copy_(v[p])

        self._allgather_flat(inp, write, "allgather")
        for f in flats:
            f.done()
        return _done(output_lists, opts)

    def _allgather_into(self, out: torch.Tensor, inp: torch.Tensor, what: str):
        _check_cpu((out,), what)
        if out.dtype != inp.dtype:
            raise TypeError(f"hpshmem {what}: input ({inp.dtype}) and output ({out.dtype}) dtypes differ")
        n = inp.numel()
        if out.numel() != n * self._w:
            raise ValueError(
                f"hpshmem {what}: output has {out.numel()} elements, expected group size x input = {self._w} x {n}"
            )
        if out.is_contiguous() and inp.is_contiguous() and out.numel() * out.element_size() <= self._stage_bytes:
            # One staged call: the gathered bytes are copied out in C++.
            _C.allgather(self._stage_addr, inp.data_ptr(), n * inp.element_size(), False, 0, self._team, out.data_ptr())
            return
        f = _Flat(out, False)
        dst = f.flat.view(self._w, n)
        self._allgather_flat(inp, lambda v, off, k: dst[:, off : off + k].copy_(v), what)
        f.done()

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 (torch's names)
        opts = opts or _c10d.AllgatherOptions()
        self._allgather_into(output, input, "all_gather_into_tensor")
        return _done([output], opts)

    all_gather_single = _allgather_base

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        for o, i in zip(outputs, inputs):
            self._allgather_into(o, i, "allgather_into_tensor_coalesced")
        return _done(outputs, opts)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        # output_lists[r][i]: rank r's copy of input i
        if len(output_lists) != self._w or any(len(outs) != len(input_list) for outs in output_lists):
            raise ValueError(
                f"hpshmem all_gather_coalesced: {self._w} output lists of {len(input_list)} tensors expected"
            )
        sync = _c10d.AllgatherOptions()
        sync.asyncOp = False
        for i, inp in enumerate(input_list):
            self.allgather([[outs[i] for outs in output_lists]], [inp], sync)
        return _done(output_lists, opts)

    # ------------------------------------------------------------------ all-to-all, gather, scatter
    def _alltoall_flat(self, sends, send_elems, recv_elems, dtype, item, write, uneven: bool, what: str = "all_to_all"):
        """sends[p] (a contiguous flat tensor or None) / send_elems[p] elements go to group rank p;
        ``write(view, offsets, counts)`` takes each round's received pieces (packed by source).
        Rounds: each pair moves at most a W-th of the staging per round; when sizes are uneven, or this
        rank runs several rounds, the ranks first agree on every rank's counts and so on the number of
        rounds (_agree_alltoall)."""
        w = self._w
        per = max(1, self._stage_bytes // (item * w))
        need = max(1, -(-max(max(send_elems), max(recv_elems)) // per)) if w else 1
        if uneven or need > 1:
            need = self._agree_alltoall(send_elems, recv_elems, item, per, not uneven, what)
        addrs = [s.data_ptr() if s is not None else self._stage_addr for s in sends]
        view = self._view(dtype)
        for r in range(need):
            lo = r * per
            s_counts = [max(0, min(per, n - lo)) for n in send_elems]
            r_counts = [max(0, min(per, n - lo)) for n in recv_elems]
            ptrs = [a + lo * item if c else a for a, c in zip(addrs, s_counts)]
            _C.alltoall(ptrs, s_counts, self._stage_addr, r_counts, item, False, 0, self._team)
            write(view, lo, r_counts)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        opts = opts or _c10d.AllToAllOptions()
        _check_cpu((output, input), "all_to_all_single")
        if output.dtype != input.dtype:
            raise TypeError(f"hpshmem all_to_all_single: input ({input.dtype}) and output ({output.dtype}) differ")
        w = self._w
        uneven = bool(output_split_sizes) or bool(input_split_sizes)
        send = self._splits(input, input_split_sizes, "input_split_sizes")
        recv = self._splits(output, output_split_sizes, "output_split_sizes")
        item = input.element_size()
        if (
            not uneven
            and input.is_contiguous()
            and output.is_contiguous()
            and output.numel() * item <= self._stage_bytes
        ):
            # Even splits that fit the staging: one call, the pieces copied out in C++.
            n, a = send[0], input.data_ptr()
            _C.alltoall(
                [a + p * n * item for p in range(w)],
                send,
                self._stage_addr,
                recv,
                item,
                False,
                0,
                self._team,
                output.data_ptr(),
            )
            return _done([output], opts)
        src = input.reshape(-1) if input.is_contiguous() else input.reshape(-1).contiguous()
        sends, off = [], 0
        for n in send:
            sends.append(src[off : off + n] if n else None)
            off += n
        f = _Flat(output, False)
        starts, o = [], 0
        for n in recv:
            starts.append(o)
            o += n

        def write(view, lo, counts):
            pos = 0
            for q, c in enumerate(counts):
                if c:
                    f.flat[starts[q] + lo : starts[q] + lo + c].copy_(view[pos : pos + c])
                pos += c

        self._alltoall_flat(sends, send, recv, input.dtype, input.element_size(), write, uneven, "all_to_all_single")
        f.done()
        return _done([output], opts)

    all_to_all_single = alltoall_base

    def _splits(self, t: torch.Tensor, splits, name: str):
        """Elements per group rank of `t` split along dim 0 (even when `splits` is empty)."""
        w = self._w
        if not splits:
            if t.dim() == 0 or t.shape[0] % w:
                raise ValueError(
                    f"hpshmem all_to_all_single: dim 0 of size "
                    f"{t.shape[0] if t.dim() else 0} does not split evenly over {w} ranks"
                )
            return [t.numel() // w] * w
        if len(splits) != w:
            raise ValueError(f"hpshmem all_to_all_single: {name} has {len(splits)} entries for {w} ranks")
        if any(s < 0 for s in splits) or sum(splits) != (t.shape[0] if t.dim() else 0):
            raise ValueError(
                f"hpshmem all_to_all_single: {name} {list(splits)} must be non-negative and add up "
                f"to dim 0 ({t.shape[0] if t.dim() else 0})"
            )
        row = t[0].numel() if t.dim() and t.shape[0] else (t.numel() // max(1, t.shape[0]) if t.dim() else 1)
        if t.dim() and t.shape[0] == 0:
            row = 1
            for d in t.shape[1:]:
                row *= d
        return [s * row for s in splits]

    def alltoall(self, output_tensors, input_tensors, opts=None):
        opts = opts or _c10d.AllToAllOptions()
        w = self._w
        if len(output_tensors) != w or len(input_tensors) != w:
            raise ValueError(f"hpshmem all_to_all: {w} input and {w} output tensors expected")
        _check_cpu(list(output_tensors) + list(input_tensors), "all_to_all")
        dtype = input_tensors[0].dtype
        for t in list(output_tensors) + list(input_tensors):
            if t.dtype != dtype:
                raise TypeError(f"hpshmem all_to_all: every tensor must have one dtype ({dtype}), got {t.dtype}")
        sends = [t.reshape(-1).contiguous() if t.numel() else None for t in input_tensors]
        outs = [_Flat(t, False) for t in output_tensors]
        recv = [t.numel() for t in output_tensors]

        write = _into_pieces(outs)
        self._alltoall_flat(
            sends, [t.numel() for t in input_tensors], recv, dtype, input_tensors[0].element_size(), write, True
        )
        for f in outs:
            f.done()
        return _done(output_tensors, opts)

    def gather(self, output_lists, input_tensors, opts=None):
        opts = opts or _c10d.GatherOptions()
        inp = _one(input_tensors, "gather")
        root = opts.rootRank
        self._check_root(root, "gather")
        w, n = self._w, inp.numel()
        me_root = root == self._me
        outs = []
        if me_root:
            pieces = self._pieces(
                output_lists, inp, "gather", "output_list", f"the root needs one output list of {w} tensors"
            )
            outs = [_Flat(o, False) for o in pieces]
        src = inp.reshape(-1).contiguous()
        sends = [src if p == root and n else None for p in range(w)]
        send = [n if p == root else 0 for p in range(w)]
        recv = [n if me_root else 0] * w

        write = _into_pieces(outs)
        self._alltoall_flat(sends, send, recv, inp.dtype, inp.element_size(), write, False, "gather")
        for f in outs:
            f.done()
        return _done(output_lists, opts)

    def scatter(self, output_tensors, input_lists, opts=None):
        opts = opts or _c10d.ScatterOptions()
        out = _one(output_tensors, "scatter")
        root = opts.rootRank
        self._check_root(root, "scatter")
        w, n = self._w, out.numel()
        me_root = root == self._me
        sends = [None] * w
        if me_root:
            pieces = self._pieces(
                input_lists, out, "scatter", "input_list", f"the root needs one input list of {w} tensors"
            )
            sends = [t.reshape(-1).contiguous() if n else None for t in pieces]
        send = [n if me_root else 0] * w
        recv = [n if p == root else 0 for p in range(w)]
        f = _Flat(out, False)

        def write(view, lo, counts):
            c = counts[root]
            if c:
                f.flat[lo : lo + c].copy_(view[:c])

        self._alltoall_flat(sends, send, recv, out.dtype, out.element_size(), write, False, "scatter")
        f.done()
        return _done(output_tensors, opts)

    # ------------------------------------------------------------------ synchronization
    def barrier(self, opts=None):
        opts = opts or _c10d.BarrierOptions()
        if self._team == 0:
            _C.barrier()
        else:
            _C.team_barrier(self._team)
        return _done([], opts)

    def monitored_barrier(self, timeout=None, wait_all_ranks: bool = False):
        """gloo's protocol: every rank reports to group rank 0, which names the ranks that did not
        report within `timeout` (the first, or all with `wait_all_ranks`), then releases the others."""
        if isinstance(timeout, datetime.timedelta):
            seconds = timeout.total_seconds()
        else:  # torch passes seconds as a number too
            seconds = None if timeout is None else float(timeout)
            timeout = None if timeout is None else datetime.timedelta(seconds=seconds)
        token = torch.zeros(1, dtype=torch.uint8)
        if self._me != 0:
            ack = None
            try:
                self._p2p.send(token, 0, _MONITORED_TAG, None).wait(timeout)
                ack = self._p2p.recv(token, 0, _MONITORED_TAG, None)
                ack.wait(timeout)
            except Exception as e:
                if ack is not None:
                    self._p2p.cancel(ack)
                raise RuntimeError(
                    f"Rank {self._me} successfully reached monitoredBarrier, but received errors while "
                    f"waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank. "
                    f"({e})"
                ) from e
            return
        deadline = None if seconds is None else time.monotonic() + seconds
        works = {
            r: self._p2p.recv(torch.zeros(1, dtype=torch.uint8), r, _MONITORED_TAG, None) for r in range(1, self._w)
        }
        missing = []
        try:
            self._monitor(works, deadline, seconds, wait_all_ranks, missing)
        finally:
            for w in works.values():
                if not w.is_completed():
                    self._p2p.cancel(w)
        if missing:
            raise RuntimeError(
                f"Ranks {', '.join(map(str, missing))} failed to pass monitoredBarrier in {seconds * 1000:.0f} ms"
            )
        for r in range(1, self._w):
            self._p2p.send(token, r, _MONITORED_TAG, None)

    @staticmethod
    def _monitor(works, deadline, seconds, wait_all_ranks, missing):
        """Rank 0 of a monitored barrier: waits for each rank's report until the deadline (as gloo:
        with `wait_all_ranks`, each rank gets the whole timeout)."""
        for r, w in works.items():
            left = None
            if wait_all_ranks and seconds is not None:
                left = datetime.timedelta(seconds=seconds)
            elif deadline is not None:
                left = datetime.timedelta(seconds=deadline - time.monotonic())
                if left.total_seconds() <= 0 and not w.is_completed():
                    raise RuntimeError(f"Rank 0 timed out in monitoredBarrier after {seconds * 1000:.0f} ms")
            try:
                w.wait(left)
            except _C.ShmemTimeoutError:
                if not wait_all_ranks:
                    raise RuntimeError(f"Rank {r} failed to pass monitoredBarrier in {seconds * 1000:.0f} ms") from None
                missing.append(r)

    # ------------------------------------------------------------------ point to point
    def send(self, tensors, dst: int, tag: int = 0):
        t = _one(tensors, "send")
        return self._p2p.send(t, dst, tag, self._coalescing)

    def recv(self, tensors, src: int, tag: int = 0):
        t = _one(tensors, "recv")
        return self._p2p.recv(t, src, tag, self._coalescing)

    def recv_anysource(self, tensors, tag: int = 0):
        t = _one(tensors, "recv_anysource")
        return self._p2p.recv(t, -1, tag, self._coalescing)

    def _start_coalescing(self, device=None):
        self._coalescing = []

    def _end_coalescing(self, device=None):
        works, self._coalescing = self._coalescing or [], None
        from hyper_parallel.platform.torch.distributed.p2p import BatchWork

        return BatchWork(works)

    # ------------------------------------------------------------------ lifecycle
    def shutdown(self):
        if self._closed:
            return
        self._closed = True
        self._p2p.close()
        _release_slot(self._slot, self._team == 0)  # team 0: the default group, whose end ends the arena

    def abort(self):
        self.shutdown()

    def _set_sequence_number_for_group(self):
        pass


# Every call of a group that waits in the runtime: its collectives and barrier. (A point-to-point
# Work is waited on outside the group's calls, by the job's timeout or wait()'s own.)
_TIMED_CALLS = (
    "allreduce",
    "allreduce_coalesced",
    "reduce",
    "reduce_scatter",
    "_reduce_scatter_base",
    "reduce_scatter_single_coalesced",
    "broadcast",
    "allgather",
    "_allgather_base",
    "all_gather_single_coalesced",
    "allgather_coalesced",
    "alltoall_base",
    "alltoall",
    "gather",
    "scatter",
    "barrier",
)


def _timed(call):
    def bounded(self, *args, **kwargs):
        previous = _C.set_thread_wait_timeout(self._timeout_sec)
        try:
            return call(self, *args, **kwargs)
        finally:
            _C.set_thread_wait_timeout(previous)

    bounded.__name__ = call.__name__
    bounded.__doc__ = call.__doc__
    return bounded


class _TimedProcessGroup(HpshmemProcessGroup):
    """A group made with a timeout other than the default group's (``new_group(timeout=...)``): each
    of its calls bounds its waits by that timeout (the runtime's per-thread limit), other groups keep
    theirs. It has a team of its own, kept until the runtime ends (a team that timed out cannot be
    taken down collectively)."""

    def __init__(self, rank, size, ranks, team, slot, timeout_sec: float):
        super().__init__(rank, size, ranks, team, slot)
        self._timeout_sec = timeout_sec


for _call in _TIMED_CALLS:
    setattr(_TimedProcessGroup, _call, _timed(getattr(HpshmemProcessGroup, _call)))
for _alias, _call in (
    ("reduce_scatter_tensor_coalesced", "reduce_scatter_single_coalesced"),
    ("reduce_scatter_single", "_reduce_scatter_base"),
    ("all_gather_single", "_allgather_base"),
    ("allgather_into_tensor_coalesced", "all_gather_single_coalesced"),
    ("all_to_all_single", "alltoall_base"),
):
    setattr(_TimedProcessGroup, _alias, getattr(_TimedProcessGroup, _call))
