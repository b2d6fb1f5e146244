"""The OpenSHMEM 1.5 C API over libhpshmem: where its header and library lie, and
the ``oshcc`` / ``oshc++`` compiler wrappers and the ``oshrun`` launcher (:mod:`.cli`)."""

from .cli import include_dir, library_dir

__all__ = ["include_dir", "library_dir"]
