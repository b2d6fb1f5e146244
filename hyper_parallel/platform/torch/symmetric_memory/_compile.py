"""The API as PyTorch custom operators, so ``torch.compile(fullgraph=True)`` keeps every call in its graph.

Eager calls never come here: they run the plain functions of
:mod:`hyper_parallel.core.symmetric_memory` (the C++ fast path). When TorchDynamo traces a
function that calls them, each API function is replaced (``torch.compiler.substitute_in_graph``)
by a twin that records one ``torch.ops.hyper_parallel.*`` operator; at run time that operator
calls the same plain function, so checks, errors and results are those of eager mode.

Each operator is declared once, in ``_OPS``: its API function and that function's parameters,
each with its kind. The operator's schema, its kernel, its fake (shape) function, its ordering
and the twin Dynamo traces are all made from that one row.

Ordering in the graph:

* Every operator is registered as an ordered side effect: the compiler threads one token through
  them, so they run in program order among themselves (a put before the signal that publishes it)
  and none is dropped although most return nothing.
* Local tensors an operator writes are declared in its schema (``get``'s target, the collectives'
  outputs, ``shmem_wait_for_signal``'s ``depend_tensor``): reads of them after the call depend on it.
  Pass the buffer a signal guards as ``depend_tensor``; that is what orders its reads after the wait.
* Operands an operator reads (a put's ``src``) are its inputs, so their producers run first.

Two things here are not torch's documented public API, for want of one:

* ``torch.library.EffectType``: ``CustomOpDef.register_effect`` (public) takes it, but torch
  exports the enum only from a private module (``torch._library.effects``); ``torch.library``
  imports it, and it is read from there. No public call declares an operator's ordered side effect,
  and without it the compiler drops or reorders operators that return nothing.
* A ``sys.meta_path`` finder: ``substitute_in_graph`` imports ``torch._dynamo`` (about a second),
  so the twins are registered when torch itself imports that module (the first ``torch.compile``),
  not when this library is imported; torch offers no public hook for that moment.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import torch

_NS = "hyper_parallel"
_symm = None  # the public API module, bound by install()


def _api():
    return _symm


# --------------------------------------------------------------------------- argument kinds
# How each API parameter travels through an operator's schema:
#   TENSOR, OPT_TENSOR, TENSORS: as themselves ("Tensor", "Tensor?", "Tensor[]").
#   SCALAR, OPT_SCALAR: offsets, sizes, ranks, signal values and op codes may be ints, one-element
#     tensors or (op codes) names, and a schema has one type per argument: all the scalars of a
#     call travel together as (int[] ints, Tensor?[] tensors, str strs), and the plain function
#     gets back whichever was given (strs joined by NULs: a schema has no list of strings).
#   COUNTS: alltoall's receive_list, a list of ints (int[] <name>_counts) or an integer tensor
#     (Tensor? <name>_tensor).
#   GROUP: a collective's group travels as its global ranks (int[] group_ranks, [] for the whole
#     job); the plain function gets them back as a list (the same group: the API names groups by
#     their ranks).
#   Any other kind is a schema type the value travels as ("str", "str?", "SymInt?", "bool?"). Ints are
#   SymInts so that a value that changes from call to call becomes a graph input, not a recompile.
TENSOR, OPT_TENSOR, TENSORS = "Tensor", "Tensor?", "Tensor[]"
SCALAR, OPT_SCALAR, COUNTS, GROUP = "scalar", "scalar?", "counts", "group"
_NONE = "\x01"  # an OPT_SCALAR left None, in strs (names travel there only for *_op scalars)


class _P(NamedTuple):
    name: str
    kind: str
    default: object = None
    keyword_only: bool = False


def _kw(name, kind, default=None):
    return _P(name, kind, default, True)


class _Op(NamedTuple):
    """One operator: `name` in the namespace, the API function `api` it stands for, that function's
    parameters in order, the ones whose tensors it writes, what the traced twin returns ("op": the
    operator's result; a tuple of parameter names: those; None: nothing), the operator's fake
    function for an output (None: it returns nothing), and `prepare` (rewrites the bound arguments
    before the call, for defaults the API computes)."""

    name: str
    api: str
    params: Tuple[_P, ...]
    mutates: Tuple[str, ...] = ()
    returns: object = None
    fake: Optional[Callable] = None
    prepare: Optional[Callable] = None


def _wait_fake(depend_tensor, signal, *rest):
    return signal.new_empty((), dtype=torch.int64)


def _mmrs_fake(x1, x2, symm_tensor, signal, reduce_op, mode, overlap, group_ranks):
    w = len(group_ranks) or _api().get_world_size()
    return x1.new_empty((x1.shape[0] // w, x2.shape[1]))


def _agmm_prepare(v):
    if v["c"] is None:  # the API allocates it; in a graph it must be an input the operator writes
        v["c"] = v["a"].new_empty((v["gather_out"].shape[0], v["b"].shape[1]))


_COPY = (
    _P("target", TENSOR),
    _P("target_offset", SCALAR),
    _P("src", TENSOR),
    _P("src_offset", SCALAR),
    _P("size", SCALAR),
)
_SIGNAL = (_P("signal_offset", SCALAR), _P("signal_value", SCALAR), _P("signal_op", SCALAR))
_BLOCK_DIM = _kw("block_dim", "SymInt?")
_MODE = _kw("mode", "str", "push")

_OPS = (
    _Op("put", "shmem_put", (*_COPY, _P("target_rank", SCALAR), _BLOCK_DIM)),
    _Op("get", "shmem_get", (*_COPY, _P("target_rank", SCALAR), _BLOCK_DIM), mutates=("target",)),
    _Op(
        "put_with_signal",
        "shmem_put_with_signal",
        (*_COPY, _P("signal", TENSOR), *_SIGNAL, _P("target_rank", SCALAR), _BLOCK_DIM),
    ),
    _Op("signal_op", "shmem_signal_op", (_P("signal", TENSOR), *_SIGNAL, _P("target_rank", SCALAR))),
    _Op(
        "wait_for_signal",
        "shmem_wait_for_signal",
        (
            _P("depend_tensor", OPT_TENSOR),
            _P("signal", TENSOR),
            _P("signal_offset", SCALAR),
            _P("compare_value", SCALAR),
            _P("compare_op", SCALAR),
        ),
        mutates=("depend_tensor",),
        returns="op",
        fake=_wait_fake,
    ),
    _Op("barrier", "barrier", (_P("group", GROUP),)),
    _Op(
        "allgather",
        "shmem_allgather",
        (_P("output_tensor", TENSOR), _P("input_tensor", TENSOR), _MODE, _BLOCK_DIM, _kw("group", GROUP)),
        mutates=("output_tensor",),
        returns=("output_tensor",),
    ),
    _Op(
        "alltoall",
        "shmem_alltoall",
        (
            _P("send_tensor_list", TENSORS),
            _P("receive_tensor", TENSOR),
            _P("receive_list", COUNTS),
            _MODE,
            _BLOCK_DIM,
            _kw("group", GROUP),
        ),
        mutates=("receive_tensor",),
        returns=("receive_tensor",),
    ),
    _Op(
        "allreduce",
        "shmem_allreduce",
        (_P("tensor", TENSOR), _P("op", "str", "sum"), _kw("algorithm", "str?"), _kw("group", GROUP)),
        mutates=("tensor",),
        returns=("tensor",),
    ),
    _Op(
        "reduce_scatter",
        "shmem_reduce_scatter",
        (_P("output", TENSOR), _P("input", TENSOR), _P("op", "str", "sum"), _kw("group", GROUP)),
        mutates=("output",),
        returns=("output",),
    ),
    _Op(
        "broadcast",
        "shmem_broadcast",
        (_P("tensor", TENSOR), _P("root", SCALAR), _kw("group", GROUP)),
        mutates=("tensor",),
        returns=("tensor",),
    ),
    _Op(
        "fused_all_gather_matmul",
        "fused_all_gather_matmul",
        (
            _P("a", TENSOR),
            _P("b", TENSOR),
            _P("c", TENSOR),
            _P("gather_out", TENSOR),
            _P("signal", TENSOR),
            _P("block_size", OPT_SCALAR),
            _MODE,
            _kw("overlap", "bool?"),
            _kw("group", GROUP),
        ),
        mutates=("gather_out", "c"),
        returns=("gather_out", "c"),
        prepare=_agmm_prepare,
    ),
    _Op(
        "fused_matmul_reduce_scatter",
        "fused_matmul_reduce_scatter",
        (
            _P("x1", TENSOR),
            _P("x2", TENSOR),
            _P("symm_tensor", TENSOR),
            _P("signal", TENSOR),
            _P("reduce_op", "str", "sum"),
            _MODE,
            _kw("overlap", "bool?"),
            _kw("group", GROUP),
        ),
        mutates=("symm_tensor",),
        returns="op",
        fake=_mmrs_fake,
    ),
)


# --------------------------------------------------------------------------- conversions
def _scalars(names, values):
    """(ints, tensors, strs, error): error is the message for a value no schema type holds, raised
    as eager mode raises it when the operator runs."""
    ints, tensors, strs = [], [], []
    for name, v in zip(names, values):
        if isinstance(v, torch.Tensor):
            ints.append(0), tensors.append(v), strs.append("")
        elif isinstance(v, str) and name.endswith("_op"):
            ints.append(0), tensors.append(None), strs.append(v)
        elif isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool):
            ints.append(v), tensors.append(None), strs.append("")
        elif v is None and name in _OPTIONAL_SCALARS:
            ints.append(0), tensors.append(None), strs.append(_NONE)
        else:
            return None, None, None, f"{name} must be an int or a one-element integer tensor, got {type(v).__name__}"
    return ints, tensors, "\0".join(strs), None


def _unpack(ints: Sequence[int], tensors: Sequence[Optional[torch.Tensor]], strs: str):
    out = []
    for i, t, s in zip(ints, tensors, strs.split("\0")):
        out.append(None if s == _NONE else s or (t if t is not None else i))
    return out


def _group_ranks(group) -> List[int]:
    """Evaluated once while tracing (the group is a constant of the graph)."""
    pes = _api()._group_pes(group, "group")
    if pes == []:  # [] travels as "the whole job": refuse it here, as eager mode does
        raise _api().ShmemValueError("group has no ranks")
    return pes or []


def _group_of(group_ranks: Sequence[int]):
    return list(group_ranks) if group_ranks else None


_OPTIONAL_SCALARS = {p.name for op in _OPS for p in op.params if p.kind == OPT_SCALAR}


# --------------------------------------------------------------------------- one row -> one operator
def _schema(op: _Op) -> str:
    """The operator's schema: tensors in the API's order, then the scalars, the others, the group."""
    args, aliases = [], 0
    for p in op.params:
        if p.kind in (TENSOR, OPT_TENSOR, TENSORS):
            if p.name in op.mutates:
                args.append(f"Tensor(a{aliases}!){'?' if p.kind == OPT_TENSOR else ''} {p.name}")
                aliases += 1
            else:
                args.append(f"{p.kind} {p.name}")
    if any(p.kind in (SCALAR, OPT_SCALAR) for p in op.params):
        args += ["SymInt[] ints", "Tensor?[] tensors", "str strs"]
    for p in op.params:
        if p.kind == COUNTS:
            args += [f"SymInt[] {p.name}_counts", f"Tensor? {p.name}_tensor"]
        elif p.kind not in (TENSOR, OPT_TENSOR, TENSORS, SCALAR, OPT_SCALAR, GROUP):
            # torch's dispatch to a mode passes `mode` by keyword itself: an argument of that name collides
            args.append(f"{p.kind} {'copy_mode' if p.name == 'mode' else p.name}")
    if any(p.kind == GROUP for p in op.params):
        args.append("SymInt[] group_ranks")
    return f"({', '.join(args)}) -> {'Tensor' if op.fake is not None else '()'}"


def _kernel(op: _Op):
    """The operator's kernel: rebuilds the API call from the schema's arguments and makes it."""
    tensors = [p for p in op.params if p.kind in (TENSOR, OPT_TENSOR, TENSORS)]
    scalars = [p for p in op.params if p.kind in (SCALAR, OPT_SCALAR)]
    counts = [p for p in op.params if p.kind == COUNTS]
    others = [p for p in op.params if p.kind not in (TENSOR, OPT_TENSOR, TENSORS, SCALAR, OPT_SCALAR, COUNTS, GROUP)]
    has_group = any(p.kind == GROUP for p in op.params)

    tensor_names = [p.name for p in tensors]
    scalar_names = [p.name for p in scalars]
    positional_names = [p.name for p in op.params if not p.keyword_only]
    keyword_names = [p.name for p in op.params if p.keyword_only]

    def kernel(*args):
        v = dict(zip(tensor_names, args))
        i = len(tensor_names)
        if scalars:
            v.update(zip(scalar_names, _unpack(*args[i : i + 3])))
            i += 3
        for p in counts:
            v[p.name] = args[i + 1] if args[i + 1] is not None else args[i]
            i += 2
        for p in others:
            v[p.name] = args[i]
            i += 1
        if has_group:
            v["group"] = _group_of(args[i])
        result = getattr(_api(), op.api)(*[v[n] for n in positional_names], **{n: v[n] for n in keyword_names})
        if op.fake is None:
            return None
        return result if isinstance(result, torch.Tensor) else torch.tensor(result, dtype=torch.int64)

    kernel.__name__ = f"_{op.name}"
    return kernel


def _define(op: _Op):
    d = torch.library.custom_op(f"{_NS}::{op.name}", _kernel(op), mutates_args=op.mutates, schema=_schema(op))
    # Tracing runs the fake function on fake tensors: it describes the output and checks nothing
    # (the values are unknown); the kernel checks everything when it runs.
    d.register_fake(op.fake or (lambda *args: None))
    d.register_effect(torch.library.EffectType.ORDERED)
    return d


def _raise_argument_error(message: str) -> None:
    raise _api().ShmemTypeError(message)


# Where a call's argument fits no schema type: raises eager mode's error when the call runs.
_argument_error = torch.library.custom_op(
    f"{_NS}::argument_error", _raise_argument_error, mutates_args=(), schema="(str message) -> ()"
)
_argument_error.register_fake(lambda message: None)
_argument_error.register_effect(torch.library.EffectType.ORDERED)

_DEFS = {op.name: _define(op) for op in _OPS}


# --------------------------------------------------------------------------- what Dynamo traces
def _twin(op: _Op, group_ranks):
    """What Dynamo traces in place of the API function: converts the arguments to the operator's
    schema and records the operator."""
    positional = [p for p in op.params if not p.keyword_only]

    def twin(*args, **kwargs):
        v = {p.name: p.default for p in op.params}
        for p, a in zip(positional, args):
            v[p.name] = a
        v.update(kwargs)
        if op.prepare is not None:
            op.prepare(v)
        call, scalars = [], []
        for p in op.params:
            if p.kind in (TENSOR, OPT_TENSOR):
                call.append(v[p.name])
            elif p.kind == TENSORS:
                call.append(list(v[p.name]))
            elif p.kind in (SCALAR, OPT_SCALAR):
                scalars.append(p.name)
        if scalars:
            ints, tensors, strs, error = _scalars(scalars, [v[n] for n in scalars])
            if error:
                return torch.ops.hyper_parallel.argument_error(error)
            call += [ints, tensors, strs]
        for p in op.params:
            if p.kind == COUNTS:
                listed = v[p.name]
                if isinstance(listed, torch.Tensor):
                    call += [[], listed]
                elif not isinstance(listed, (list, tuple)):
                    return torch.ops.hyper_parallel.argument_error(
                        f"{p.name} must be a list of ints or an integer tensor, got {type(listed).__name__}"
                    )
                else:
                    names = [f"{p.name}[{q}]" for q in range(len(listed))]
                    counts, _, _, error = _scalars(names, listed)
                    if error:
                        return torch.ops.hyper_parallel.argument_error(error)
                    call += [counts, None]
            elif p.kind not in (TENSOR, OPT_TENSOR, TENSORS, SCALAR, OPT_SCALAR, GROUP):
                call.append(v[p.name])
        if "group" in v:
            call.append(group_ranks(v["group"]))
        result = getattr(torch.ops.hyper_parallel, op.name)(*call)
        if op.returns == "op":
            return result
        if op.returns is None:
            return None
        out = tuple(v[n] for n in op.returns)
        return out[0] if len(out) == 1 else out

    twin.__name__ = op.api
    return twin


def _register_substitutes():
    """Tells TorchDynamo to trace each API function as a call of its operator."""
    symm = _api()
    group_ranks = torch.compiler.assume_constant_result(_group_ranks)
    for op in _OPS:
        torch.compiler.substitute_in_graph(getattr(symm, op.api))(_twin(op, group_ranks))
    from hyper_parallel.platform.torch.symmetric_memory import _compile_moe  # its own operators

    _compile_moe.register(symm)


class _AfterDynamoImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs _register_substitutes right after ``torch._dynamo`` has been imported."""

    def __init__(self):
        self._loader = None

    def find_spec(self, name, path, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)  # the real finders locate the module
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _register_substitutes()


def install(api) -> None:
    """Binds the public API module `api` and registers the replacements of its functions now
    when ``torch._dynamo`` is loaded, or as soon as it is."""
    global _symm
    _symm = api
    if "torch._dynamo" in sys.modules:
        _register_substitutes()
    elif not any(isinstance(f, _AfterDynamoImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterDynamoImport())
