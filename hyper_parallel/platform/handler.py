"""The contract between the unified API and a framework's adapter (torch, MindSpore).

The unified API (``hyper_parallel.core.symmetric_memory``) and its algorithms use a tensor
only through these methods, so the same code serves every framework. Units: sizes and
offsets in elements, addresses and itemsizes in bytes. Nothing here is imported at run
time by the adapters; it is the checked description of what they provide.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Protocol, Sequence, Tuple, runtime_checkable

Tensor = Any
Dtype = Any


@runtime_checkable
class SymmetricMemoryHandler(Protocol):
    name: str  # "torch" or "mindspore"
    int32: Dtype
    int64: Dtype
    float32: Dtype
    # Drains work the framework has queued but not run (MindSpore PyNative), or None.
    sync: Optional[Callable[[], None]]

    def api_loaded(self, api: Any) -> None:
        """Called once the public API module `api` has been imported (compiler hooks)."""

    # ---- rendezvous
    def rendezvous_info(
        self, make_unique_id: Callable[[], bytes], timeout_sec: float
    ) -> Tuple[int, int, Optional[bytes], str]:
        """(rank, world size, unique id or None, bootstrap endpoint or "")."""

    def framework_rank(self) -> Optional[Tuple[int, int]]:
        """(rank, world size) from the framework's own process group, or None."""

    def group_ranks(self, group: Any) -> Optional[Sequence[int]]:
        """The global ranks of the framework's group object (torch ProcessGroup, MindSpore group
        name), in group-rank order; None for the whole job. TypeError for what is not a group,
        ValueError for a group this rank is not a member of."""

    # ---- tensors
    def is_tensor(self, x: Any) -> bool: ...

    def describe(self, t: Tensor) -> Tuple[int, int, int, Dtype, bool, str]:
        """(address, elements, itemsize, dtype, contiguous, device type); raises TypeError for
        tensors without flat memory (sparse, meta)."""

    def fast_protocol(self) -> Tuple[str, type, Dict[Dtype, int], Any, Any, Any, Optional[Dict[str, str]]]:
        """What the binding's fast path reads: (kind, tensor type, {dtype: itemsize}, int32, int64,
        tensor-reader capsule or None, attribute names or None)."""

    def fast_dtype_ids(self) -> Optional[Dict[Dtype, int]]:
        """{dtype: the identity the fast path's tensor reader reports}, or None when it compares dtype objects."""

    def is_dtype(self, x: Any) -> bool: ...

    def itemsize(self, dtype: Dtype) -> int:
        """Bytes per element; raises TypeError for what is not a fixed-size dtype."""

    def default_dtype(self) -> Dtype: ...

    def is_integer_dtype(self, dtype: Dtype) -> bool: ...

    def scalar_int(self, t: Tensor, name: str) -> int:
        """The value of a one-element integer tensor; ValueError/TypeError naming `name` otherwise."""

    def wrap(self, buf: Any, nbytes: int, shape: Sequence[int], dtype: Dtype) -> Tensor:
        """A tensor over the memory of ctypes buffer `buf` (no copy) that keeps `buf` alive."""

    def detach(self, t: Tensor) -> None:
        """Make `t` an empty tensor with memory of its own (it no longer reaches the heap)."""

    # ---- tensor ops the algorithms compute with
    def rows(self, t: Tensor, r0: int, r1: int) -> Tensor: ...

    def flat_view(self, t: Tensor, count: int, shape: Sequence[int]) -> Tensor: ...

    def matmul(self, a: Tensor, b: Tensor) -> Tensor: ...

    def matmul_into(self, a: Tensor, b: Tensor, out: Tensor, r0: int, r1: int) -> None: ...

    def accumulate(self, acc: Tensor, x: Tensor) -> Tensor: ...

    def add(self, x: Tensor, y: Tensor, dtype: Dtype) -> Tensor: ...

    def scale(self, acc: Tensor, factor: float) -> Tensor: ...

    def copy_as(self, t: Tensor, dtype: Dtype) -> Tensor: ...

    def new_empty(self, shape: Sequence[int], dtype: Dtype) -> Tensor: ...

    def cast(self, t: Tensor, dtype: Dtype) -> Tensor: ...

    def accumulate_dtype(self, t: Tensor) -> Dtype: ...

    def ndim_shape(self, t: Tensor) -> Tuple[int, ...]: ...

    # True: every synchronous MoE call goes through moe_autograd (MindSpore: its autodiff records Cells).
    records_moe: bool

    def wants_grad(self, *tensors: Optional[Tensor]) -> bool:
        """Whether a call on these tensors (None: absent) must be recorded for autograd; a handler
        that says True also offers `moe_autograd` (dispatch / combine wrappers)."""
        ...
