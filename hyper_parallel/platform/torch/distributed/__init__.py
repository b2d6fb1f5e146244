"""The torch.distributed backend ``hpshmem``: DDP, FSDP2, DTensor and plain ``dist.*`` calls on CPU
tensors, carried by the symmetric-memory runtime.

    import torch.distributed as dist
    dist.init_process_group("hpshmem")        # or "cpu:hpshmem", or new_group(..., backend="hpshmem")

The backend is registered when ``hyper_parallel`` is imported with torch loaded, and by torch
itself at ``import torch`` (the package declares a ``torch.backends`` entry point), so existing
programs need only the backend's name. Registering imports nothing heavy: the runtime and the
process group's module load when the first group is made.
"""

from __future__ import annotations

BACKEND_NAME = "hpshmem"


def _create(dist_backend_opts, backend_options):
    """torch's extended-API creator: the process group for one group of ranks (collective over them)."""
    from hyper_parallel.platform.torch.distributed.process_group import create_process_group

    return create_process_group(dist_backend_opts, backend_options)


def register() -> None:
    """Register the ``hpshmem`` backend with torch.distributed for CPU tensors (idempotent)."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cpu"])


def _autoload() -> None:
    """The ``torch.backends`` entry point: runs at the end of ``import torch``. It must never break
    torch's import, so a torch without distributed support is left alone."""
    try:
        register()
    except ImportError:
        pass
