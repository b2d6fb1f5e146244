"""The MindSpore platform."""

from __future__ import annotations


class MindSporePlatform:
    name = "mindspore"

    def __init__(self):
        self._handler = None

    def get_symmetric_memory_handler(self):
        if self._handler is None:
            from hyper_parallel.platform.mindspore.symmetric_memory import MindSporeSymmetricMemoryHandler

            self._handler = MindSporeSymmetricMemoryHandler()
        return self._handler


_PLATFORM = MindSporePlatform()


def platform() -> MindSporePlatform:
    return _PLATFORM
