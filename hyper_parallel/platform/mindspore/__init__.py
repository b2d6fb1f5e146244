"""The MindSpore platform."""

from __future__ import annotations

from hyper_parallel.platform import Platform

_PLATFORM = Platform(
    "mindspore", "hyper_parallel.platform.mindspore.symmetric_memory", "MindSporeSymmetricMemoryHandler"
)


def platform() -> Platform:
    return _PLATFORM
