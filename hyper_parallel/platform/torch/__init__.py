"""The PyTorch platform."""

from __future__ import annotations

from hyper_parallel.platform import Platform

_PLATFORM = Platform("torch", "hyper_parallel.platform.torch.symmetric_memory", "TorchSymmetricMemoryHandler")


def platform() -> Platform:
    return _PLATFORM
