"""The unified API's argument checks, one per kind of argument. Each returns what the runtime
needs (addresses in bytes, sizes in elements) or raises ShmemValueError/ShmemTypeError naming the
argument; none writes anything. What concerns Python objects (ints, tensors, names) is checked
here; the value rules (ranges, ranks, op codes) are the runtime's ``check_*`` functions and its
request builders ``copy_request``, ``signal_request``, ``wait_request``
(ccsrc/symmetric_memory/ops/checks), which the binding's fast path and MindSpore's graph kernels
apply too, so each rule and its message exist once."""

from __future__ import annotations

import operator

from hyper_parallel.core.signals import COMPARE_OP_NAMES, SIGNAL_OP_NAMES
from hyper_parallel.core.symmetric_memory._base import _C, _fast, _handler, _type_error, _value_error
from hyper_parallel.core.symmetric_memory._state import _Group, _require_init, _state
from hyper_parallel.core.symmetric_memory.algorithms.fused import spare_cores

_SIGNAL_OPS = SIGNAL_OP_NAMES
_COMPARE_OPS = COMPARE_OP_NAMES


class _Indexed:
    """The name "base[i]", formatted only when an error message needs it (hot paths skip the f-string)."""

    __slots__ = ("base", "i")

    def __init__(self, base, i):
        self.base, self.i = base, i

    def __str__(self):
        return f"{self.base}[{self.i}]"

    def __format__(self, spec):
        return str(self)


def _tensor(x, name: str):
    """(addr, numel, itemsize, dtype) of a CPU contiguous tensor; addr in bytes, numel in elements."""
    if not _handler.is_tensor(x):
        raise _type_error(f"{name} must be a {_handler.name} tensor, got {type(x).__name__}")
    try:
        addr, numel, itemsize, dtype, contiguous, device = _handler.describe(x)
    except TypeError as e:  # a layout or device whose memory cannot be described (sparse, meta)
        raise _type_error(f"{name}: {e}") from None
    if device != "cpu":
        raise _value_error(
            f"{name} is on device '{device}'; symmetric memory on this host is CPU memory (use device='cpu')"
        )
    if not contiguous:
        raise _value_error(f"{name} must be contiguous (offsets index the flat tensor); call .contiguous()")
    return addr, numel, itemsize, dtype


def _symmetric(x, name: str):
    """Like _tensor, for a tensor that must lie inside a live symmetric allocation (the runtime's
    allocator decides, as for the fast path)."""
    info = _tensor(x, name)
    if not _C.in_live_allocation(info[0], info[1] * info[2]):
        raise _value_error(
            f"{name} is not a symmetric tensor (allocate it with symm.empty(); "
            f"freed tensors and local tensors do not qualify)"
        )
    return info


def _int(x, name: str) -> int:
    if type(x) is int and -(1 << 63) <= x < (1 << 63):  # the common case, first
        return x
    if isinstance(x, bool):
        raise _type_error(f"{name} must be an int or a one-element integer tensor, got bool")
    if _handler.is_tensor(x):
        try:
            return _handler.scalar_int(x, name)
        except TypeError as e:
            raise _type_error(str(e)) from None
        except ValueError as e:
            raise _value_error(str(e)) from None
    try:
        v = operator.index(x)
    except TypeError:
        raise _type_error(f"{name} must be an int or a one-element integer tensor, got {type(x).__name__}") from None
    return _int64(v, name)


def _int64(v: int, name) -> int:
    """Python ints are unbounded; the runtime's arguments are int64."""
    if not -(1 << 63) <= v < (1 << 63):
        raise _value_error(f"{name} {v} does not fit an int64")
    return v


def _index(x, name: str) -> int:
    v = _int(x, name)
    _C.check_index(v, str(name))
    return v


def _rank(x, name: str = "target_rank") -> int:
    _require_init("this call")
    r = _int(x, name)
    _C.check_rank(r, _state.world, name)
    return r


def _group_pes(group, what: str):
    """The global ranks `group` names (a list of ranks, or the framework's group object), in
    group-rank order, or None for the whole job; unchecked beyond their type."""
    if group is None:
        return None
    if isinstance(group, (list, tuple, range)):
        return [_int(r, f"group[{i}]") for i, r in enumerate(group)]
    try:
        pes = _handler.group_ranks(group)
    except TypeError as e:
        raise _type_error(f"{what}: {e}") from None
    except ValueError as e:
        raise _value_error(f"{what}: {e}") from None
    return None if pes is None else [int(r) for r in pes]


def _group(group, what: str):
    """The _Group for `group` (None, a list of global ranks, or the framework's group object),
    made on its first use (collective over its members only), or None for the whole job."""
    if group is None:
        return None
    _require_init(what)
    cacheable = not isinstance(group, (list, range))  # tuples, ProcessGroups, group names
    try:  # a group seen before: no checks again (its ranks were checked when it was made)
        g = _state.groups.get(group if cacheable else tuple(group), False)
    except TypeError:  # unhashable: checked below
        g = False
    if g is not False:
        return g
    pes = _group_pes(group, what)
    if pes is None:  # the framework's name for the whole job
        _state.groups[group] = None
        return None
    w, me = _state.world, _C.my_pe()
    if not pes:
        raise _value_error(f"{what}: group has no ranks")
    for i, r in enumerate(pes):
        _C.check_rank(r, w, f"group[{i}]")
    if len(set(pes)) != len(pes):
        raise _value_error(f"{what}: group lists a rank twice: {pes}")
    if me not in pes:
        raise _value_error(
            f"{what}: rank {me} is not a member of group {pes} (only members call a group's collectives)"
        )
    key = tuple(pes)
    with _state.lock:
        g = _state.groups.get(key, False)
        if g is False:
            g = None if pes == list(range(w)) else _Group(_C.team_create(pes), pes)
            _state.groups[key] = g
        if cacheable:
            _state.groups[group] = g
    return g


def _group_rank(x, g, name: str) -> int:
    """A rank of group `g` (the whole job when None), checked against its size."""
    if g is None:
        return _rank(x, name)
    r = _int(x, name)
    _C.check_rank(r, g.size, name)
    return r


def _block_dim(x) -> int:
    if x is None:
        return 0
    v = _int(x, "block_dim")
    _C.check_block_dim(v)
    return v


def _signal_tensor(signal, name="signal"):
    """(addr, numel, width in bytes) of a symmetric int32/int64 signal tensor."""
    addr, numel, itemsize, dtype = _symmetric(signal, name)
    if dtype is not _handler.int32 and dtype is not _handler.int64:
        raise _type_error(f"{name} must be an int32 or int64 tensor, got {dtype}")
    return addr, numel, itemsize


def _signal_arg(signal):
    """A symmetric tensor as the signal request builders read it: (addr, numel, int width, dtype name),
    int width 4/8 for int32/int64 and 0 for any other dtype (the builder names it)."""
    addr, numel, itemsize, dtype = _symmetric(signal, "signal")
    width = itemsize if dtype is _handler.int32 or dtype is _handler.int64 else 0
    return addr, numel, width, str(dtype)


def _signal_op(x) -> int:
    """A signal op's code from its name, a SignalOp or an int; the code's range is the builder's to check."""
    if isinstance(x, str):
        if x.lower() not in _SIGNAL_OPS:
            raise _value_error(f"signal_op {x!r} is not 'set' or 'add'")
        return _SIGNAL_OPS[x.lower()]
    return _int(x, "signal_op")


def _compare_op(x) -> int:
    """A compare op's code from its name, a CompareOp or an int; the code's range is the builder's to check."""
    if isinstance(x, str):
        if x.lower() not in _COMPARE_OPS:
            raise _value_error(f"compare_op {x!r} is not one of {sorted(_COMPARE_OPS)}")
        return _COMPARE_OPS[x.lower()]
    return _int(x, "compare_op")


def _signal_request(signal, signal_offset, signal_value, signal_op, target_rank):
    """A signal's request, (word addr, width in bytes, value, op code, pe): the arguments read here,
    checked by the runtime's request builder (ccsrc/symmetric_memory/ops/checks/request.h), which
    the fast path and MindSpore's graph kernels use too."""
    return _C.signal_request(
        *_signal_arg(signal),
        _int(signal_offset, "signal_offset"),
        _int(signal_value, "signal_value"),
        _signal_op(signal_op),
        _int(target_rank, "target_rank"),
    )


def _wait_request(signal, signal_offset, compare_value, compare_op):
    """A wait's request, (word addr, width in bytes, value, compare code, offset): as _signal_request."""
    return _C.wait_request(
        *_signal_arg(signal),
        _int(signal_offset, "signal_offset"),
        _int(compare_value, "compare_value"),
        _compare_op(compare_op),
    )


def _copy_args(target, target_offset, src, src_offset, size, target_rank, block_dim, target_sym: bool):
    """A put/get's request, (target addr, src addr, bytes, pe, block_dim): the arguments read here,
    checked by the runtime's request builder (ccsrc/symmetric_memory/ops/checks/request.h), which
    the fast path and MindSpore's graph kernels use too."""
    t_addr, t_numel, itemsize, t_dtype = _symmetric(target, "target") if target_sym else _tensor(target, "target")
    s_addr, s_numel, _, s_dtype = _tensor(src, "src") if target_sym else _symmetric(src, "src")
    toff, soff, n = _int(target_offset, "target_offset"), _int(src_offset, "src_offset"), _int(size, "size")
    rank = _int(target_rank, "target_rank")
    bd = None if block_dim is None else _int(block_dim, "block_dim")
    return _C.copy_request(t_addr, t_numel, itemsize, t_dtype, s_addr, s_numel, s_dtype, toff, soff, n, rank, bd)


def _mode(mode) -> str:
    if mode not in ("push", "pull"):
        raise _value_error(f"mode must be 'push' or 'pull', got {mode!r}")
    return mode


def _matrix(x, name):
    info = _tensor(x, name)
    shape = _handler.ndim_shape(x)
    if len(shape) != 2:
        raise _value_error(f"{name} must be 2-D, has shape {shape}")
    return info, shape


def _default_block_rows(m: int, world: int) -> int:
    """The RFC's four blocks per rank, none under 256 rows (smaller CPU matmuls lose more than
    an earlier start gains: measured 4% at 256 rows, 22% at 128, fp32). On a host whose cores
    the ranks already fill nothing runs beside the matmuls, so one block per rank."""
    if not spare_cores(world):
        return max(1, m)
    return max(1, -(-m // 4), min(m, 256))


def _overlap(overlap, world: int) -> bool:
    if overlap is None:
        return spare_cores(world)
    if not isinstance(overlap, bool):
        raise _type_error(f"overlap must be True, False or None, got {overlap!r}")
    return overlap


# The reducing collectives' codes (ccsrc/symmetric_memory/ops/reduce/reduce.h, ops.h).
_REDUCE_DTYPES = {
    "float32": 0,
    "float64": 1,
    "float16": 2,
    "bfloat16": 3,
    "int8": 4,
    "uint8": 5,
    "int16": 6,
    "int32": 7,
    "int64": 8,
}
_REDUCE_OPS = {"sum": 0, "avg": 1, "max": 2, "min": 3, "prod": 4}
_ALGORITHMS = {None: 0, "one_shot": 1, "two_shot": 2}


_reduce_codes: dict = {}  # dtype object -> code (or None), filled on first use


def _reduce_code_of(dtype):
    """The runtime's code of `dtype`, or None when it cannot be reduced (both frameworks print
    dtypes as [module.]Name)."""
    code = _reduce_codes.get(dtype, -1)
    if code == -1:
        code = _reduce_codes[dtype] = _REDUCE_DTYPES.get(str(dtype).rsplit(".", 1)[-1].lower())
    return code


def _reduce_dtype(dtype, name: str) -> int:
    """The runtime's code of a dtype it can reduce; ShmemTypeError otherwise."""
    code = _reduce_code_of(dtype)
    if code is None:
        raise _type_error(f"{name} has dtype {dtype}, which cannot be reduced (supported: {', '.join(_REDUCE_DTYPES)})")
    return code


def _reduce_op(op) -> int:
    if not isinstance(op, str) or op.lower() not in _REDUCE_OPS:
        raise _value_error(f"op must be one of {', '.join(repr(k) for k in _REDUCE_OPS)}, got {op!r}")
    return _REDUCE_OPS[op.lower()]


def _algorithm(algorithm) -> int:
    if algorithm not in _ALGORITHMS:
        raise _value_error(f"algorithm must be None, 'one_shot' or 'two_shot', got {algorithm!r}")
    return _ALGORITHMS[algorithm]


def _register_fast_reduce():
    """Tells the fast path which dtypes it may reduce, by the identity its tensor reader reports."""
    ids = _handler.fast_dtype_ids()
    pairs = []
    for d in _fast[2]:  # the dtypes the fast path knows
        code = _reduce_code_of(d)
        if code is not None:
            pairs.append((ids[d] if ids is not None else d, code))
    _C.fast_register_reduce(pairs)


_register_fast_reduce()
