"""Single-process checks of the API's pieces that need no job: the argument checks (what they
accept, what they raise and how they say it), the enums, the handler contract, the stub and
type information shipped with the package. Fast: no launcher, no runtime.
"""

import ast
import os

import pytest
import torch

import hyper_parallel
import hyper_parallel.core.symmetric_memory as symm
from hyper_parallel.core.signals import COMPARE_OP_NAMES, SIGNAL_OP_NAMES, CompareOp, SignalOp
from hyper_parallel.platform.handler import SymmetricMemoryHandler

PKG = os.path.dirname(hyper_parallel.__file__)


def test_enums_carry_the_runtime_values_and_names():
    assert [int(op) for op in SignalOp] == [0, 1]
    assert [(op.name, int(op)) for op in CompareOp] == [
        ("EQ", 0),
        ("GT", 1),
        ("LT", 2),
        ("NE", 3),
        ("GE", 4),
        ("LE", 5),
    ]
    assert SIGNAL_OP_NAMES == {"set": 0, "add": 1}
    assert COMPARE_OP_NAMES == {"eq": 0, "gt": 1, "lt": 2, "ne": 3, "ge": 4, "le": 5}
    assert symm.SIGNAL_ADD is SignalOp.ADD and symm.CMP_GE is CompareOp.GE
    assert "SignalOp" in symm.__all__ and "CompareOp" in symm.__all__


@pytest.mark.parametrize(
    "x,want", [(SignalOp.ADD, 1), (0, 0), ("set", 0), ("ADD", 1), ("Set", 0), (torch.tensor([1]), 1)]
)
def test_signal_op_accepts_enum_int_name_and_tensor(x, want):
    assert symm._signal_op(x) == want


# The request builders (ccsrc/symmetric_memory/ops/checks/request.h) on a signal word they are told
# lies at `addr`: they compute addresses and check values, touching no memory, so no job is needed.
def _signal_request(width=8, offset=0, value=1, op=0, dtype=None):
    return symm._C.signal_request(4096, 3, width, dtype or f"int{8 * width}", offset, value, op, 0)


def _wait_request(width=8, offset=0, value=1, cmp=0, dtype=None):
    return symm._C.wait_request(4096, 3, width, dtype or f"int{8 * width}", offset, value, cmp)


# Without a job there is no rank to signal: a signal whose other arguments all pass fails on its
# rank, the last rule.
_NO_RANK = r"target_rank 0 is out of range \[0, 0\)"


def test_signal_and_wait_requests_address_the_word():
    assert _wait_request(4, 2, -5, 1) == (4096 + 8, 4, -5, 1, 2)
    assert _wait_request(8, 2, 2**40, 5) == (4096 + 16, 8, 2**40, 5, 2)
    with pytest.raises(symm.ShmemValueError, match=_NO_RANK):
        _signal_request(4, 2, -5, 1)


@pytest.mark.parametrize(
    "call,exc,fragment",
    [
        (lambda: _signal_request(op=2), symm.ShmemValueError, "signal_op 2 is not SET (0) or ADD (1)"),
        (lambda: _signal_request(op=-1), symm.ShmemValueError, "signal_op -1 is not SET (0) or ADD (1)"),
        (lambda: _wait_request(cmp=6), symm.ShmemValueError, "compare_op 6 is not one of 0=eq"),
        (lambda: _wait_request(cmp=-1), symm.ShmemValueError, "compare_op -1 is not one of 0=eq"),
        (lambda: _signal_request(offset=3), symm.ShmemValueError, "signal_offset 3 is out of range for signal's 3"),
        (lambda: _wait_request(offset=-1), symm.ShmemValueError, "signal_offset must be >= 0, got -1"),
        (
            lambda: _signal_request(width=0, dtype="torch.float32"),
            symm.ShmemTypeError,
            "int64 tensor, got torch.float32",
        ),
        (lambda: _wait_request(width=0, dtype="torch.int16"), symm.ShmemTypeError, "int64 tensor, got torch.int16"),
    ],
)
def test_signal_and_wait_requests_name_the_broken_rule(call, exc, fragment):
    with pytest.raises(exc) as e:
        call()
    assert fragment in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "x,exc,fragment",
    [
        ("mul", symm.ShmemValueError, "'mul' is not 'set'"),
        (True, symm.ShmemTypeError, "got bool"),
        (1.0, symm.ShmemTypeError, "got float"),
        (torch.tensor([1.0]), symm.ShmemTypeError, "dtype torch.float32"),
    ],
)
def test_signal_op_refusals_name_the_argument(x, exc, fragment):
    with pytest.raises(exc) as e:
        symm._signal_op(x)
    assert fragment in str(e.value) and "signal_op" in str(e.value)


@pytest.mark.parametrize("x,want", [(CompareOp.LE, 5), (3, 3), ("ge", 4), ("GT", 1)])
def test_compare_op_accepts_enum_int_and_name(x, want):
    assert symm._compare_op(x) == want


@pytest.mark.parametrize("x", ["approx", "=="])
def test_compare_op_refusals_list_the_choices(x):
    with pytest.raises(symm.ShmemValueError) as e:
        symm._compare_op(x)
    assert "compare_op" in str(e.value)


@pytest.mark.parametrize(
    "x,want",
    [
        (0, 0),
        (7, 7),
        (2**62, 2**62),
        (torch.tensor(5), 5),
        (torch.tensor([3], dtype=torch.int32), 3),
        (SignalOp.ADD, 1),
    ],
)
def test_index_accepts_ints_and_one_element_integer_tensors(x, want):
    assert symm._index(x, "size") == want


@pytest.mark.parametrize(
    "x,exc,fragment",
    [
        (-1, symm.ShmemValueError, "size must be >= 0, got -1"),
        (True, symm.ShmemTypeError, "got bool"),
        (1.5, symm.ShmemTypeError, "got float"),
        ("2", symm.ShmemTypeError, "got str"),
        (None, symm.ShmemTypeError, "got NoneType"),
        (torch.tensor([1, 2]), symm.ShmemValueError, "shape (2,)"),
        (torch.tensor([1.0]), symm.ShmemTypeError, "dtype"),
    ],
)
def test_index_refusals_name_the_argument(x, exc, fragment):
    with pytest.raises(exc) as e:
        symm._index(x, "size")
    assert fragment in str(e.value) and "size" in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "width,ok,bad",
    [(4, [-(2**31), 2**31 - 1], [2**31, -(2**31) - 1]), (8, [-(2**63), 2**63 - 1], [2**63, -(2**63) - 1])],
)
def test_signal_values_must_fit_the_signal_word(width, ok, bad):
    for v in ok:
        assert _wait_request(width, value=v)[2] == v
        with pytest.raises(symm.ShmemValueError, match=_NO_RANK):
            _signal_request(width, value=v)
    for v in bad:
        if -(2**63) <= v < 2**63:  # past int64, the binding refuses the Python int itself
            with pytest.raises(
                symm.ShmemValueError, match=f"signal_value {v} does not fit the signal's int{8 * width}"
            ):
                _signal_request(width, value=v)
            with pytest.raises(
                symm.ShmemValueError, match=f"compare_value {v} does not fit the signal's int{8 * width}"
            ):
                _wait_request(width, value=v)
        else:
            with pytest.raises(symm.ShmemValueError, match="does not fit an int64"):
                symm._int(v, "signal_value")


@pytest.mark.parametrize("x", [0, 65, -1, True])
def test_block_dim_outside_1_to_64_is_refused(x):
    with pytest.raises(symm.ShmemError):
        symm._block_dim(x)
    assert symm._block_dim(None) == 0 and symm._block_dim(64) == 64


def test_calls_before_init_raise_at_once_without_a_job():
    assert not symm._C.is_initialized()
    for call in (lambda: symm.barrier(), lambda: symm.shmem_put(torch.ones(1), 0, torch.ones(1), 0, 1, 0)):
        with pytest.raises((symm.NotInitializedError, symm.ShmemValueError)):
            call()
    # The fast path declines what it cannot check without a runtime; the Python path then raises.
    assert symm._C.fast_put(torch.ones(1), 0, torch.ones(1), 0, 1, 0) is False


def _methods(tree, cls):
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}


def test_both_handlers_provide_the_whole_contract():
    assert isinstance(symm._handler, SymmetricMemoryHandler)
    contract = _methods(ast.parse(open(os.path.join(PKG, "platform", "handler.py")).read()), "SymmetricMemoryHandler")
    # MindSpore is not imported into a torch process: its class is read from the source.
    ms_src = open(os.path.join(PKG, "platform", "mindspore", "symmetric_memory", "symmetric_memory.py")).read()
    missing = contract - _methods(ast.parse(ms_src), "MindSporeSymmetricMemoryHandler") - {"sync"}
    assert not missing, f"the MindSpore handler lacks {sorted(missing)}"


def test_package_ships_type_information():
    assert os.path.exists(os.path.join(PKG, "py.typed"))
    hints = symm.shmem_put_with_signal.__annotations__
    assert set(hints) >= {"target", "signal", "signal_op", "target_rank", "block_dim", "return"}
    stub = os.path.join(os.path.dirname(symm._C.__file__), "_hpshmem.pyi")  # installed beside the extension
    assert os.path.exists(stub), "the extension's stub (nanobind stubgen) is built with it"
    text = open(stub).read()
    assert "def fast_put(" in text and "def put(dest: int, src: int, bytes: int" in text
