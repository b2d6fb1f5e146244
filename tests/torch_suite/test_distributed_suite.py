"""PyTorch's own distributed test suite (torch.testing._internal.distributed.distributed_test) on the
hpshmem backend, driven as torch's test/distributed/test_distributed_spawn.py drives it for gloo.

    BACKEND=hpshmem WORLD_SIZE=2 python -m pytest tests/torch_suite -k "<tests>"

The suite gates many tests on the backend's name (features it knows gloo and NCCL to have); the
hpshmem backend is added to the sets of the features it has (DDP, subgroups), so those tests run
on it rather than skip. BACKEND=gloo runs the same tests on gloo, for comparison.
"""
import os
import sys

os.environ.setdefault("BACKEND", "hpshmem")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", "/tmp")

import torch  # noqa: E402,F401  (registers hpshmem through its entry point)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

for feature in ("ddp", "subgroup"):
    DistTestCases.backend_feature[feature].add("hpshmem")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


# One test of each operation the suite has for CPU tensors: what `make test` runs (the conftest
# beside this file deselects the rest unless HP_TORCH_SUITE=all, as `make test-full` sets).
QUICK = {
    "test_all_reduce_sum", "test_all_reduce_sum_async", "test_all_reduce_group_max", "test_all_reduce_product",
    "test_all_reduce_coalesced_sum", "test_reduce_sum", "test_broadcast", "test_all_gather",
    "test_all_gather_coalesced_simple", "test_all_gather_object_default_pg", "test_all_to_all_single_unequal_split",
    "test_all_to_all", "test_gather", "test_scatter", "test_barrier", "test_send_recv", "test_send_recv_any_source",
    "test_isend", "test_irecv", "test_coalescing_manager", "test_new_subgroups", "test_DistributedDataParallelCPU",
    "test_ddp_hook_parity_allreduce", "test_get_future", "test_destroy_group",
}


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    sys.exit(run_tests())
