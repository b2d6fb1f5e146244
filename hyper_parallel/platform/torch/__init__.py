"""The PyTorch platform."""

from __future__ import annotations


class TorchPlatform:
    name = "torch"

    def __init__(self):
        self._handler = None

    def get_symmetric_memory_handler(self):
        if self._handler is None:
            from hyper_parallel.platform.torch.symmetric_memory import TorchSymmetricMemoryHandler

            self._handler = TorchSymmetricMemoryHandler()
        return self._handler


_PLATFORM = TorchPlatform()


def platform() -> TorchPlatform:
    return _PLATFORM
