"""What every part of the unified API shares: the binding, the framework's handler (chosen once),
the fast path's registration, the error classes and how argument errors are made, and the type
names used in the signatures."""

from __future__ import annotations

from typing import Any, Union

from hyper_parallel import _hpshmem as _C
from hyper_parallel.core.signals import CompareOp, SignalOp
from hyper_parallel.platform import get_platform

# The API serves torch and MindSpore alike: a Tensor is a torch.Tensor or a mindspore.Tensor
# (whichever framework the process uses), a Dtype that framework's dtype.
Tensor = Any
Dtype = Any
IntArg = Union[int, Tensor]  # an int, or a one-element integer tensor
SignalOpArg = Union[SignalOp, int, str]  # SignalOp.ADD, 1 or "add"
CompareOpArg = Union[CompareOp, int, str]  # CompareOp.GE, 4 or "ge"

# Errors: created by the binding (the lowest layer that names the cause).
ShmemError = _C.ShmemError
ShmemValueError = _C.ShmemValueError
ShmemTypeError = _C.ShmemTypeError
ShmemTimeoutError = _C.ShmemTimeoutError
PeerDeadError = _C.PeerDeadError
HeapExhaustedError = _C.HeapExhaustedError
InvalidFreeError = _C.InvalidFreeError
CollectiveMismatchError = _C.CollectiveMismatchError
BootstrapError = _C.BootstrapError
NotInitializedError = _C.NotInitializedError
ShmemUnsupportedError = _C.ShmemUnsupportedError

_handler = get_platform().get_symmetric_memory_handler()
# Frameworks that queue operators (MindSpore's PyNative) drain the queue before any call that
# reads or writes tensor memory by address; None where ops are complete when they return.
_sync = getattr(_handler, "sync", None)

# The common case of each one-sided call is checked and done in C++ in one crossing
# (ccsrc/python/fast_path.cc); it declines (False / None) on anything unusual or invalid, and
# the Python checks then run and raise the documented error.
_fast = _handler.fast_protocol()
_C.fast_register(*_fast)


# --------------------------------------------------------------------------- errors
def _value_error(msg: str) -> ShmemValueError:
    e = ShmemValueError(msg)
    e.code = "invalid_argument"
    return e


def _type_error(msg: str) -> ShmemTypeError:
    e = ShmemTypeError(msg)
    e.code = "type_error"
    return e
