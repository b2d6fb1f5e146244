"""HyperParallel Symmetric Memory: one-sided communication over a symmetric heap.

The user-facing API lives in :mod:`hyper_parallel.core.symmetric_memory`; the torch.distributed
backend ``hpshmem`` in :mod:`hyper_parallel.platform.torch.distributed` (registered here when torch
is loaded, and by torch itself through the package's ``torch.backends`` entry point).
"""

import sys as _sys

__version__ = "0.1.0"

if "torch" in _sys.modules:
    from hyper_parallel.platform.torch.distributed import _autoload

    _autoload()
