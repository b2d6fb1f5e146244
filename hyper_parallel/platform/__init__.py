"""Platform choice: which framework's handler serves the unified API.

``HYPER_PARALLEL_PLATFORM=torch|mindspore`` forces one. Otherwise a framework
already imported wins (torch first), then one that is installed. Nothing is
imported that the choice does not need: a MindSpore job never imports torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

_PLATFORMS = {
    "torch": "hyper_parallel.platform.torch",
    "mindspore": "hyper_parallel.platform.mindspore",
}

_platform = None


class Platform:
    """One framework: its name and its symmetric-memory handler, made on first use (the
    handler module imports the framework, so nothing is imported before a call needs it)."""

    def __init__(self, name: str, handler_module: str, handler_class: str):
        self.name = name
        self._where = (handler_module, handler_class)
        self._handler = None

    def get_symmetric_memory_handler(self):
        if self._handler is None:
            module, cls = self._where
            self._handler = getattr(importlib.import_module(module), cls)()
        return self._handler


def _choose() -> str:
    forced = os.environ.get("HYPER_PARALLEL_PLATFORM", "").strip().lower()
    if forced:
        if forced not in _PLATFORMS:
            raise ValueError(f"HYPER_PARALLEL_PLATFORM={forced!r} is not one of {sorted(_PLATFORMS)}")
        return forced
    for name in ("torch", "mindspore"):
        if name in sys.modules:
            return name
    for name in ("torch", "mindspore"):
        if importlib.util.find_spec(name) is not None:
            return name
    raise ImportError(
        "hyper_parallel.core.symmetric_memory needs PyTorch or MindSpore; neither is installed (pip install torch)"
    )


def get_platform():
    """The platform object of the chosen framework (has ``get_symmetric_memory_handler()``)."""
    global _platform
    if _platform is None:
        name = _choose()
        if importlib.util.find_spec(_PLATFORMS[name]) is None:
            raise NotImplementedError(
                f"the {name} handler is not part of this build yet; use torch (HYPER_PARALLEL_PLATFORM=torch)"
            )
        _platform = importlib.import_module(_PLATFORMS[name]).platform()
    return _platform
