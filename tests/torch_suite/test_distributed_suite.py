"""PyTorch's own distributed test suite (torch.testing._internal.distributed.distributed_test) on the
hpshmem backend, driven as torch's test/distributed/test_distributed_spawn.py drives it for gloo.

    BACKEND=hpshmem WORLD_SIZE=2 python -m pytest tests/torch_suite -k "<tests>"

The suite decides at import, from the backend's name, which tests apply (features it knows gloo or
NCCL to have). hpshmem is held to gloo's decisions: the suite is imported as if for gloo, so every
test gloo runs is collected, and then every test runs on BACKEND (hpshmem). BACKEND=gloo runs the
same tests on gloo, for comparison (SKIPS.md records both).
"""

import os
import sys

os.environ.setdefault("BACKEND", "hpshmem")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", "/tmp")
BACKEND = os.environ["BACKEND"]

import torch  # noqa: E402,F401  (registers hpshmem through its entry point)

# Gates read the name at import (module constant BACKEND, decorators); bodies and set-up read the
# module constant or the environment at run time. Import under gloo's name, then name the real one.
os.environ["BACKEND"] = "gloo"
import torch.testing._internal.distributed.distributed_test as _suite  # noqa: E402

os.environ["BACKEND"] = BACKEND
_suite.BACKEND = BACKEND

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

# One test of each operation the suite has for CPU tensors: what `make test` runs (the conftest
# beside this file deselects the rest unless HP_TORCH_SUITE=all, as `make test-full` sets).
QUICK = {
    "test_all_reduce_sum",
    "test_all_reduce_sum_async",
    "test_all_reduce_group_max",
    "test_all_reduce_product",
    "test_all_reduce_coalesced_sum",
    "test_reduce_sum",
    "test_broadcast",
    "test_all_gather",
    "test_all_gather_coalesced_simple",
    "test_all_gather_object_default_pg",
    "test_all_to_all_single_unequal_split",
    "test_all_to_all",
    "test_gather",
    "test_scatter",
    "test_barrier",
    "test_send_recv",
    "test_send_recv_any_source",
    "test_isend",
    "test_irecv",
    "test_coalescing_manager",
    "test_new_subgroups",
    "test_DistributedDataParallelCPU",
    "test_ddp_hook_parity_allreduce",
    "test_get_future",
    "test_destroy_group",
    "test_barrier_timeout_full_group",
    "test_accumulate_gradients_no_sync_allreduce_hook",
}


# Tests whose bodies pick their CPU set-up by asking for gloo by name (`if BACKEND == "gloo"`; with
# any other name they build no model at all). They run gloo's path on an hpshmem process group.
CPU_PATH_BY_NAME = {
    "test_accumulate_gradients_no_sync",
    "test_accumulate_gradients_no_sync_grad_is_view",
    "test_accumulate_gradients_no_sync_allreduce_hook",
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook",
}


def _gloo_paths_on(backend):
    """In this (test) process: the suite's bodies see "gloo", the process group they make is `backend`."""
    import torch.distributed as dist

    init = dist.init_process_group

    def init_as(*args, **kwargs):
        if kwargs.get("backend") == "gloo":
            kwargs["backend"] = backend
        return init(*args, **kwargs)

    _suite.BACKEND = "gloo"
    dist.init_process_group = init_as


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):
        if test_name in CPU_PATH_BY_NAME and BACKEND != "gloo":
            _gloo_paths_on(BACKEND)
        super()._run(rank, test_name, file_name, pipe, **kwargs)


if __name__ == "__main__":
    sys.exit(run_tests())
