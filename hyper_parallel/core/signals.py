"""Signal operations and comparisons, defined once for every layer: the unified API, the
MindSpore graph operators and the algorithms. The values are the runtime's (``SignalOp`` and
``Cmp`` in ``hpshmem.h``); plain ints and the lower-case names stay accepted wherever these are.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["SignalOp", "CompareOp", "SIGNAL_OP_NAMES", "COMPARE_OP_NAMES"]


class SignalOp(IntEnum):
    """What a signal does to the target's word: SET it to the value, or ADD the value."""

    SET = 0
    ADD = 1


class CompareOp(IntEnum):
    """How a wait compares the signal word with the value (signed): ``word <op> value``."""

    EQ = 0
    GT = 1
    LT = 2
    NE = 3
    GE = 4
    LE = 5


# "set" -> 0, ...; the spellings the API accepts besides the ints (case-insensitive).
SIGNAL_OP_NAMES = {op.name.lower(): int(op) for op in SignalOp}
COMPARE_OP_NAMES = {op.name.lower(): int(op) for op in CompareOp}
