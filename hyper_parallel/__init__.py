"""HyperParallel Symmetric Memory: one-sided communication over a symmetric heap.

The user-facing API lives in :mod:`hyper_parallel.core.symmetric_memory`.
"""

__version__ = "0.1.0"
